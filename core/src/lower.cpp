#include "shardscope/core/lower.hpp"

#include <fmt/format.h>

#include "lowering/fsdp_lowerers.hpp"

namespace shardscope {

Schedule lower(const Scenario& scenario) {
  return scenario.fsdp.api == FsdpApi::fsdp2 ? lowering::lower_fsdp2(scenario) : lowering::lower_fsdp1(scenario);
}

std::string describe_op(const Schedule& s, const Op& op) {
  const std::string group = op.group == kNone ? "-" : s.groups[static_cast<std::size_t>(op.group)].name;
  std::string out = fmt::format("{} {}  {} it{} mb{} on {}", to_string(op.kind), group, to_string(op.phase), op.iteration,
                                op.microbatch, s.streams[static_cast<std::size_t>(op.stream)].name);
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
