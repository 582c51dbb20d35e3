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
#include "shardscope/core/time_left.hpp"
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
  // The time left the progress line would say at each report (TimeLeft, as cli/progress.hpp
  // says it), to measure how far it is from the truth.
  TimeLeft time_left;
  std::vector<std::pair<double, double>> said;  // (elapsed s, time left s)
  double thread_s = 0;                          // the work, in thread time (sim::PlanProgress)
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  options.progress = [&](const sim::PlanProgress& at) {
    const double t = elapsed();
    thread_s = at.seconds_done;
    if (const auto left = time_left.update(t, at.seconds_done, at.seconds_total, at.estimated))
      said.emplace_back(t, *left);
  };
  sim::PlanResult result;
  for (auto _ : state) result = sim::plan(tree, file, space, options);
  const double total = elapsed();
  // The worst error of the time left said from `from` seconds on, against the time that was
  // left, up to nine tenths of the run (at the very end any error is a large share of nothing).
  // The line says it once kSayTimeLeftAfterS have passed (time_left_error: 0 when the run ends
  // before);
  // time_left_error_unsaid is the same from a tenth of the run without that wait, what a slower
  // machine would show. time_left_from: the share of the run before the first time left (the line
  // says it is estimating until then).
  const auto worst_error = [&](double from) {
    double worst = 0;
    for (const auto& [t, left] : said) {
      if (t < from || t > 0.9 * total) continue;
      worst = std::max(worst, std::abs(left - (total - t)) / (total - t));
    }
    return worst;
  };
  state.counters["time_left_error"] = worst_error(std::max(kSayTimeLeftAfterS, 0.1 * total));
  state.counters["time_left_error_unsaid"] = worst_error(0.1 * total);
  state.counters["time_left_from"] = said.empty() ? 1.0 : said.front().first / total;
  state.counters["thread_s"] = thread_s;
  state.counters["configurations"] = static_cast<double>(result.space);
  state.counters["simulated"] = static_cast<double>(result.simulated);
  state.counters["memory_only"] = static_cast<double>(result.screened_by_memory);
  state.counters["unlowered"] = static_cast<double>(result.screened_before_lowering);
  state.counters["by_floor"] = static_cast<double>(result.skipped_by_floor);
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
