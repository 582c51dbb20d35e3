#pragma once
// Lower + simulate + summarize a scenario given as YAML text (tests only).

#include <string>
#include <vector>

#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope::testing {

struct Run {
  Scenario scenario;
  Schedule schedule;
  sim::SimulationResult result;
  analysis::Summary summary;
};

inline Run run_scenario(const Scenario& scenario) {
  auto p = sim::simulate_scenario(scenario);
  return {std::move(p.scenario), std::move(p.schedule), std::move(p.simulation),
          std::move(p.summary)};
}

inline Run run_text(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return run_scenario(scenario_from_text(yaml, overrides));
}

inline Run run_file(const std::string& path, const std::vector<std::string>& overrides = {}) {
  return run_scenario(load_scenario(path, overrides));
}

inline double ms(TimeNs t) {
  return ns_to_ms(t);
}
inline double mb(Bytes b) {
  return static_cast<double>(b) / 1e6;
}
inline double gib(Bytes b) {
  return static_cast<double>(b) / static_cast<double>(kGiB);
}

}  // namespace shardscope::testing
