#include "shardscope/sim/step_floor.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "op_cost_cache.hpp"

namespace shardscope::sim {

namespace {

bool is_compute_work(OpKind kind) {
  return kind == OpKind::forward || kind == OpKind::backward || kind == OpKind::recompute;
}

}  // namespace

TimeNs step_time_floor(const Schedule& s, const CostModel& costs) {
  constexpr TimeNs kUnreached = std::numeric_limits<TimeNs>::min();
  const int last = last_iteration(s);
  // The earliest end, after the step's start, of each op a chain from the compute ops reaches.
  std::vector<TimeNs> end(s.ops.size(), kUnreached);
  std::vector<TimeNs> stream_end(s.streams.size(), kUnreached);  // the last reached op's
  TimeNs cpu_end = kUnreached;  // the last reached op the CPU ran: nothing is issued before
  TimeNs floor = 0;
  OpCostCache cache;
  for (std::size_t i = first_op_of(s, last); i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    const auto stream = static_cast<std::size_t>(op.stream);
    const StreamKind kind = s.streams[stream].kind;
    const bool on_cpu = kind == StreamKind::cpu;
    TimeNs start = kind == StreamKind::compute && is_compute_work(op.kind) ? 0 : kUnreached;
    for (OpId d : op.deps) start = std::max(start, end[static_cast<std::size_t>(d)]);
    start = std::max({start, cpu_end, on_cpu ? kUnreached : stream_end[stream]});
    if (start == kUnreached) continue;
    end[i] = start + std::max<TimeNs>(cache.cost(costs, s, op).duration, 0);
    (on_cpu ? cpu_end : stream_end[stream]) = end[i];
    floor = std::max(floor, end[i]);
  }
  return floor - floor / 1'000'000;
}

}  // namespace shardscope::sim
