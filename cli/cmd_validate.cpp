#include <fmt/format.h>

#include "commands.hpp"
#include "report.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope::cli {

int run_validate(const ScenarioArgs& args) {
  const Scenario scenario = load_scenario_args(args);
  fmt::print("{}", scenario_report(scenario));
  if (const auto& profile = scenario.cluster.gpu.device_profile)
    print_profile_coverage(lower(scenario), *profile);
  fmt::print("valid: yes\n");
  return kExitOk;
}

}  // namespace shardscope::cli
