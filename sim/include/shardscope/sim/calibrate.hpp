#pragma once
// `shardscope calibrate`: fits the cost model's parameters to measured runs of one scenario by
// least squares (docs/calibration.md), with 95 % confidence intervals from a bootstrap over the
// samples, and measures the error before and after by simulating the scenario both ways.
//   compute     W − fixed = matmul_s/e_m + attention_s/e_a + hbm_s/e_h + s·S
//               (matmul_s = Σ_ops (F + h)/peak: the roofline's efficiency curve; W = ∫ 1/k dt and
//               S = ∫ c/k dt over the measured op, k the GPU ops running with it, c whether a
//               collective runs: the simulator's sharing and slowdown s, inverted); linear in
//               1/e_m, 1/e_a, 1/e_h and s, with h found by a search on a log scale
//   collectives per (kind, ranks, nodes): d = latency + bus bytes / busbw
//   host copies d = latency + bytes / bandwidth
// A parameter whose column carries under 1 % of the measured time (or fewer than 2 samples) is
// not determined by these runs: it keeps its prior, is reported as such and is not written.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardscope/core/calibration.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/calibration_samples.hpp"

namespace shardscope::sim {

struct CalibrateOptions {
  double holdout = 0.25;  // share of measured iterations kept out of the fit (the last ones)
  int bootstrap = 200;    // resamples for the confidence intervals (0: none)
  std::uint64_t seed = 0x5eed;
};

struct ParameterReport {
  std::string name;  // "compute.matmul_efficiency", "all_gather 8 ranks 1 node busbw"
  std::string unit;  // "" (a share, printed in %), "×" (a scale), "FLOPs", "B/s", "s"
  double prior = 0;
  std::optional<FittedValue> fitted;  // empty: not determined by these runs
  std::string note;                   // why not, or what it was held to
};

/// Σ|simulated − measured| / Σ measured over a set of samples (or steps), in percent.
struct ErrorPair {
  double before = 0;
  double after = 0;
  int count = 0;
};

struct ErrorRow {
  std::string name;  // "compute", "collective", "host copy", "all ops", "step time"
  ErrorPair fitted;
  ErrorPair held_out;
};

struct CalibrationResult {
  Calibration calibration;
  std::vector<ParameterReport> parameters;
  std::vector<ErrorRow> errors;
  SampleSet samples;
  TimeNs step_before = 0;  // the simulated step time without and with the calibration
  TimeNs step_after = 0;
  int bytes_mismatches = 0;  // collectives whose recorded bytes differ from the schedule's by >1 %
};

/// Fits `scenario` (its own calibration, if any, is the prior) to the measured timelines, named
/// `names` in the output. Throws ValidationError when no measured op matches the schedule.
CalibrationResult calibrate(const Scenario& scenario, const std::vector<Timeline>& measured,
                            const std::vector<std::string>& names,
                            const CalibrateOptions& options = {});

std::string calibration_report(const CalibrationResult& result);

}  // namespace shardscope::sim
