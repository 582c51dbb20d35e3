#include "shardscope/exec/device_profiler.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "cuda_check.hpp"
#include "cuda_handles.hpp"
#include "kernel_runner.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::exec {
namespace {

using cuda::KernelRunner;

// Events around `work` on `stream`, `repetitions` times after one warm-up: the median in ns.
template <typename Work>
TimeNs median_time(cudaStream_t stream, int repetitions, Work work) {
  const cuda::UniqueEvent start = cuda::make_event(), end = cuda::make_event();
  work();
  std::vector<TimeNs> times;
  for (int r = 0; r < repetitions; ++r) {
    SHARDSCOPE_CUDA(cudaEventRecord(start.get(), stream));
    work();
    SHARDSCOPE_CUDA(cudaEventRecord(end.get(), stream));
    SHARDSCOPE_CUDA(cudaEventSynchronize(end.get()));
    float ms = 0;
    SHARDSCOPE_CUDA(cudaEventElapsedTime(&ms, start.get(), end.get()));
    times.push_back(static_cast<TimeNs>(static_cast<double>(ms) * 1e6));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double rate(Bytes bytes, TimeNs t) {
  return t > 0 ? static_cast<double>(bytes) / (static_cast<double>(t) * 1e-9) : 0;
}

}  // namespace

DeviceProfile profile_device(const Schedule& schedule, const ProfileDeviceOptions& options) {
  SHARDSCOPE_CUDA(cudaSetDevice(options.device));
  cudaDeviceProp prop{};
  SHARDSCOPE_CUDA(cudaGetDeviceProperties(&prop, options.device));
  DeviceProfile p;
  p.device = prop.name;
  p.version = std::string(shardscope_version());
  const cuda::UniqueStream owned_stream = cuda::make_stream();
  cudaStream_t stream = owned_stream.get();
  KernelRunner runner;
  const int reps = std::max(1, options.repetitions);
  const std::vector<Kernel> shapes = distinct_shapes(schedule);
  const int total = static_cast<int>(shapes.size()) + 3;
  int done = 0;
  const auto step = [&] {
    if (options.progress) options.progress(++done, total);
  };
  for (const Kernel& k : shapes) {
    const TimeNs t = median_time(stream, reps, [&] { runner.run(k, stream); });
    if (const auto* g = std::get_if<Gemm>(&k.shape)) p.gemms.push_back({*g, t});
    if (const auto* a = std::get_if<Attention>(&k.shape)) p.attention.push_back({*a, t});
    step();
  }
  constexpr Bytes kTraffic = 8 * KernelRunner::kRegion;
  p.memory_bandwidth =
      rate(kTraffic, median_time(stream, reps, [&] { runner.move_traffic(kTraffic, stream); }));
  step();
  // Host copies of one region, from pinned and from pageable memory.
  constexpr Bytes kCopy = KernelRunner::kRegion;
  const cuda::UniquePinned owned_pinned = cuda::make_pinned(static_cast<std::size_t>(kCopy));
  void* pinned = owned_pinned.get();
  std::vector<std::byte> pageable(static_cast<std::size_t>(kCopy));
  const auto copy = [&](void* host, bool h2d) {
    return rate(kCopy, median_time(stream, reps, [&] {
                  SHARDSCOPE_CUDA(cudaMemcpyAsync(
                      h2d ? runner.scratch(0) : host, h2d ? host : runner.scratch(0),
                      static_cast<std::size_t>(kCopy),
                      h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
                }));
  };
  p.h2d_pinned = copy(pinned, true);
  p.d2h_pinned = copy(pinned, false);
  p.h2d_pageable = copy(pageable.data(), true);
  p.d2h_pageable = copy(pageable.data(), false);
  step();
  // Launch overhead: host time per launch of a tiny kernel; event overhead: a record and a wait.
  constexpr int kLaunches = 1000;
  const Kernel tiny{"tiny", 1, MemoryBound{4096, 0}};
  SHARDSCOPE_CUDA(cudaStreamSynchronize(stream));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLaunches; ++i) runner.run(tiny, stream);
  p.launch_overhead =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count() /
      kLaunches;
  const cuda::UniqueEvent owned_event = cuda::make_event(cudaEventDisableTiming);
  cudaEvent_t e = owned_event.get();
  SHARDSCOPE_CUDA(cudaStreamSynchronize(stream));
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLaunches; ++i) {
    SHARDSCOPE_CUDA(cudaEventRecord(e, stream));
    SHARDSCOPE_CUDA(cudaStreamWaitEvent(stream, e));
  }
  p.event_overhead =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count() /
      kLaunches;
  SHARDSCOPE_CUDA(cudaStreamSynchronize(stream));
  step();
  return p;
}

}  // namespace shardscope::exec
