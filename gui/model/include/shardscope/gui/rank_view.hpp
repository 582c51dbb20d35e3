#pragma once
// Every rank replayed (sim::simulate_ranks), for the Ranks tab: one timeline whose lanes are the
// rank classes' GPU streams (identical ranks folded into one lane, its count in the name), each
// collective a class was the last to be ready for labelled so; and the step times of the job's
// iterations as a histogram. Pure data, no Qt widgets: tested without a display.

#include <string>
#include <vector>

#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/rank_simulation.hpp"

namespace shardscope::gui {

/// The classes the others waited for most (sim::most_waited_for), at most `max_classes`; of each
/// its compute stream and the streams of its collectives, as lanes named "ranks 24-31 (8) ·
/// compute". A collective whose class was the last of its instance to be ready is labelled "last to
/// be ready: ranks 24-31": the rank the others waited for there.
Timeline rank_lanes(const sim::RankSimulation& ranks, std::size_t max_classes = 8);

struct HistogramBin {
  TimeNs from = 0;  // [from, to), the last bin closed
  TimeNs to = 0;
  int count = 0;
};

/// `times` in `bins` equal bins from their least to their greatest; one bin when all are equal,
/// none when there are none.
std::vector<HistogramBin> histogram(const std::vector<TimeNs>& times, int bins);

}  // namespace shardscope::gui
