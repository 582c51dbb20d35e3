// `shardscope calibrate --scenario S MEASURED...`: fits the cost model to measured runs of S and
// writes the fitted parameters for `simulate --calibration` (sim/calibrate.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "commands.hpp"
#include "shardscope/core/calibration.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/run_facts.hpp"
#include "shardscope/core/scenario_keys.hpp"
#include "shardscope/sim/calibrate.hpp"
#include "shardscope/sim/variation_fit.hpp"
#include "shardscope/traces/kineto_import.hpp"

namespace shardscope::cli {

namespace {

// Whether two timelines record the same ops at the same times: one run, read twice.
bool same_ops(const Timeline& a, const Timeline& b) {
  return std::equal(a.ops.begin(), a.ops.end(), b.ops.begin(), b.ops.end(),
                    [](const TimelineOp& x, const TimelineOp& y) {
                      return x.kind == y.kind && x.stream == y.stream && x.start == y.start &&
                             x.end == y.end;
                    });
}

}  // namespace

int run_calibrate(const CalibrateArgs& args) {
  std::vector<std::filesystem::path> inputs(args.measured.begin(), args.measured.end());
  for (auto& file : scenario_inputs(args.scenario)) inputs.push_back(std::move(file));
  const std::vector<std::pair<std::string, std::string>> outputs{{"--out", args.out}};
  check_output_paths(outputs, inputs);
  const Scenario scenario = load_scenario_args(args.scenario);
  // One run given twice would count as two and narrow the fit's intervals on no new data.
  for (std::size_t i = 0; i < args.measured.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (args.measured[i] == args.measured[j] ||
          std::filesystem::equivalent(args.measured[i], args.measured[j], ec)) {
        throw ValidationError({Problem{args.measured[i], "",
                                       fmt::format("is given twice (also as {})", args.measured[j]),
                                       "each measured run once"}});
      }
    }
  }
  std::vector<Timeline> measured;
  for (const auto& path : args.measured) {
    fmt::print(stderr, "reading {}\n", path);
    measured.push_back(traces::read_timeline_or_trace(path));
    // A copy under another name is the same run too: every op at the same nanosecond.
    for (std::size_t j = 0; j + 1 < measured.size(); ++j) {
      if (same_ops(measured.back(), measured[j])) {
        throw ValidationError(
            {Problem{path, "",
                     fmt::format("is the same run as {} (every op at the same time): a copy is "
                                 "no new data",
                                 args.measured[j]),
                     "each measured run once"}});
      }
    }
  }
  // The scenario's own run, as far as a timeline of it would say: the job every measured run
  // must be of for the fit to mean anything.
  const Schedule schedule = lower(scenario);
  Timeline expected = timeline_of(schedule);
  expected.facts = analysis::run_facts(scenario, schedule);
  expected.provenance.job = job_settings(scenario);
  for (std::size_t i = 0; i < measured.size(); ++i)
    check_same_job(expected, args.scenario.path, measured[i], args.measured[i],
                   args.allow_mismatch);
  if (args.variation) {  // the ranks of one run: how they differ
    const auto fit = sim::fit_variation(scenario, schedule, measured, args.bootstrap);
    fmt::print("{}", sim::variation_report(fit));
    if (!args.out.empty())
      write_output(args.out, sim::variation_yaml(fit), " (the scenario's variation section)");
    return kExitOk;
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
