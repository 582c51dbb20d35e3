#pragma once
// Human-readable reports of scenarios (every number with its unit).

#include <string>

#include "shardscope/core/scenario.hpp"

namespace shardscope::cli {

std::string scenario_report(const Scenario& scenario);

}  // namespace shardscope::cli
