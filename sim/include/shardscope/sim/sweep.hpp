#pragma once
// Simulates the cartesian product of scenario overrides on a pool of threads.
// Each point: apply its overrides to the base tree, validate, lower, simulate, summarize.
// A point fits when nothing ran out of memory and its peak reserved memory is within the budget
// (default: GPU capacity). The Pareto front is the fitting points no other fitting point beats on
// both tokens/s per GPU (higher) and peak reserved memory (lower). Results are sorted best first:
// fitting points by tokens/s, then points that do not fit, then invalid ones; ties keep grid order.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/config_tree.hpp"

namespace shardscope::sim {

struct SweepAxis {
  std::string key;                  // dotted scenario key
  std::vector<std::string> values;  // YAML scalars
};

/// The most configurations one sweep may have.
inline constexpr std::size_t kMaxSweepPoints = 1'000'000;

/// Parses "key=v1,v2,v3"; values split at commas outside braces, brackets and quotes, so
/// "fsdp.mixed_precision={param_dtype: bf16},{param_dtype: fp32}" has two. The key must be a
/// scenario key (scenario_keys.hpp). Adds a Problem under `flag` ("--grid", "--fix") on a
/// malformed one.
std::optional<SweepAxis> parse_key_values(std::string_view text, std::string_view flag,
                                          std::vector<Problem>& problems);
/// A sweep's --grid axis (parse_key_values).
std::optional<SweepAxis> parse_sweep_axis(std::string_view text, std::vector<Problem>& problems);
/// Problems of the axes together: a key given twice, a grid over kMaxSweepPoints.
void check_sweep_axes(const std::vector<SweepAxis>& axes, std::vector<Problem>& problems);
/// Configurations in the grid (the product of the axes' sizes; check_sweep_axes bounds it).
std::size_t grid_size(const std::vector<SweepAxis>& axes);

struct SweepPoint {
  std::size_t index = 0;            // position in the grid (row-major, first axis slowest)
  std::vector<std::string> values;  // one per axis
  std::string error;                // validation problems; empty when valid
  analysis::Summary summary;  // headline numbers: the critical path is not recorded in a sweep
  bool fits = false;          // in the budget
  // Why it does not fit (the allocation that failed, or how far over the budget it is), or that
  // it fits tightly (less than the scenario's allocator.tight_margin of the budget free); empty
  // for a comfortable fit.
  std::string fit_note;
  bool pareto = false;
};

struct SweepOptions {
  unsigned threads = 0;                // 0: all hardware threads
  std::optional<Bytes> memory_budget;  // default: each point's GPU capacity
  std::function<void(std::size_t done, std::size_t total)>
      progress;  // called from the workers (the calling thread is one)
  const std::atomic<bool>* cancel = nullptr;
};

/// Simulates every point of the grid over `base`. `file` is the scenario's path: problems name it
/// and relative paths inside (model.hf_config) resolve against its directory, as `simulate` does.
std::vector<SweepPoint> sweep(const ConfigTree& base, const std::string& file,
                              const std::vector<SweepAxis>& axes, const SweepOptions& options);

std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<SweepPoint>& points);
/// `grid`: configurations in the whole grid (default: the points given); "complete" says whether
/// every one is among `points`.
std::string sweep_json(const std::vector<SweepAxis>& axes, const std::vector<SweepPoint>& points,
                       std::optional<std::size_t> grid = std::nullopt);

}  // namespace shardscope::sim
