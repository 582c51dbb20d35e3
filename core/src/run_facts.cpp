#include "shardscope/core/run_facts.hpp"

#include <algorithm>

#include "shardscope/core/group_compute.hpp"

namespace shardscope::analysis {

double model_flops_per_token(const Scenario& sc) {
  if (sc.model.family == ModelFamily::transformer) {
    const auto& c = sc.model.transformer;
    if (c.heads <= 0) return 0;  // no model described (a bare scenario costing an IR): MFU unknown
    const auto p = count_params(c);
    const double n = static_cast<double>(sc.model.total_params() - p.token_embedding);
    return 6.0 * n +
           12.0 * static_cast<double>(c.layers * c.heads * c.head_dim() * sc.training.seq_len);
  }
  double flops = 0;
  for (const auto& g : sc.model.groups) {
    const double fwd = g.forward_flops.value_or(0);
    flops += fwd + g.backward_flops.value_or(2 * fwd);
  }
  return flops /
         static_cast<double>(std::max<std::int64_t>(1, sc.training.tokens_per_microbatch()));
}

RunFacts run_facts(const Scenario& scenario, const Schedule& schedule) {
  RunFacts f;
  f.world_size = schedule.world_size;
  f.iterations = schedule.iterations;
  f.tokens_per_iteration = schedule.tokens_per_iteration;
  f.model_flops_per_token = model_flops_per_token(scenario);
  f.peak_flops = scenario.cluster.gpu.peak_flops.for_dtype(compute_dtype(scenario));
  return f;
}

}  // namespace shardscope::analysis
