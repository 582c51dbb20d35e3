#pragma once
// The `shardscope` subcommands. Each returns the process exit code:
// 0 success, 2 bad input (problems printed to stderr), 1 unexpected failure.

#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

struct ScenarioArgs {
  std::string path;
  std::vector<std::string> overrides;  // --set key=value
  std::string model_preset;            // --model
  std::string cluster_preset;          // --cluster
  int nodes = 0;                       // --nodes
  int gpus_per_node = 0;               // --gpus-per-node
};

/// The scenario file's tree with the shortcuts and overrides applied (not yet validated).
ConfigTree load_scenario_tree(const ScenarioArgs& args);
/// Loads the scenario file with the shortcuts and overrides applied, validated.
Scenario load_scenario_args(const ScenarioArgs& args);

struct SimulateArgs {
  ScenarioArgs scenario;
  std::string json_path;
  std::string timeline_path;
  std::string trace_path;
  bool expandable_segments = false;
};

struct LowerArgs {
  ScenarioArgs scenario;
  std::string json_path;  // --json: write the IR
  bool order = false;     // --order: print the CPU issue order
};

struct SweepArgs {
  ScenarioArgs scenario;
  std::vector<std::string> grid;  // --grid key=v1,v2
  std::string memory_budget;      // --memory-budget 80GiB
  std::string csv_path;
  std::string json_path;
  unsigned threads = 0;
};

/// Writes an output file the user asked for, atomically, and says so: "wrote PATH<note>".
void write_output(const std::string& path, std::string_view text, std::string_view note = {});

int run_presets();
int run_sweep(const SweepArgs& args);
int run_simulate(const SimulateArgs& args);
int run_lower(const LowerArgs& args);
int run_validate(const ScenarioArgs& args);

}  // namespace shardscope::cli
