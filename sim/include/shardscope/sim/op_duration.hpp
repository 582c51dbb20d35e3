#pragma once
// Durations computed from rates (FLOPs / FLOP/s, bytes / bytes/s) enter the integer clock here.
// Contract: the longest op shardscope simulates is kMaxOpSeconds. With at most kMaxScheduleOps ops
// (lower.hpp) a run's clock then stays below 4·10^18 ns, inside TimeNs with room to spare, so no
// sum of durations wraps. An op beyond it means a model far too large for its cluster, or settings
// at the edge of their ranges together; it is reported as bad input, never cast into a wrapped
// time.

#include <string_view>

#include "shardscope/core/units.hpp"

namespace shardscope::sim {

inline constexpr double kMaxOpSeconds = 1000;

/// `seconds` rounded up to whole nanoseconds. Throws ValidationError naming `what` ("a compute
/// kernel", "a collective") when it is over kMaxOpSeconds or not a number.
TimeNs op_duration_ns(double seconds, std::string_view what);

}  // namespace shardscope::sim
