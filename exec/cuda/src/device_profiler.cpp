#include "shardscope/exec/device_profiler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "cuda_check.hpp"
#include "cuda_handles.hpp"
#include "device_kernels.hpp"
#include "kernel_runner.hpp"
#include "shardscope/core/error.hpp"
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

// `sms` SMs held for as long as it lives (cuda::hold_sms on a stream of its own): once
// constructed, every block holds its SM; destroyed, the blocks are released and have finished.
class SmHold {
 public:
  explicit SmHold(int sms)
      : flags_(cuda::make_mapped((static_cast<std::size_t>(sms) + 1) * sizeof(int))) {
    auto* host = static_cast<int*>(flags_.get());
    void* device = nullptr;
    SHARDSCOPE_CUDA(cudaHostGetDevicePointer(&device, flags_.get(), 0));
    auto* on_device = static_cast<int*>(device);
    // Ten minutes at most on the GPU's timer: longer than any profile's contended pass.
    constexpr std::uint64_t kMaxHoldNs = 600'000'000'000;
    SHARDSCOPE_CUDA(cuda::hold_sms(sms, on_device, on_device + sms, kMaxHoldNs, stream_.get()));
    release_ = host + sms;
    // Every block resident before anything is timed beside them; a GPU that cannot place them
    // all (another process holds SMs) is an error, not a hang.
    const volatile int* started = host;
    const auto placed = [&] {
      int n = 0;
      for (int i = 0; i < sms; ++i) n += started[i];
      return n;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (placed() < sms) {
      if (std::chrono::steady_clock::now() > deadline) {
        const int n = placed();
        *release_ = 1;
        SHARDSCOPE_CUDA_LOG(cudaStreamSynchronize(stream_.get()));
        throw Error(fmt::format(
            "profile-device: {} of the {} SMs to hold beside the kernels were placed within 10 s "
            "(is another process using this GPU?)",
            n, sms));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  SmHold(const SmHold&) = delete;
  SmHold& operator=(const SmHold&) = delete;
  ~SmHold() {
    *release_ = 1;
    SHARDSCOPE_CUDA_LOG(cudaStreamSynchronize(stream_.get()));
  }

 private:
  cuda::UniqueStream stream_ = cuda::make_stream();
  cuda::UniquePinned flags_;  // [0, sms): each block started; [sms]: release
  volatile int* release_ = nullptr;
};

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
  const int held = std::clamp(options.contended_sms, 0, prop.multiProcessorCount - 1);
  const int total = static_cast<int>(shapes.size()) * (held > 0 ? 2 : 1) + 3;
  int done = 0;
  const auto step = [&] {
    if (options.progress) options.progress(++done, total);
  };
  for (const Kernel& k : shapes) {
    const TimeNs t = median_time(stream, reps, [&] { runner.run(k, stream); });
    if (const auto* g = std::get_if<Gemm>(&k.shape)) p.gemms.push_back({*g, t, std::nullopt});
    if (const auto* a = std::get_if<Attention>(&k.shape))
      p.attention.push_back({*a, t, std::nullopt});
    step();
  }
  if (held > 0) {
    // The same shapes again, each beside `held` held SMs (the shapes are distinct, so the i-th
    // GEMM or attention measured above is the i-th of its kind here).
    const SmHold hold(held);
    std::size_t gemm = 0, attention = 0;
    for (const Kernel& k : shapes) {
      const TimeNs t = median_time(stream, reps, [&] { runner.run(k, stream); });
      if (std::holds_alternative<Gemm>(k.shape)) p.gemms[gemm++].contended_time = t;
      if (std::holds_alternative<Attention>(k.shape)) p.attention[attention++].contended_time = t;
      step();
    }
    p.contended_sms = held;
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
