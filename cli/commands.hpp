#pragma once
// The `shardscope` subcommands. Each returns the process exit code:
// 0 success, 2 bad input (problems printed to stderr), 1 unexpected failure.

#include <string>
#include <vector>

namespace shardscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

struct ScenarioArgs {
  std::string path;
  std::vector<std::string> overrides;  // --set key=value
};

struct LowerArgs {
  ScenarioArgs scenario;
  std::string json_path;  // --json: write the IR
  bool order = false;     // --order: print the CPU issue order
};

int run_presets();
int run_lower(const LowerArgs& args);
int run_validate(const ScenarioArgs& args);

}  // namespace shardscope::cli
