#pragma once
// What a user reads off a simulation. All times are of the last simulated iteration (the steady
// state), except the peaks, which are over the whole run.
//   step time      end of the last iteration − end of the one before (the whole run if only one)
//   MFU            tokens/s/GPU × model FLOPs per token / dense peak of the compute dtype, with
//                  torchtitan's FLOPs per token: 6·(parameters − token embedding) +
//                  12·layers·heads·head_dim·seq (custom models: their forward + backward FLOPs per
//                  token)
//   HFU            FLOPs the GPU executes (recompute included, causal attention halved) / step /
//   peak exposed comm   time a collective runs while the compute stream runs nothing overlap 1 −
//   exposed / total collective time

#include <map>
#include <string>
#include <vector>

#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/engine.hpp"

namespace shardscope::sim {

struct CriticalPath {
  std::vector<OpId> ops;                  // last op first
  std::map<std::string, TimeNs> by_kind;  // time on the path by op kind ("cpu" for issue gaps)
};

struct Summary {
  std::string name;
  int world_size = 1;
  TimeNs step_time = 0;
  double tokens_per_s_per_gpu = 0;
  double model_flops_per_token = 0;
  double mfu = 0;
  double hfu = 0;
  TimeNs forward_time = 0;
  TimeNs backward_time = 0;
  TimeNs optimizer_time = 0;
  TimeNs comm_total = 0;
  TimeNs comm_exposed = 0;
  double overlap_fraction = 1;
  std::vector<std::pair<std::string, TimeNs>> stream_busy;
  CriticalPath critical_path;  // empty when the run did not record it (sweeps)
  Bytes peak_allocated = 0;
  Bytes peak_reserved = 0;
  Bytes capacity = 0;
  bool fits = true;
  std::vector<Bytes> peak_by_category;         // allocated bytes by category at the allocated peak
  std::string peak_op;                         // the op that made the allocated peak
  std::vector<Bytes> peak_allocated_by_phase;  // by Phase
  std::map<std::string, int> collectives;  // per iteration: all_gather, reduce_scatter, all_reduce
  std::string out_of_memory;               // empty when it fits
  int allocator_retries = 0;  // cached segments released to make room (num_alloc_retries)
};

Summary summarize(const Scenario& scenario, const Schedule& schedule,
                  const SimulationResult& result);

/// The public summary JSON (keys documented in docs/simulator.md).
std::string summary_to_json(const Summary& summary);
/// A readable table; every number with its unit.
std::string summary_table(const Summary& summary);

/// Torchtitan's model FLOPs per token (see above).
double model_flops_per_token(const Scenario& scenario);

}  // namespace shardscope::sim
