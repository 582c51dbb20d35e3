#include "shardscope/core/intervals.hpp"

#include <algorithm>

namespace shardscope {

std::vector<Interval> merge_intervals(std::vector<Interval> v) {
  // Only starts need ordering (ties merge whatever their order); ops of one stream come sorted.
  const auto by_start = [](const Interval& x, const Interval& y) { return x.first < y.first; };
  if (!std::is_sorted(v.begin(), v.end(), by_start)) std::sort(v.begin(), v.end(), by_start);
  std::size_t n = 0;  // merged in place: v[0, n) is the union so far
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto [a, b] = v[i];
    if (b <= a) continue;
    if (n > 0 && a <= v[n - 1].second) {
      v[n - 1].second = std::max(v[n - 1].second, b);
    } else {
      v[n++] = {a, b};
    }
  }
  v.resize(n);
  return v;
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
