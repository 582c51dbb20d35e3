#pragma once
// Unions of time intervals: busy time, exposed communication (what compute does not cover).

#include <utility>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope {

using Interval = std::pair<TimeNs, TimeNs>;  // [start, end)

/// Sorted, non-overlapping union of `intervals` (empty ones dropped).
std::vector<Interval> merge_intervals(std::vector<Interval> intervals);
/// Total length of a merged list.
TimeNs total_length(const std::vector<Interval>& merged);
/// Length of `a` not covered by `b` (both merged).
TimeNs uncovered_length(const std::vector<Interval>& a, const std::vector<Interval>& b);

}  // namespace shardscope
