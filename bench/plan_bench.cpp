// `shardscope plan` speed. Goal (docs/planner.md): a space of ≥ 100,000 configurations answered
// in ≤ 10 s on a 2-core machine.
#include <benchmark/benchmark.h>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/planner.hpp"

namespace {

using namespace shardscope;

// Llama 3.1 8B on 8 H100 at 8 sequences of 8192 tokens per GPU per step: 350,208 configurations.
void BM_PlanDefaultSpace(benchmark::State& state) {
  const std::string file = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";
  const ConfigTree tree = load_config_file(file);
  sim::PlanInputs inputs;
  inputs.global_batch_tokens = std::int64_t{8192} * 8 * 8;
  const auto space = sim::default_plan_space(load_scenario(file), inputs);
  sim::PlanOptions options;
  options.memory_budget = Bytes{75} * kGiB;
  sim::PlanResult result;
  for (auto _ : state) result = sim::plan(tree, file, space, options);
  state.counters["configurations"] = static_cast<double>(result.space);
  state.counters["simulated"] = static_cast<double>(result.simulated);
}
BENCHMARK(BM_PlanDefaultSpace)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
