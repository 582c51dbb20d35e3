#pragma once
// Shared by the fuzz targets of files the cost model reads (a device profile, a calibration): a
// small two-GPU schedule whose every op a scenario carrying the fuzzed file must price.
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/cost_model.hpp"

namespace shardscope::fuzz {

struct TinyRun {
  Scenario scenario;
  Schedule schedule;
};

inline const TinyRun& tiny_run() {
  static const TinyRun kRun = [] {
    Scenario s = scenario_from_text(
        "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 2}\ntraining: {iterations: "
        "1}\n",
        {});
    Schedule schedule = lower(s);
    return TinyRun{std::move(s), std::move(schedule)};
  }();
  return kRun;
}

/// Prices every op of the tiny schedule on `scenario` (the tiny scenario with a file set).
inline void price_every_op(const Scenario& scenario) {
  const sim::CostModel costs(scenario);
  for (const Op& op : tiny_run().schedule.ops) (void)costs.cost(tiny_run().schedule, op);
}

}  // namespace shardscope::fuzz
