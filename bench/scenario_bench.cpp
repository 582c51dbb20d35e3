// Cost of reading and validating a scenario (the CLI and the GUI do it on every change).
#include <benchmark/benchmark.h>

#include "shardscope/core/param_groups.hpp"
#include "shardscope/core/scenario.hpp"

namespace {

void BM_LoadDefaultScenario(benchmark::State& state) {
  const std::string path = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";
  for (auto _ : state) {
    auto scenario = shardscope::load_scenario(path, {"cluster.nodes=16"});
    benchmark::DoNotOptimize(scenario);
  }
}
BENCHMARK(BM_LoadDefaultScenario);

void BM_ParamGroups405B(benchmark::State& state) {
  const auto scenario = shardscope::scenario_from_text(
      "model: {preset: llama3.1-405b}\ncluster: {nodes: 128, gpus_per_node: 8}\n");
  for (auto _ : state) {
    auto groups = shardscope::param_groups(scenario);
    benchmark::DoNotOptimize(groups);
  }
}
BENCHMARK(BM_ParamGroups405B);

}  // namespace

BENCHMARK_MAIN();
