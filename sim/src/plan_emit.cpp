#include "shardscope/sim/plan_emit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "plan_emit_common.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/scenario_keys.hpp"
#include "shardscope/sim/plan_space.hpp"

namespace shardscope::sim {

std::optional<EmitTarget> parse_emit_target(std::string_view text) {
  if (text == "fsdp2") return EmitTarget::fsdp2;
  if (text == "fsdp1") return EmitTarget::fsdp1;
  if (text == "torchtitan") return EmitTarget::torchtitan;
  if (text == "scenario") return EmitTarget::scenario;
  return std::nullopt;
}

std::string_view to_string(EmitTarget target) {
  switch (target) {
    case EmitTarget::fsdp2:
      return "fsdp2";
    case EmitTarget::fsdp1:
      return "fsdp1";
    case EmitTarget::torchtitan:
      return "torchtitan";
    case EmitTarget::scenario:
      return "scenario";
  }
  return "fsdp2";
}

std::string_view emit_api(EmitTarget target) {
  if (target == EmitTarget::scenario) return "either";
  return target == EmitTarget::fsdp1 ? "fsdp1" : "fsdp2";
}

std::vector<std::pair<std::string, std::vector<std::string>>> emit_constraints(EmitTarget target) {
  switch (target) {
    case EmitTarget::fsdp2:
      return {{"fsdp.api", {"fsdp2"}}};
    case EmitTarget::fsdp1:
      // One block per FlatParameter unit: FSDP1 cannot group sibling blocks without a model change.
      return {{"fsdp.api", {"fsdp1"}}, {"fsdp.wrap.blocks_per_group", {"1"}}};
    case EmitTarget::torchtitan:
      // What torchtitan's job config (torchtitan/config/job_config.py) and run_train.sh set: its
      // own fp32-upcast cross-entropy, implicit prefetch, one block per fully_shard, fp32 reduction
      // (mixed_precision_reduce allows only float32), reshard_after_forward "default" (the last
      // group kept) or "never", no custom communication buffers,
      // PYTORCH_ALLOC_CONF=expandable_segments:True.
      return {{"fsdp.api", {"fsdp2"}},
              {"training.loss", {"upcast_fp32"}},
              {"fsdp.forward_prefetch_modules", {"0"}},
              {"fsdp.backward_prefetch_modules", {"0"}},
              {"fsdp.separate_reduce_scatter_group", {"false"}},
              {"fsdp.wrap.blocks_per_group", {"1"}},
              {"fsdp.mixed_precision.reduce_dtype", {"fp32"}},
              {"fsdp.reshard_after_forward", {"true", "false"}},
              {"fsdp.reshard_last_after_forward", {"false"}},
              {"fsdp.all_gather_buffer", {"caching_allocator"}},
              {"fsdp.comm_buffer_pool", {"caching_allocator"}},
              {"allocator.expandable_segments", {"true"}}};
    case EmitTarget::scenario:
      return {};
  }
  return {};
}

namespace detail {

std::string prediction_lines(const EmitContext& c, std::string_view prefix) {
  const auto& sum = c.summary;
  return fmt::format(
      "{0}shardscope's prediction (rank {1} of `{2}`):\n"
      "{0}  step time {3}, {4}, MFU {5},\n"
      "{0}  peak reserved {6} per GPU against a budget of {7}.\n"
      "{0}A prediction, not a measurement: check it with a profiled run (shardscope compare).\n",
      prefix, c.rank, c.command, format_duration(sum.step_time),
      analysis::throughput_text(sum.tokens_per_s_per_gpu), analysis::percent_text(sum.mfu),
      analysis::bytes_text(sum.peak_reserved), format_bytes(c.memory_budget));
}

}  // namespace detail

namespace {

// What torchtitan cannot say, reported before anything is written.
void check_torchtitan(const Scenario& s) {
  std::vector<Problem> problems;
  const auto& f = s.fsdp;
  auto need = [&problems](bool ok, std::string key, std::string value, std::string why,
                          std::string allowed) {
    if (!ok)
      problems.push_back({std::move(key), std::move(value), std::move(why), std::move(allowed)});
  };
  need(f.api == FsdpApi::fsdp2, "fsdp.api", "fsdp1", "torchtitan shards with fully_shard", "fsdp2");
  need(s.training.loss == LossRecipe::upcast_fp32, "training.loss",
       std::string(to_string(s.training.loss)), "torchtitan computes an fp32-upcast cross-entropy",
       "upcast_fp32");
  need(f.forward_prefetch_modules == 0 && f.backward_prefetch_modules == 0,
       "fsdp.forward_prefetch_modules", "explicit prefetch",
       "torchtitan uses FSDP's implicit prefetch", "0");
  need(!f.separate_reduce_scatter_group, "fsdp.separate_reduce_scatter_group", "true",
       "torchtitan has no key for it", "false");
  need(f.blocks_per_group == 1, "fsdp.wrap.blocks_per_group", std::to_string(f.blocks_per_group),
       "torchtitan shards each block on its own", "1");
  need(f.reshard_after_forward.mode != ReshardAfterForward::Mode::to_size,
       "fsdp.reshard_after_forward", std::to_string(f.reshard_after_forward.size),
       "torchtitan's fsdp_reshard_after_forward has no mesh size", "true or false");
  need(!f.reshard_last_after_forward ||
           f.reshard_after_forward.mode == ReshardAfterForward::Mode::off,
       "fsdp.reshard_last_after_forward", "true", "torchtitan's \"default\" keeps the last group",
       "false");
  need(f.mixed_precision.reduce_dtype.value_or(DType::fp32) == DType::fp32,
       "fsdp.mixed_precision.reduce_dtype", "not fp32", "torchtitan reduces in float32 only",
       "fp32");
  const DType param = param_dtype(f.mixed_precision);
  need(param == DType::bf16 || param == DType::fp32, "fsdp.mixed_precision.param_dtype",
       std::string(to_string(param)), "torchtitan offers bfloat16 or float32", "bf16 or fp32");
  // torchtitan's apply_fsdp builds MixedPrecisionPolicy(param_dtype, reduce_dtype) only.
  need(
      !f.mixed_precision.output_dtype, "fsdp.mixed_precision.output_dtype",
      f.mixed_precision.output_dtype ? std::string(to_string(*f.mixed_precision.output_dtype)) : "",
      "torchtitan's MixedPrecisionPolicy sets no output_dtype", "none (remove it)");
  need(casts_forward_inputs(f.mixed_precision, FsdpApi::fsdp2),
       "fsdp.mixed_precision.cast_forward_inputs", "false",
       "torchtitan's MixedPrecisionPolicy keeps cast_forward_inputs=True", "true");
  need(f.all_gather_buffer == AllGatherBuffer::caching_allocator, "fsdp.all_gather_buffer",
       "persistent", "torchtitan has no key for a custom all-gather", "caching_allocator");
  need(f.comm_buffer_pool == CommBufferPool::caching_allocator, "fsdp.comm_buffer_pool",
       "process_group", "torchtitan has no key for set_allocate_memory_from_process_group_for_comm",
       "caching_allocator");
  need(s.training.generation.calls == 0, "training.generation.calls",
       std::to_string(s.training.generation.calls), "torchtitan's trainer has no generation step",
       "0");
  need(s.training.optimizer != Optimizer::sgd, "training.optimizer", "sgd",
       "torchtitan builds Adam or AdamW", "adamw or adam");
  need(!s.training.autocast, "training.autocast", "set",
       "torchtitan uses autocast only without FSDP sharding", "none");
  need(f.requires_gradient_sync == SyncSchedule::every_microbatch &&
           f.requires_all_reduce == SyncSchedule::every_microbatch &&
           f.is_last_backward == SyncSchedule::every_microbatch,
       "fsdp.requires_gradient_sync", "last_microbatch",
       "torchtitan reduces gradients every micro-batch", "every_microbatch");
  need(s.allocator.expandable_segments, "allocator.expandable_segments", "false",
       "torchtitan's run_train.sh sets expandable_segments:True", "true");
  throw_if_any(std::move(problems));
}

std::string torchtitan_checkpointing(const TrainingSpec& t) {
  // torchtitan passes early_stop=False to checkpoint_wrapper unless told otherwise, so each
  // backward recomputes a whole block; the plan assumes PyTorch's default, which stops once the
  // last tensor backward needs is rebuilt (docs/semantics.md, "block recompute").
  const std::string early_stop =
      "early_stop = true  # stop recomputing at the last tensor backward needs, as the plan does\n";
  switch (t.activation_checkpointing) {
    case ActivationCheckpointing::none:
      return "mode = \"none\"\n";
    case ActivationCheckpointing::full:
      return "mode = \"full\"\n" + early_stop;
    case ActivationCheckpointing::selective_op:
      return "mode = \"selective\"\nselective_ac_option = \"op\"  # save attention and every other "
             "matmul\n" +
             early_stop;
    case ActivationCheckpointing::every_n:
      return fmt::format(
                 "mode = \"selective\"\nselective_ac_option = \"{}\"  # every {}-th block\n",
                 t.checkpoint_every, t.checkpoint_every) +
             early_stop;
  }
  return "mode = \"none\"\n";
}

std::string emit_torchtitan(const Scenario& s, const EmitContext& c) {
  check_torchtitan(s);
  const auto& t = s.training;
  const auto& f = s.fsdp;
  const int world = s.cluster.world_size();
  std::string out = fmt::format(
      "# torchtitan job config for {} on {} × {} {} ({} GPUs), written by\n"
      "# `shardscope plan --emit torchtitan`: the [training], [parallelism], "
      "[activation_checkpoint]\n"
      "# and [optimizer] keys of torchtitan/config/job_config.py; merge them into your "
      "config.\n#\n",
      s.model.name, s.cluster.nodes, s.cluster.gpus_per_node, s.cluster.gpu.name, world);
  out += detail::prediction_lines(c, "# ");
  out += fmt::format(
      "#\n# Launch on {} ranks with PYTORCH_ALLOC_CONF=expandable_segments:True (run_train.sh sets "
      "it;\n"
      "# the plan's memory assumes it).\n\n",
      world);
  const DType param = param_dtype(f.mixed_precision);
  out += fmt::format(
      "[training]\n"
      "local_batch_size = {}  # sequences per GPU per micro-batch\n"
      "global_batch_size = {}  # sequences per step: {} micro-batches accumulated\n"
      "seq_len = {}\n"
      "mixed_precision_param = \"{}\"\n"
      "mixed_precision_reduce = \"float32\"\n"
      "enable_cpu_offload = {}\n\n",
      t.micro_batch, t.micro_batch * t.grad_accum * world, t.grad_accum, t.seq_len,
      param == DType::bf16 ? "bfloat16" : "float32", f.cpu_offload.params ? "true" : "false");
  out += fmt::format(
      "[parallelism]\n"
      "data_parallel_replicate_degree = {}\n"
      "data_parallel_shard_degree = {}\n"
      "fsdp_reshard_after_forward = \"{}\"\n\n",
      f.mesh_replicate, f.mesh_shard,
      f.reshard_after_forward.mode == ReshardAfterForward::Mode::off ? "never" : "default");
  out += "[activation_checkpoint]\n" + torchtitan_checkpointing(t) + "\n";
  // torchtitan's own default is "fused"; the plan's implementation is written either way.
  out +=
      fmt::format("[optimizer]\nname = \"{}\"\nimplementation = \"{}\"\n",
                  t.optimizer == Optimizer::adam ? "Adam" : "AdamW", to_string(t.optimizer_impl));
  return out;
}

}  // namespace

std::vector<Problem> emit_problems(EmitTarget target, const Scenario& base) {
  // The emitted code builds the model's own nn.Linear layers; TransformerEngine's modules and
  // fp8_autocast are the training script's to set up (torchtitan's fp8 is torchao's
  // Float8Linear, not modelled). A scenario file says training.fp8 as it is.
  if (target == EmitTarget::scenario || base.training.fp8 == Fp8Recipe::none) return {};
  return {{"training.fp8", std::string(to_string(base.training.fp8)),
           fmt::format("--emit {} writes code that builds the model's own nn.Linear layers, not "
                       "TransformerEngine's fp8 modules",
                       to_string(target)),
           "none, or --emit scenario"}};
}

std::string emit_plan(EmitTarget target, const Scenario& scenario, const EmitContext& context) {
  if (target == EmitTarget::scenario)
    throw std::logic_error("emit_plan: a scenario is emitted from its tree (emit_scenario)");
  if (auto problems = emit_problems(target, scenario); !problems.empty())
    throw ValidationError(std::move(problems));
  if (target == EmitTarget::torchtitan) return emit_torchtitan(scenario, context);
  const FsdpApi api = target == EmitTarget::fsdp1 ? FsdpApi::fsdp1 : FsdpApi::fsdp2;
  if (scenario.fsdp.api != api)
    throw ValidationError(
        {{"fsdp.api", std::string(to_string(scenario.fsdp.api)),
          fmt::format("--emit {} writes {} code", to_string(target), to_string(api)),
          std::string(to_string(api))}});
  return detail::emit_python(target, scenario, context);
}

std::string emit_scenario(const ConfigTree& tree, const std::string& file,
                          const std::string& output, const std::string& configuration,
                          const EmitContext& context) {
  ConfigTree out = tree;
  const auto from = std::filesystem::absolute(file).parent_path();
  const auto to = std::filesystem::absolute(output).parent_path();
  for (const ScenarioKey& key : scenario_keys()) {
    if (!key.names_a_file) continue;
    const auto at = key_pointer(key.path);
    if (!out.contains(at) || !out[at].is_string()) continue;
    const std::filesystem::path path(out[at].get<std::string>());
    if (path.is_relative())
      out[at] = (from / path).lexically_normal().lexically_relative(to).string();
  }
  std::string text = fmt::format(
      "# The scenario of plan #{} of `{}`,\n"
      "# written by `shardscope plan --emit scenario` from {}:\n",
      context.rank, context.command, file);
  // The configuration, its "a=b" items a few to a line.
  std::string line;
  for (std::size_t at = 0; at < configuration.size();) {
    const std::size_t comma = std::min(configuration.find(", ", at), configuration.size());
    const std::string item = configuration.substr(at, comma - at);
    if (!line.empty() && line.size() + item.size() > 90) {
      text += "#   " + line + ",\n";
      line.clear();
    }
    if (!line.empty()) line += ", ";
    line += item;
    at = comma + 2;
  }
  text += "#   " + line + "\n#\n";
  text += detail::prediction_lines(context, "# ");
  text += "#\n# `shardscope simulate` on this file makes the same prediction.\n\n";
  return text + config_to_yaml(out);
}

std::string emit_ranked(EmitTarget target, const ConfigTree& base, const std::string& file,
                        const PlanSpace& space, const PlanResult& result, std::size_t rank,
                        const std::string& command, const std::string& output) {
  const PlannedConfig& chosen = result.ranked.at(rank - 1);
  const EmitContext context{command, rank, chosen.summary, result.memory_budget};
  if (target == EmitTarget::scenario) {
    return emit_scenario(configuration_tree(base, space, chosen.index), file, output,
                         configuration_text(space, decode(space, chosen.index)), context);
  }
  return emit_plan(target, configuration_scenario(base, file, space, chosen.index), context);
}

}  // namespace shardscope::sim
