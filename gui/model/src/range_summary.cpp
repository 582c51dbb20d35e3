#include "shardscope/gui/range_summary.hpp"

#include <algorithm>

#include "shardscope/core/intervals.hpp"

namespace shardscope::gui {
RangeSummary summarize_range(const Timeline& t, TimeNs start, TimeNs end) {
  RangeSummary r;
  r.start = std::min(start, end);
  r.end = std::max(start, end);
  std::vector<Interval> compute, comm;
  for (const auto& op : t.ops) {
    const TimeNs a = std::max(op.start, r.start), b = std::min(op.end, r.end);
    if (b <= a) continue;
    ++r.ops;
    if (is_collective(op.kind)) {
      comm.emplace_back(a, b);
    } else if (t.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::compute) {
      compute.emplace_back(a, b);
    }
  }
  const auto c = merge_intervals(compute), m = merge_intervals(comm);
  r.compute = total_length(c);
  r.communication = total_length(m);
  r.exposed_communication = uncovered_length(m, c);
  const TimeNs hidden = r.communication - r.exposed_communication;
  r.overlap = r.communication > 0
                  ? static_cast<double>(hidden) / static_cast<double>(r.communication)
                  : 1.0;
  // Memory: the sample in force at the range start, and every sample inside it.
  const auto first = std::upper_bound(t.memory.begin(), t.memory.end(), r.start,
                                      [](TimeNs v, const MemorySample& s) { return v < s.time; });
  auto it = first == t.memory.begin() ? first : first - 1;
  for (; it != t.memory.end() && it->time < r.end; ++it) {
    r.peak_allocated = std::max(r.peak_allocated, it->allocated);
    r.peak_reserved = std::max(r.peak_reserved, it->reserved);
  }
  return r;
}

}  // namespace shardscope::gui
