// `shardscope simulate IR.json`: a schedule IR written by `lower --json` (or edited by hand) is
// simulated as it stands. The IR holds the ops, not the hardware, so the cluster comes from
// --cluster (default h100-sxm-80gb) laid out as the IR's communicators say.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "commands.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/model_presets.hpp"
#include "shardscope/core/schedule_check.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope::cli {

bool is_schedule_file(const std::string& path) {
  if (!path.ends_with(".json")) return false;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  // The schema key is the first one lower --json writes (a scenario never has it): the head of
  // the file tells, without reading a large IR twice.
  std::ifstream in(path, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  static const std::regex kSchema(R"re("schema"\s*:\s*"shardscope\.schedule/)re");
  return std::regex_search(head, kSchema);
}

Schedule load_schedule_file(const std::string& path) {
  Schedule schedule = schedule_from_json(read_text_file(path), path);
  if (auto problems = check_schedule(schedule, path); !problems.empty())
    throw ValidationError(std::move(problems));
  if (static_cast<std::int64_t>(schedule.ops.size()) > kMaxScheduleOps) {
    throw ValidationError({Problem{
        path, "ops",
        fmt::format("{} ops", format_count(static_cast<std::int64_t>(schedule.ops.size()))),
        fmt::format("at most {}", format_count(kMaxScheduleOps))}});
  }
  return schedule;
}

Scenario scenario_for_schedule(const Schedule& schedule, const ScenarioArgs& args) {
  const std::string preset = args.cluster_preset.empty() ? "h100-sxm-80gb" : args.cluster_preset;
  const auto cluster = find_cluster_preset(preset);
  if (!cluster)
    throw ValidationError(
        {Problem{"--cluster", "", fmt::format("unknown cluster preset '{}'", preset),
                 "see shardscope presets"}});
  Scenario s;
  s.source = args.path;
  s.cluster = *cluster;
  apply_measured_file_args(s, args);
  s.allocator.expandable_segments = args.expandable_segments;
  int nodes = 1;
  for (const auto& c : schedule.communicators) nodes = std::max(nodes, c.nodes);
  s.cluster.nodes = nodes;
  s.cluster.gpus_per_node = std::max(1, schedule.world_size / nodes);
  if (s.cluster.world_size() != schedule.world_size) {
    throw ValidationError({Problem{
        args.path, "world_size",
        fmt::format("{} ranks do not spread evenly over the {} nodes the communicators span",
                    schedule.world_size, nodes),
        "a world size that is a multiple of the node count"}});
  }
  // Compute runs in the all-gathered dtype; the model's FLOPs per token are what the ops carry.
  int microbatches = 1;
  double forward_flops = 0, backward_flops = 0;
  for (const auto& op : schedule.ops) {
    microbatches = std::max(microbatches, op.microbatch + 1);
    if (op.iteration != schedule.iterations - 1) continue;
    if (op.kind == OpKind::forward) forward_flops += op.flops;
    if (op.kind == OpKind::backward) backward_flops += op.flops;
  }
  for (const auto& b : schedule.buffers) {
    if (b.category == BufferCategory::all_gather_output)
      s.fsdp.mixed_precision.param_dtype = b.dtype;
    if (b.location == Location::host) s.fsdp.cpu_offload.params = true;
  }
  s.model.family = ModelFamily::custom;
  s.model.name = schedule.name;
  CustomGroup all;
  all.name = "schedule";
  all.forward_flops = forward_flops / microbatches;
  all.backward_flops = backward_flops / microbatches;
  s.model.groups.push_back(all);
  s.training.iterations = schedule.iterations;
  s.training.grad_accum = microbatches;
  s.training.micro_batch = 1;
  s.training.seq_len = std::max<std::int64_t>(1, schedule.tokens_per_iteration / microbatches);
  s.fsdp.mesh_shard = schedule.world_size;
  return s;
}

}  // namespace shardscope::cli
