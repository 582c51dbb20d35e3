// `shardscope plan` speed. Goal (docs/planner.md): each case answered in ≤ 10 s on a 2-core
// machine. The smoke test (ctest bench.plan_bench) runs the 8B case only; the 70B and 405B cases
// take minutes there today.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/planner.hpp"

namespace {

using namespace shardscope;

// The default scenario with `overrides`, planned at `global_batch_tokens` per step within a
// 75 GiB budget of peak reserved memory per GPU.
void plan_case(benchmark::State& state, const std::vector<std::string>& overrides,
               std::int64_t global_batch_tokens) {
  const std::string file = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";
  const ConfigTree tree = load_scenario_tree(file, overrides);
  sim::PlanInputs inputs;
  inputs.global_batch_tokens = global_batch_tokens;
  const auto space = sim::default_plan_space(load_scenario(file, overrides), inputs);
  sim::PlanOptions options;
  options.memory_budget = Bytes{75} * kGiB;
  std::int64_t ops = 0;  // the work done, in estimated schedule ops (sim::PlanProgress)
  options.progress = [&](const sim::PlanProgress& at) { ops = at.work_done; };
  sim::PlanResult result;
  for (auto _ : state) result = sim::plan(tree, file, space, options);
  state.counters["configurations"] = static_cast<double>(result.space);
  state.counters["simulated"] = static_cast<double>(result.simulated);
  state.counters["memory_only"] = static_cast<double>(result.screened_by_memory);
  state.counters["unlowered"] = static_cast<double>(result.screened_before_lowering);
  // What shardscope plan's --work-limit is measured against: schedule ops lowered and
  // simulated per second of wall time on all cores.
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
}

// Llama 3.1 8B on 8 H100 at 8 sequences of 8192 tokens per GPU per step: 350,208 configurations.
void BM_PlanDefaultSpace(benchmark::State& state) {
  plan_case(state, {}, std::int64_t{8192} * 8 * 8);
}
BENCHMARK(BM_PlanDefaultSpace)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// Llama 3.1 70B on 8 × 8 H100, 8192 tokens per sequence, 4 Mi tokens per step (issue 35).
void BM_PlanLlama70B64Gpus(benchmark::State& state) {
  plan_case(state, {"model.preset=llama3.1-70b", "cluster.nodes=8"}, std::int64_t{4} << 20);
}
BENCHMARK(BM_PlanLlama70B64Gpus)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// Llama 3.1 405B on 128 × 8 H100, 8192 tokens per sequence, 16 Mi tokens per step (issue 35).
void BM_PlanLlama405B1024Gpus(benchmark::State& state) {
  plan_case(state, {"model.preset=llama3.1-405b", "cluster.nodes=128"}, std::int64_t{16} << 20);
}
BENCHMARK(BM_PlanLlama405B1024Gpus)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
