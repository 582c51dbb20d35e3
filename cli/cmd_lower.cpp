#include <fmt/format.h>

#include <map>

#include "commands.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope::cli {

int run_lower(const LowerArgs& args) {
  check_outputs(args.scenario, {{"--json", args.json_path}});
  const Scenario scenario = load_scenario_args(args.scenario);
  const Schedule schedule = lower(scenario);
  if (auto problems = check_schedule(schedule, "lowered schedule"); !problems.empty()) {
    throw ValidationError(std::move(problems));  // a lowering bug; never silently written
  }
  if (!args.json_path.empty()) write_text_file_atomic(args.json_path, schedule_to_json(schedule));
  if (args.order) {
    for (std::size_t i = 0; i < schedule.ops.size(); ++i) {
      fmt::print("{:>6}  {}\n", i, describe_op(schedule, schedule.ops[i]));
    }
    return kExitOk;
  }
  std::map<OpKind, int> counts;
  for (const auto& op : schedule.ops) ++counts[op.kind];
  fmt::print(
      "lowered {}: {} ops, {} buffers, {} streams, {} communicators, {} groups, {} iteration{}\n",
      args.scenario.path, schedule.ops.size(), schedule.buffers.size(), schedule.streams.size(),
      schedule.communicators.size(), schedule.groups.size(), schedule.iterations,
      schedule.iterations == 1 ? "" : "s");
  for (const auto& [kind, n] : counts) fmt::print("  {:<16} {:>7} ops\n", to_string(kind), n);
  if (!args.json_path.empty()) fmt::print("wrote {}\n", args.json_path);
  return kExitOk;
}

}  // namespace shardscope::cli
