#include "shardscope/sim/pipeline.hpp"

#include <fmt/format.h>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario_keys.hpp"
#include "shardscope/sim/cost_model.hpp"

namespace shardscope::sim {

PipelineResult simulate_schedule(Scenario scenario, Schedule schedule,
                                 const PipelineOptions& options) {
  PipelineResult r{std::move(scenario), std::move(schedule), {}, {}};
  const CostModel costs(r.scenario);
  try {
    SimOptions sim = options.sim;
    sim.allocator = r.scenario.allocator;  // the scenario's allocator section decides
    r.simulation = simulate(r.schedule, costs, sim);
  } catch (const ValidationError& e) {  // an op too long to simulate: name the input
    auto problems = e.problems();
    for (auto& p : problems) {
      if (p.file.empty()) p.file = options.origin;
    }
    throw ValidationError(std::move(problems));
  }
  r.simulation.timeline.provenance.scenario = options.origin;
  r.simulation.timeline.provenance.overrides = options.overrides;
  r.simulation.timeline.provenance.job = job_settings(r.scenario);
  r.simulation.timeline.memory_tight_margin = r.scenario.allocator.tight_margin;
  if (const DeviceProfile* profile = costs.device_profile()) {
    r.simulation.timeline.provenance.device +=
        fmt::format(" (kernel times measured on {})", profile->device);
  }
  if (r.scenario.cluster.calibration) {
    r.simulation.timeline.provenance.device += fmt::format(
        " (calibrated to {} measured run{})", r.scenario.cluster.calibration->measured.size(),
        r.scenario.cluster.calibration->measured.size() == 1 ? "" : "s");
  }
  r.summary = analysis::summarize(r.simulation.timeline, options.sim.record_critical_path);
  return r;
}

PipelineResult simulate_scenario(Scenario scenario, const PipelineOptions& options) {
  Schedule schedule = lower(scenario);
  return simulate_schedule(std::move(scenario), std::move(schedule), options);
}

}  // namespace shardscope::sim
