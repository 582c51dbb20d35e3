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
  return scenario.training.iterations * scenario.training.grad_accum * groups * kOpsPerGroupStep;
}

Schedule lower(const Scenario& scenario) {
  if (const auto ops = estimated_schedule_ops(scenario); ops > kMaxScheduleOps) {
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
