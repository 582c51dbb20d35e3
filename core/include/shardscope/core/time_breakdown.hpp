#pragma once
// The views of a rank's device time that HolisticTraceAnalysis gives (HTA 0.5:
// hta/analyzers/breakdown_analysis.py, communication_analysis.py), computed on any Timeline with
// HTA's definitions, so a trace's numbers from both tools can be set side by side
// (docs/traces.md, "Side by side with HTA"):
//  * the device work is every op (HTA: every event on a GPU stream);
//  * each op's class follows HTA's get_kernel_type: communication (a collective, or an op labelled
//    like an NCCL kernel), memory (a host ↔ device copy, or an op labelled Memcpy…, Memset… or
//    dma…), other (labelled …Memcpy… or …Sync… otherwise), computation (everything else);
//  * temporal breakdown: the span from the first op's start to the last op's end; idle, the span
//    less the union of all ops; compute, the union of computation ops; non-compute, the rest;
//  * communication/computation overlap: the share of the union of communication ops that the
//    union of computation ops covers;
//  * time by type: how long each combination of computation, communication and memory runs,
//    alone or together ("computation overlapping communication").

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardscope/core/timeline.hpp"

namespace shardscope::analysis {

enum class WorkClass { computation, communication, memory, other };

WorkClass work_class(const Timeline& t, const TimelineOp& op);

struct TimeBreakdown {
  std::string name;  // the run's
  int rank = 0;
  TimeNs span = 0;
  TimeNs idle = 0;
  TimeNs compute = 0;
  TimeNs non_compute = 0;
  std::optional<double> comm_comp_overlap;  // a share; none without communication
  // Each combination of classes that ran and for how long, in the order of its set (computation
  // = 1, communication = 2, memory = 4): "computation", "communication", "computation overlapping
  // communication", "memory", ... as HTA names them.
  std::vector<std::pair<std::string, TimeNs>> by_type;
};

TimeBreakdown time_breakdown(const Timeline& t);

/// One block per run: the temporal breakdown with shares of the span, the overlap and the time by
/// type, every number with its unit.
std::string time_breakdown_table(const std::vector<TimeBreakdown>& runs);

/// shardscope.breakdown/1: the same as JSON, times in nanoseconds.
std::string time_breakdown_json(const std::vector<TimeBreakdown>& runs);

}  // namespace shardscope::analysis
