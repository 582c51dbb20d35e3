#pragma once
// Cost-model parameters fitted to measured runs (`shardscope calibrate`,
// shardscope.calibration/2). A scenario reads one through cluster.calibration or --calibration;
// every parameter the file has replaces the scenario's value (and the cost model's default), the
// rest stay as they were. Only parameters the runs determined are written: one the measured ops
// carry too little signal for is reported by calibrate and left out of the file.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/schedule.hpp"

namespace shardscope {

/// A fitted value with its 95 % bootstrap confidence interval and the samples behind it.
struct FittedValue {
  double value = 0;
  double low = 0;   // 2.5th percentile over bootstrap resamples
  double high = 0;  // 97.5th percentile
  int samples = 0;  // measured ops (or op aggregates) the fit used
};

/// One collective on one communicator shape: time = latency + bus bytes / bus bandwidth, where bus
/// bytes are S·(n−1)/n (all-gather, reduce-scatter) or 2·S·(n−1)/n (all-reduce).
struct CollectiveCalibration {
  OpKind kind = OpKind::all_gather;
  int ranks = 0;
  int nodes = 0;
  FittedValue latency;  // seconds
  FittedValue busbw;    // bytes/s
};

struct Calibration {
  std::string scenario;               // the scenario it was fitted for
  std::vector<std::string> measured;  // the measured runs it was fitted to
  std::string version;                // the shardscope that fitted it
  // Compute: time = floor + matmul/(peak·e_m·f/(f+h)) + attention/(peak·e_a·f/(f+h)) +
  // bytes/(hbm·e_h). While collectives run, a GPU op loses `contention_scale` × the throughput
  // the SM model takes from it (docs/simulator.md, "SMs held by collectives"; 1: the model as is).
  std::optional<FittedValue> matmul_efficiency;
  std::optional<FittedValue> attention_efficiency;
  std::optional<FittedValue> half_efficiency_flops;  // h, FLOPs
  std::optional<FittedValue> hbm_efficiency;
  std::optional<FittedValue> contention_scale;
  // Host↔device copies (the memory kind the scenario pins or not): latency + bytes / bandwidth.
  std::optional<FittedValue> pcie_bandwidth;  // bytes/s
  std::optional<FittedValue> pcie_latency;    // seconds
  std::vector<CollectiveCalibration> collectives;
  // The CPU's issue costs (seconds), from the launch calls and FSDP hook ranges of imported traces:
  // cluster.cpu.launch_overhead and cluster.cpu.fsdp_hook_overhead.
  std::optional<FittedValue> launch_overhead;
  std::optional<FittedValue> fsdp_hook_overhead;

  /// The fitted collective for this shape, if any.
  const CollectiveCalibration* collective(OpKind kind, int ranks, int nodes) const;
};

// Version 2 replaced version 1's compute_slowdown (one share for every GPU op while any collective
// ran) with contention_scale, a scale on the SM model.
inline constexpr std::string_view kCalibrationSchema = "shardscope.calibration/2";

std::string calibration_to_json(const Calibration& calibration);
/// Throws ValidationError naming `origin` and each bad key.
Calibration calibration_from_json(std::string_view text, const std::string& origin = {});
Calibration load_calibration(const std::string& path);
/// The calibration at `path`, read once per process while the file is unchanged; thread-safe.
std::shared_ptr<const Calibration> shared_calibration(const std::string& path);

}  // namespace shardscope
