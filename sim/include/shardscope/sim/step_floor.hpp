#pragma once
// step_time_floor: a lower bound on a schedule's simulated step time from the schedule and its
// costs alone, without simulating it. The planner's search skips a configuration whose floor is
// beyond the reach of the entries found so far, before replaying its memory or timing it.

#include "shardscope/core/schedule.hpp"
#include "shardscope/sim/cost_model.hpp"

namespace shardscope::sim {

/// The last iteration's forward, backward and recompute ops on compute streams run inside its
/// step (the planner's compute bound), one after another on their stream. Every op of that
/// iteration a chain of dependencies, stream order and the CPU's issue order leads to from them
/// starts after the op before it in the chain ends, and no op takes less than its cost on an
/// idle GPU (sharing a resource only slows it). So the longest such chain at idle cost, from the
/// step's start, bounds the step from below: the compute ops, then, for example, the
/// reduce-scatter of the last gradients, their copy to the host and the optimizer step on the
/// CPU under offloading. Less a millionth for the simulator's rounding of shared rates.
TimeNs step_time_floor(const Schedule& schedule, const CostModel& costs);

}  // namespace shardscope::sim
