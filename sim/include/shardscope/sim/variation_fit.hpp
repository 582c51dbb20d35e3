#pragma once
// `shardscope calibrate --variation`: the variation.* keys (variation_spec.hpp) fitted to several
// ranks' timelines of one run, with 95 % intervals from a bootstrap over the ops.
//   GPU time factor of rank r   its GPU compute time (kernels, copies, the optimizer step: not
//                               collectives, which include waiting) over the median rank's, on the
//                               ops every rank recorded
//   slow ranks                  factors more than 4 robust standard deviations (1.4826 × the
//                               median absolute deviation, at least 0.5 %) above the median
//   gpu_sigma                   the standard deviation of the other ranks' factors
//   jitter                      the standard deviation of d / (factor_r · m_o) − 1 over ranks r
//                               and ops o, m_o the op's median over ranks of d / factor
//   issue_delay                 the exponential's mean from the median of the CPU's gaps beyond
//                               the modelled issue cost (median / ln 2: a gap the CPU spent
//                               blocked on a wait is an outlier the median ignores)
// A rank appears once; ops are matched across ranks by their place among an iteration's GPU compute
// ops (ranks of one job run the same kernels in order), so imported traces fit too; the issue
// delay needs the schedule's op ids (shardscope's own timelines).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardscope/core/calibration.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::sim {

struct VariationFit {
  std::map<int, FittedValue> gpu_time_factor;  // by rank
  std::map<int, double> slow_ranks;            // the outliers among them (variation.slow_ranks)
  FittedValue gpu_sigma;
  FittedValue jitter;
  std::optional<FittedValue> issue_delay_ns;  // empty: no timeline recorded its issue times
  int ranks = 0;
  int ops = 0;  // GPU compute ops every rank recorded
};

/// Throws ValidationError for fewer than 2 ranks, a rank given twice, or no op every rank has.
VariationFit fit_variation(const Scenario& scenario, const Schedule& schedule,
                           const std::vector<Timeline>& ranks, int bootstrap = 200,
                           std::uint64_t seed = 0x5eed);

/// The fit as a report, with the keys to put in the scenario.
std::string variation_report(const VariationFit& fit);
/// The fitted keys as a scenario's `variation:` section (YAML).
std::string variation_yaml(const VariationFit& fit);

}  // namespace shardscope::sim
