// The CUDA backend on the local GPU (each benchmark skips without one). Goals (docs/exec.md):
// in emulate mode the compute stream idles ≤ 1 % of a compute-bound step; the per-op timing
// events cost little next to a kernel; cuBLASLt GEMMs of the default scenario's shapes reach a
// stated share of the device's dense peak.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include "exec/cuda/src/kernel_runner.hpp"
#include "shardscope/core/analysis.hpp"
#include "shardscope/core/device_profile.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/exec/cuda_backend.hpp"
#include "shardscope/exec/executor.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace {

using namespace shardscope;

bool skip_without_gpu(benchmark::State& state) {
  std::string why;
  if (exec::cuda_device_available(&why)) return false;
  state.SkipWithError(why.c_str());
  return true;
}

Scenario default_scenario() {
  return load_scenario(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml",
                       {"model.layers=4", "training.iterations=2"});
}

// One GEMM shape of the default scenario per benchmark argument: TFLOP/s and the share of the
// preset's dense peak (at its power cap).
void BM_GemmEfficiency(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const Scenario sc = default_scenario();
  const auto shapes = distinct_shapes(lower(sc));
  std::vector<Kernel> gemms;
  for (const Kernel& k : shapes) {
    if (k.kind() == KernelKind::gemm) gemms.push_back(k);
  }
  const auto index = static_cast<std::size_t>(state.range(0));
  if (index >= gemms.size()) {
    state.SkipWithError("no such shape");
    return;
  }
  exec::cuda::KernelRunner runner;
  const Kernel& k = gemms[index];
  cudaEvent_t start = nullptr, end = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    runner.run(k, nullptr);
    cudaEventRecord(end, nullptr);
    cudaEventSynchronize(end);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, end);
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
  }
  const double flops = kernel_flops(k) * static_cast<double>(state.iterations());
  state.counters["TFLOP/s"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsRate);
  state.counters["of_peak"] =
      benchmark::Counter(flops / sim::CostModel(sc).effective_peak(), benchmark::Counter::kIsRate);
  state.SetLabel(k.label);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
}
BENCHMARK(BM_GemmEfficiency)->DenseRange(0, 12)->UseManualTime()->Unit(benchmark::kMicrosecond);

// A whole step in emulate mode: the share of the step the compute stream ran nothing (goal
// ≤ 1 % for a compute-bound step; exposed communication is counted in it, as it should be).
void BM_EmulatedStepComputeIdle(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto planned = sim::simulate_scenario(default_scenario());
  exec::CudaBackendOptions options;
  options.modelled_time = [&planned](OpId id, const Op&) {
    const auto& rec = planned.simulation.ops[static_cast<std::size_t>(id)];
    return rec.end - rec.start;
  };
  double idle = 0;
  for (auto _ : state) {
    auto backend = exec::make_cuda_backend(options);
    const Timeline t = exec::run(planned.schedule, *backend);
    const auto summary = analysis::summarize(t, false);
    double busy = 0;
    for (const auto& [stream, ns] : summary.stream_busy) {
      if (stream == "compute" && ns) busy = static_cast<double>(*ns);
    }
    idle = 1.0 - busy / static_cast<double>(summary.step_time);
    state.SetIterationTime(static_cast<double>(summary.step_time) / 1e9);
  }
  state.counters["compute_idle"] = idle;
}
BENCHMARK(BM_EmulatedStepComputeIdle)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// What the executor's two timing events add to one small kernel's launch, on the host.
void BM_PerOpTimingOverhead(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  exec::cuda::KernelRunner runner;
  const Kernel tiny{"tiny", 1, MemoryBound{4096, 0}};
  const bool events = state.range(0) != 0;
  cudaEvent_t start = nullptr, end = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  for (auto _ : state) {
    if (events) cudaEventRecord(start, nullptr);
    runner.run(tiny, nullptr);
    if (events) cudaEventRecord(end, nullptr);
  }
  cudaDeviceSynchronize();
  cudaEventDestroy(start);
  cudaEventDestroy(end);
}
BENCHMARK(BM_PerOpTimingOverhead)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
