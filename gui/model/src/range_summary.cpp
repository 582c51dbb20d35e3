#include "shardscope/gui/range_summary.hpp"

#include <algorithm>

namespace shardscope::gui {
namespace {

using Interval = std::pair<TimeNs, TimeNs>;

std::vector<Interval> merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

TimeNs total(const std::vector<Interval>& v) {
  TimeNs t = 0;
  for (const auto& [a, b] : v) t += b - a;
  return t;
}

}  // namespace

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
  const auto c = merge(compute), m = merge(comm);
  r.compute = total(c);
  r.communication = total(m);
  // Communication minus compute, interval by interval.
  TimeNs hidden = 0;
  for (const auto& [a, b] : m) {
    for (const auto& [x, y] : c) hidden += std::max<TimeNs>(0, std::min(b, y) - std::max(a, x));
  }
  r.exposed_communication = r.communication - hidden;
  r.overlap = r.communication > 0 ? static_cast<double>(hidden) / static_cast<double>(r.communication) : 1.0;
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
