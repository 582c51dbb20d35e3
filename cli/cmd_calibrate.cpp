// `shardscope calibrate --scenario S MEASURED...`: fits the cost model to measured runs of S and
// writes the fitted parameters for `simulate --calibration` (sim/calibrate.hpp).
#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/calibration.hpp"
#include "shardscope/sim/calibrate.hpp"

namespace shardscope::cli {

int run_calibrate(const CalibrateArgs& args) {
  check_outputs(args.scenario, {{"--out", args.out}});
  for (const auto& m : args.measured) {
    if (!args.out.empty() && std::filesystem::path(m) == std::filesystem::path(args.out)) {
      throw ValidationError(
          {Problem{"--out", "", fmt::format("'{}' is also a measured run", m), "another file"}});
    }
  }
  const Scenario scenario = load_scenario_args(args.scenario);
  std::vector<Timeline> measured;
  for (const auto& path : args.measured) {
    fmt::print(stderr, "reading {}\n", path);
    measured.push_back(load_timeline_file(path));
  }
  sim::CalibrateOptions options;
  options.holdout = args.holdout;
  options.bootstrap = args.bootstrap;
  const auto result = sim::calibrate(scenario, measured, args.measured, options);
  fmt::print("{}", sim::calibration_report(result));
  if (!args.out.empty())
    write_output(args.out, calibration_to_json(result.calibration),
                 " (simulate --calibration FILE, or cluster.calibration: FILE)");
  return kExitOk;
}

}  // namespace shardscope::cli
