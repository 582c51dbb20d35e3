#pragma once
// Two timelines side by side (a prediction and a measurement, two runs, two settings): headline
// metrics of their steady states, time per op kind, and each matched op's delta. Ops are matched
// by (iteration, phase, group, kind) and their order within that key (by start), so the k-th
// all-gather of layers.3 in backward of iteration 1 meets its counterpart whatever its op id;
// what one has and the other lacks is counted, never silently dropped.

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::analysis {

struct MetricPair {
  std::string name;         // "step time"
  std::string unit;         // "s", "B", "%", "tokens/s"
  std::optional<double> a;  // nullopt: that run did not record what the metric needs
  std::optional<double> b;
  bool known() const { return a && b; }
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

/// Collectives or host copies of one kind one side ran and the other did not (an extra
/// all-gather: a module FSDP did not wrap, an unexpected reshard), with a few of their keys to
/// find them by. Compute is compared by busy time instead: a trace has an op per kernel.
struct UnmatchedOps {
  OpKind kind = OpKind::forward;
  int count = 0;
  TimeNs time = 0;                    // their summed duration
  std::vector<std::string> examples;  // up to 3, "layers.0 forward it 1 #2"
};

/// Matched collectives that ran on another kind of stream than their counterpart (a collective
/// on the compute stream serialises with compute: no overlap).
struct StreamMismatch {
  OpKind kind = OpKind::all_gather;
  StreamKind a_stream = StreamKind::communication;
  StreamKind b_stream = StreamKind::communication;
  int count = 0;
  std::string example;
};

struct Comparison {
  Summary a;
  Summary b;
  std::vector<MetricPair> metrics;
  std::vector<KindTimes> kinds;  // kinds either side has, in OpKind order
  std::vector<MatchedOp> ops;    // largest |duration delta| first, then |start delta|
  int only_in_a = 0;             // ops with no counterpart
  int only_in_b = 0;
  std::vector<UnmatchedOps> extra_in_a;  // by kind, in OpKind order
  std::vector<UnmatchedOps> extra_in_b;  // what B (the measured run) did that A did not
  std::vector<StreamMismatch> stream_mismatches;
  // Streams each side ran a collective kind on, when the counts differ (A: 1, B: 2).
  std::vector<std::tuple<OpKind, int, int>> collective_streams;
};

Comparison compare(const Timeline& a, const Timeline& b);

/// Why `a` and `b` are not runs of one job, a line each ("world size: 2 in A, 8 in B"): the world
/// sizes, and where both know them the tokens per iteration, the model's FLOPs per token, the
/// GPU's peak FLOP/s and the job settings (Provenance::job). Empty: nothing says they differ.
std::vector<std::string> job_differences(const Timeline& a, const Timeline& b);

/// A metric's value with its unit ("2.549 s", "78.89 GiB", "37.6 %", "6429 tokens/s"), and a
/// signed difference ("+52.0 ms", "−1.2 GiB"); both as the report prints them.
std::string format_metric(double value, const std::string& unit);
/// As above, "unknown" for nullopt.
std::string format_metric(const std::optional<double>& value, const std::string& unit);
std::string format_metric_delta(double delta, const std::string& unit);
/// (b − a) / |a| in percent; 0 when both are 0, infinity when only a is.
double pct(double a, double b);

/// A readable report; with `per_op`, the `top` largest op deltas (0: all).
std::string comparison_table(const Comparison& c, bool per_op, std::size_t top = 20);
/// shardscope.compare/1 JSON; with `per_op`, every matched op.
std::string comparison_json(const Comparison& c, bool per_op);

}  // namespace shardscope::analysis
