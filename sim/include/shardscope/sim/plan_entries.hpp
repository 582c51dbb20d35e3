#pragma once
// How the planner's ranking groups configurations into entries (docs/planner.md, "One strategy,
// one row"), and the step time beyond which nothing can join the top entries: what keeps the
// pruned search exact when entries gather predictions within a tolerance.

#include <cstddef>
#include <set>
#include <utility>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope::sim {

/// One entry's reach: a step time at most `time` (a fraction) above its fastest configuration's
/// (the leader's) and a peak reserved at most `memory` below the leader's, or any amount above
/// it. A configuration no faster than a strategy and no leaner is that strategy with a knob that
/// only costs memory, not another way to train; one leaner by more than `memory` is a trade-off
/// worth its own row. 0 and 0: identical predictions only.
struct EntryTolerance {
  double time = 0.005;
  Bytes memory = kGiB;
};

/// A configuration's prediction: its index in the space, step time and peak reserved.
struct PlanMember {
  std::size_t index = 0;
  TimeNs step_time = 0;
  Bytes peak_reserved = 0;
};

/// Whether `m` lies within the tolerance of the entry `leader` is the fastest of. With no
/// tolerance at all (0 and 0), only the leader's own prediction does.
bool within_entry(const PlanMember& leader, const PlanMember& m, const EntryTolerance& t);

/// The top `top` entries of `fitting`, which is sorted fastest first (leanest, then by index, at
/// equal times): each configuration joins the first entry whose tolerance it is within, or heads
/// a new one while fewer than `top` exist. Each entry lists positions in `fitting`, its leader
/// first.
std::vector<std::vector<std::size_t>> top_entries(const std::vector<PlanMember>& fitting,
                                                  std::size_t top, const EntryTolerance& t);

/// The step time beyond which no configuration can be in the top `top` entries, given the
/// distinct (step time, peak reserved) predictions found so far and that every prediction still
/// to be found takes at least `floor` (the search visits compute classes in order of their lower
/// bounds). Entries form in step-time order, so those of the predictions faster than `floor` are
/// final: once they hold `top` leaders, the last of them is the final k-th, and its reach (× (1 +
/// t.time)) bounds every member of the top entries. Infinite until then.
double top_entries_reach(const std::set<std::pair<TimeNs, Bytes>>& predictions, TimeNs floor,
                         std::size_t top, const EntryTolerance& t);

}  // namespace shardscope::sim
