#include "shardscope/core/lower.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lowering/fsdp_lowerers.hpp"

namespace shardscope {

std::int64_t estimated_schedule_ops(const Scenario& scenario) {
  // Per group and micro-batch, lowering issues at most ~24 ops (all-gather, copies, compute,
  // recompute, reduce-scatter, all-reduce, waits, offload copies); key bounds keep this product
  // far from overflow (10,000 layers × 10,000 micro-batches × 1,000 iterations × 24 < 2^63).
  constexpr std::int64_t kOpsPerGroupStep = 24;
  const auto& m = scenario.model;
  const std::int64_t groups =
      m.family == ModelFamily::transformer
          ? m.transformer.layers / std::max<std::int64_t>(1, scenario.fsdp.blocks_per_group) + 2
          : static_cast<std::int64_t>(m.groups.size());
  // Generation: per group and forward at most ~10 ops (all-gather, copies, the forward, its
  // waits, reshard), calls × new tokens forwards per iteration (key bounds: < 2^63 too).
  constexpr std::int64_t kOpsPerGroupForward = 10;
  const auto& g = scenario.training.generation;
  const std::int64_t forwards = g.calls * g.new_tokens;
  return scenario.training.iterations * groups *
         (scenario.training.grad_accum * kOpsPerGroupStep + forwards * kOpsPerGroupForward);
}

Schedule lower(const Scenario& scenario) {
  if (const auto ops = estimated_schedule_ops(scenario); ops > kMaxScheduleOps) {
    if (const auto& g = scenario.training.generation; g.calls > 0) {
      throw ValidationError({Problem{
          scenario.source, "training.generation.new_tokens",
          fmt::format("the schedule would have about {} ops ({} iterations × ({} "
                      "micro-batches + {} calls × {} generated tokens) × the model's "
                      "groups), more than the {} shardscope simulates",
                      format_count(ops), scenario.training.iterations, scenario.training.grad_accum,
                      g.calls, g.new_tokens, format_count(kMaxScheduleOps)),
          "fewer new_tokens or calls (every forward is simulated), or fewer "
          "training.iterations (2 give the steady state)"}});
    }
    throw ValidationError(
        {Problem{scenario.source, "training.grad_accum",
                 fmt::format("the schedule would have about {} ops ({} iterations × {} "
                             "micro-batches × the model's groups), more than "
                             "the {} shardscope simulates",
                             format_count(ops), scenario.training.iterations,
                             scenario.training.grad_accum, format_count(kMaxScheduleOps)),
                 "fewer iterations (2 give the steady state), micro-batches, or groups "
                 "(fsdp.wrap.blocks_per_group)"}});
  }
  return scenario.fsdp.api == FsdpApi::fsdp2 ? lowering::lower_fsdp2(scenario)
                                             : lowering::lower_fsdp1(scenario);
}

std::string describe_op(const Schedule& s, const Op& op) {
  const std::string group =
      op.group == kNone ? "-" : s.groups[static_cast<std::size_t>(op.group)].name;
  std::string out =
      fmt::format("{} {}  {} it{} mb{} on {}", to_string(op.kind), group, to_string(op.phase),
                  op.iteration, op.microbatch, s.streams[static_cast<std::size_t>(op.stream)].name);
  if (op.comm != kNone) {
    const auto& c = s.communicators[static_cast<std::size_t>(op.comm)];
    out += fmt::format(" via {}({} ranks)", c.name, c.size);
  }
  if (op.bytes > 0) out += fmt::format(" {}", format_bytes(op.bytes));
  if (op.flops > 0) out += fmt::format(" {:.3g} FLOP", op.flops);
  if (op.fixed_time) out += fmt::format(" fixed {}", format_duration(*op.fixed_time));
  if (!op.deps.empty()) {
    out += " waits";
    for (OpId d : op.deps) out += fmt::format(" #{}", d);
  }
  if (const auto label = op_label(s, op); !label.empty()) out += fmt::format(" [{}]", label);
  return out;
}

}  // namespace shardscope
