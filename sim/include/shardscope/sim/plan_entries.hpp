#pragma once
// How the planner's ranking groups configurations into entries, one per strategy
// (docs/planner.md, "One strategy, one row"), and the step time beyond which nothing can join the
// top entries: what keeps the pruned search exact when entries gather predictions within a
// tolerance.

#include <cstddef>
#include <set>
#include <tuple>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope::sim {

/// One entry's reach: a step time at most `time` (a fraction) above its fastest configuration's,
/// and a peak reserved at most `memory` below the configuration it stands for (entry_choice), or
/// any amount above it. A configuration no faster than a strategy and no leaner is that strategy
/// with a knob that only costs memory, not another way to train; one leaner by more than `memory`
/// is a trade-off worth its own row, unless it is the entry's own strategy tuned another way. 0
/// and 0: identical predictions only.
struct EntryTolerance {
  double time = 0.005;
  Bytes memory = kGiB;
};

/// A configuration's prediction: its index in the space, step time, peak reserved, and its
/// strategy (strategy_of in plan_space.hpp: equal for configurations that differ only in tuning
/// knobs).
struct PlanMember {
  std::size_t index = 0;
  TimeNs step_time = 0;
  Bytes peak_reserved = 0;
  std::size_t strategy = 0;
};

/// The ranking's order: fastest first; at equal times leanest first, then by strategy and index.
bool ranks_before(const PlanMember& a, const PlanMember& b);

/// Whether `m` belongs to the entry whose fastest configuration is `fastest` and which stands for
/// `chosen` (entry_choice of its members so far): at most the tolerance slower than `fastest`,
/// and either `fastest`'s own strategy (then a tuning knob trades memory at the same speed) or
/// not more than the memory tolerance leaner than `chosen`. With no tolerance at all (0 and 0),
/// only `fastest`'s own prediction does.
bool within_entry(const PlanMember& fastest, const PlanMember& chosen, const PlanMember& m,
                  const EntryTolerance& t);

/// The top `top` entries of `fitting`, sorted by ranks_before. Each configuration in turn joins
/// the first entry it is within (within_entry, with the entry's choice so far); or, when a
/// configuration of its own strategy is already ranked and it is not more than the memory tolerance
/// leaner than that one, it is not ranked (the same way to train, tuned worse: slower and no
/// leaner); or it heads a new entry while fewer than `top` exist. With no tolerance at all nothing
/// is dropped. Each entry lists positions in `fitting`, its leader first.
std::vector<std::vector<std::size_t>> top_entries(const std::vector<PlanMember>& fitting,
                                                  std::size_t top, const EntryTolerance& t);

/// The member an entry stands for (`members` as top_entries lists them, its fastest first): the
/// leanest configuration of the fastest one's strategy when that is more than the memory
/// tolerance leaner, else the fastest. Within the tolerance they run at one speed, so the one
/// with the most headroom is the one to run.
const PlanMember& entry_choice(const std::vector<PlanMember>& members, const EntryTolerance& t);

/// A prediction as the search collects them: (step time, peak reserved, strategy), in the order
/// of ranks_before.
using Prediction = std::tuple<TimeNs, Bytes, std::size_t>;

/// The step time beyond which no configuration can be in the top `top` entries, given the
/// distinct predictions found so far and that every prediction still to be found takes at least
/// `floor` (the search visits compute classes in order of their lower bounds). Entries form in
/// ranking order, so those of the predictions faster than `floor` are final: once they hold
/// `top` leaders, the last of them is the final k-th, and its reach (× (1 + t.time)) bounds every
/// member of the top entries. Infinite until then.
double top_entries_reach(const std::set<Prediction>& predictions, TimeNs floor, std::size_t top,
                         const EntryTolerance& t);

}  // namespace shardscope::sim
