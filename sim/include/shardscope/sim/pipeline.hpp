#pragma once
// The one way from a scenario to its prediction: lower → simulate → summarize. The CLI, the GUI,
// sweeps and benchmarks all come through here, so they cannot disagree.

#include <memory>
#include <string>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/sim/engine.hpp"

namespace shardscope::sim {

struct PipelineOptions {
  SimOptions sim;      // its allocator settings are replaced by the scenario's (allocator section)
  std::string origin;  // the scenario or IR file: provenance, and the file errors name
  std::vector<std::string> overrides;  // what the scenario was read with: provenance
};

struct PipelineResult {
  Scenario scenario;
  Schedule schedule;
  SimulationResult simulation;  // per-op records and the Timeline
  analysis::Summary summary;

  const Timeline& timeline() const { return simulation.timeline; }
};

/// Lowers, simulates and summarizes a scenario. Throws ValidationError on a schedule that cannot
/// be simulated (an op too long), naming options.origin.
PipelineResult simulate_scenario(Scenario scenario, const PipelineOptions& options = {});

/// Simulates and summarizes a given schedule (an IR file), costed on `scenario`'s hardware.
PipelineResult simulate_schedule(Scenario scenario, Schedule schedule,
                                 const PipelineOptions& options = {});

}  // namespace shardscope::sim
