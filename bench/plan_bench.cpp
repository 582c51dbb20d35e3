// `shardscope plan` speed. Goal (docs/planner.md): each case answered in ≤ 10 s on a 2-core
// machine, and the progress line's time left within 30 % of the truth after a tenth of the work
// (the time_left_error counter). The smoke test (ctest bench.plan_bench) runs the 8B case only.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
  // Each report's time and share of the work (work_done / work_total, as the CLI's progress
  // shows it), to measure how far its time-left estimate is from the truth.
  std::vector<std::pair<double, double>> reports;
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  options.progress = [&](const sim::PlanProgress& at) {
    ops = at.work_done;
    reports.emplace_back(elapsed(),
                         static_cast<double>(at.work_done) /
                             static_cast<double>(std::max<std::int64_t>(1, at.work_total)));
  };
  sim::PlanResult result;
  for (auto _ : state) result = sim::plan(tree, file, space, options);
  const double total = elapsed();
  // The time left the progress line says (elapsed × (1 − share) / share, once 3 s have passed:
  // cli/progress.hpp) against the time that was left, over the reports between a tenth and nine
  // tenths of the run (the goal: within 30 % after a tenth of the work; at the very end any error
  // is a large share of nothing). 0 when the run ends before the line says anything.
  // time_left_error_unsaid: the same from a tenth of the run without waiting 3 s, what the line
  // would say on runs that end before it speaks.
  const auto worst_error = [&](double from) {
    double worst = 0;
    for (const auto& [t, share] : reports) {
      if (t < from || t > 0.9 * total || share <= 0 || share >= 1) continue;
      const double said = t * (1 - share) / share, truth = total - t;
      worst = std::max(worst, std::abs(said - truth) / truth);
    }
    return worst;
  };
  state.counters["time_left_error"] = worst_error(std::max(3.0, 0.1 * total));
  state.counters["time_left_error_unsaid"] = worst_error(0.1 * total);
  state.counters["configurations"] = static_cast<double>(result.space);
  state.counters["simulated"] = static_cast<double>(result.simulated);
  state.counters["memory_only"] = static_cast<double>(result.screened_by_memory);
  state.counters["unlowered"] = static_cast<double>(result.screened_before_lowering);
  state.counters["by_floor"] = static_cast<double>(result.skipped_by_floor);
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
