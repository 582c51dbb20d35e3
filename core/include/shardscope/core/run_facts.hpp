#pragma once
// The facts a Timeline carries for throughput and MFU (RunFacts), from the scenario that made it.
// Apart from analysis.hpp so that readers of a Timeline do not compile the scenario.

#include "shardscope/core/scenario.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::analysis {

/// Torchtitan's model FLOPs per token: 6·(parameters − token embedding) + 12·layers·heads·
/// head_dim·seq; a custom model's forward + backward FLOPs per token. 0 where no model is
/// described (MFU unknown).
double model_flops_per_token(const Scenario& scenario);
/// The facts a Timeline of `schedule` needs for throughput and MFU, from its scenario.
RunFacts run_facts(const Scenario& scenario, const Schedule& schedule);

}  // namespace shardscope::analysis
