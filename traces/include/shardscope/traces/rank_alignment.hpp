#pragma once
// Several ranks' profiler traces of one run on one clock. Each rank's trace is timed by its own
// host's clock (and the importer starts each at its first event), so the ranks are aligned by
// their collectives: the k-th collective of a kind on a communicator ends on every rank at nearly
// the same moment (NCCL's ring completes together), so a rank's offset is the median, over its
// matched collectives, of the reference rank's end less its own. The residual (median |Δ end|
// after the shift) says how well that held.

#include <vector>

#include "shardscope/core/timeline.hpp"

namespace shardscope::traces {

struct RankAlignment {
  int rank = 0;
  TimeNs offset = 0;     // added to every time of this rank
  int matched = 0;       // collectives matched with the reference rank
  TimeNs residual = 0;   // median |end − reference end| after the shift
  TimeNs step_time = 0;  // its steady-state step time (analysis::summarize)
};

/// Aligns `ranks` (each an imported timeline; Provenance::rank tells which) to the lowest rank,
/// in place, then moves all so the earliest op of any rank starts at 0. Throws ValidationError
/// when two timelines claim one rank, or a rank shares no collective with the reference.
std::vector<RankAlignment> align_ranks(std::vector<Timeline>& ranks,
                                       const std::vector<std::string>& names);

/// "rank  offset  matched  residual  step time" with the straggler's margin over the fastest.
std::string alignment_report(const std::vector<RankAlignment>& alignment);

}  // namespace shardscope::traces
