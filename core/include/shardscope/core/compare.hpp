#pragma once
// Two timelines side by side (a prediction and a measurement, two runs, two settings): headline
// metrics of their steady states, time per op kind, and each matched op's delta. Ops are matched
// by (iteration, phase, group, kind) and their order within that key (by start), so the k-th
// all-gather of layers.3 in backward of iteration 1 meets its counterpart whatever its op id;
// what one has and the other lacks is counted, never silently dropped.

#include <string>
#include <vector>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::analysis {

struct MetricPair {
  std::string name;  // "step time"
  std::string unit;  // "s", "B", "%", "tokens/s"
  double a = 0;
  double b = 0;
};

struct KindTimes {
  OpKind kind = OpKind::forward;
  TimeNs a = 0;  // busy time of this kind in the steady state (sum of op durations)
  TimeNs b = 0;
  int a_ops = 0;
  int b_ops = 0;
};

struct MatchedOp {
  int iteration = 0;
  Phase phase = Phase::forward;
  std::string group;
  OpKind kind = OpKind::forward;
  int order = 0;  // k-th op with this key
  OpId a_op = kNone;
  OpId b_op = kNone;
  TimeNs start_delta = 0;     // b − a
  TimeNs duration_delta = 0;  // b − a
  TimeNs a_duration = 0;
};

struct Comparison {
  Summary a;
  Summary b;
  std::vector<MetricPair> metrics;
  std::vector<KindTimes> kinds;  // kinds either side has, in OpKind order
  std::vector<MatchedOp> ops;    // largest |duration delta| first, then |start delta|
  int only_in_a = 0;             // ops with no counterpart
  int only_in_b = 0;
};

Comparison compare(const Timeline& a, const Timeline& b);

/// A readable report; with `per_op`, the `top` largest op deltas (0: all).
std::string comparison_table(const Comparison& c, bool per_op, std::size_t top = 20);
/// shardscope.compare/1 JSON; with `per_op`, every matched op.
std::string comparison_json(const Comparison& c, bool per_op);

}  // namespace shardscope::analysis
