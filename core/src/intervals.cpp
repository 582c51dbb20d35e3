#include "shardscope/core/intervals.hpp"

#include <algorithm>

namespace shardscope {

std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

TimeNs total_length(const std::vector<Interval>& merged) {
  TimeNs total = 0;
  for (const auto& [a, b] : merged) total += b - a;
  return total;
}

TimeNs uncovered_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  TimeNs total = 0;
  std::size_t j = 0;
  for (const auto& [s, e] : a) {
    TimeNs cur = s;
    while (j < b.size() && b[j].second <= cur) ++j;
    for (std::size_t k = j; cur < e; ++k) {
      if (k >= b.size() || b[k].first >= e) {
        total += e - cur;
        break;
      }
      if (b[k].first > cur) total += b[k].first - cur;
      cur = std::max(cur, b[k].second);
    }
  }
  return total;
}

}  // namespace shardscope
