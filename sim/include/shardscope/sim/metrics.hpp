#pragma once
// The summary of a simulation: analysis::summarize of its Timeline (definitions there), plus what
// only the simulator knows: the exact critical path (why each op started when it did), the CPU's
// issue time per stream busy figure, allocator retries and where memory ran out.

#include "shardscope/core/analysis.hpp"
#include "shardscope/sim/engine.hpp"

namespace shardscope::sim {

analysis::Summary summarize(const Schedule& schedule, const SimulationResult& result);

}  // namespace shardscope::sim
