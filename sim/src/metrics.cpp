#include "shardscope/sim/metrics.hpp"

#include <fmt/format.h>

#include <array>

namespace shardscope::sim {
namespace {

std::string op_name(const Schedule& s, OpId id) {
  const Op& op = s.ops[static_cast<std::size_t>(id)];
  return analysis::op_description(
      op.kind,
      op.group == kNone ? "-" : std::string_view(s.groups[static_cast<std::size_t>(op.group)].name),
      op.phase, op.iteration);
}

// From the op that ended last, follow what bound each start back through the last iteration.
analysis::CriticalPath exact_critical_path(const Schedule& s, const SimulationResult& r) {
  const int last = s.iterations - 1;
  OpId cur = kNone;
  TimeNs latest = -1;
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    if (r.ops[i].end > latest) {
      latest = r.ops[i].end;
      cur = static_cast<OpId>(i);
    }
  }
  analysis::CriticalPathBuilder builder;
  while (cur != kNone && s.ops[static_cast<std::size_t>(cur)].iteration == last) {
    const auto& rec = r.ops[static_cast<std::size_t>(cur)];
    builder.add_op(cur, s.ops[static_cast<std::size_t>(cur)].kind, rec.end - rec.start);
    const OpId pred = rec.predecessor;
    if (pred != kNone && rec.binding == Binding::issue)
      builder.add_cpu_gap(rec.start - r.ops[static_cast<std::size_t>(pred)].start);
    cur = pred;
  }
  return std::move(builder).finish();
}

}  // namespace

analysis::Summary summarize(const Schedule& s, const SimulationResult& r) {
  auto out = analysis::summarize(r.timeline, false);
  if (r.critical_path_recorded) out.critical_path = exact_critical_path(s, r);
  // The CPU lane is busy issuing ops (launch and hook overheads), not only running CPU ops.
  const auto last = static_cast<std::size_t>(s.iterations - 1);
  for (std::size_t st = 0; st < s.streams.size(); ++st) {
    if (s.streams[st].kind == StreamKind::cpu && last < r.cpu_busy_by_iteration.size())
      out.stream_busy[st].second = r.cpu_busy_by_iteration[last];
  }
  out.allocator_retries = r.allocator_retries;
  out.fits = !r.out_of_memory && out.peak_reserved <= out.capacity;
  if (r.out_of_memory) {
    const auto& oom = *r.out_of_memory;
    const Buffer& buf = s.buffers[static_cast<std::size_t>(oom.buffer)];
    out.out_of_memory =
        fmt::format("{} ({}, {}) does not fit at {}: {} reserved of {}", buffer_name(s, oom.buffer),
                    to_string(buf.category), format_bytes(buf.size),
                    oom.op == kNone ? "start" : op_name(s, oom.op), format_bytes(oom.reserved),
                    format_bytes(r.capacity));
  }
  return out;
}

}  // namespace shardscope::sim
