// Kineto trace import speed and memory: a synthetic FSDP2 trace shaped like a real one (per step
// and layer a pre-forward hook range, an all-gather copy-in, an NCCL all-gather, forward kernels
// each under a cpu_op with its launch; the same in backward on autograd's thread) is written once
// to a temporary file and imported from it. Reports MB/s of trace JSON and the process's peak
// resident memory (ru_maxrss) after the import, beside the file's size.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "shardscope/traces/kineto_import.hpp"

namespace {

using shardscope::traces::import_kineto;

class TraceWriter {
 public:
  explicit TraceWriter(const std::filesystem::path& path) : out_(path) {
    out_
        << R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},)"
        << "\n\"traceEvents\": [\n";
  }
  ~TraceWriter() { out_ << "{}]}\n"; }
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void range(const char* cat, const std::string& name, int tid, long ts, long dur) {
    out_
        << fmt::format(
               R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": 1, "tid": {}, "ts": {}, "dur": {}}},)",
               cat, name, tid, ts, dur)
        << '\n';
  }
  // A launch on CPU thread `tid` at `ts` and its kernel on `stream` at `gpu_ts`.
  void kernel(const std::string& name, int tid, long ts, int stream, long gpu_ts, long dur,
              const std::string& extra_args = {}) {
    const long id = ++correlation_;
    out_
        << fmt::format(
               R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": {}, "ts": {}, "dur": 2, "args": {{"correlation": {}}}}},)",
               tid, ts, id)
        << '\n';
    out_
        << fmt::format(
               R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": {}, "ts": {}, "dur": {}, "args": {{"device": 0, "stream": {}, "correlation": {}{}}}}},)",
               name, stream, gpu_ts, dur, stream, id, extra_args)
        << '\n';
  }

 private:
  std::ofstream out_;
  long correlation_ = 0;
};

// steps × layers × (forward + backward) × kernels_per_layer kernels and their ranges.
std::filesystem::path write_trace(int layers) {
  auto path = std::filesystem::temp_directory_path() /
              fmt::format("shardscope_import_bench_{}_{}.json", layers, getpid());
  constexpr int kSteps = 3, kKernels = 12;
  TraceWriter w(path);
  long t = 0;
  const std::string nccl_args =
      R"(, "Collective name": "_allgather_base", "dtype": "BFloat16", "In msg nelems": 1000, "Out msg nelems": 8000, "Group size": 8, "Process Group Name": "0")";
  for (int step = 0; step < kSteps; ++step) {
    const long step_start = t;
    const long step_len = 2L * layers * (kKernels + 2) * 20 + 100;
    w.range("user_annotation", fmt::format("ProfilerStep#{}", step), 1, step_start, step_len);
    for (int pass = 0; pass < 2; ++pass) {
      const int tid = pass == 0 ? 1 : 2;
      for (int l = 0; l < layers; ++l) {
        const std::string hook = pass == 0 ? "FSDP::pre_forward" : "FSDP::pre_backward";
        w.range("user_annotation", fmt::format("{} (layers.{})", hook, l), tid, t, 10);
        w.range("cpu_op", "fsdp::all_gather_copy_in", tid, t + 1, 4);
        w.kernel("void at::native::elementwise_kernel<128, 4>(int)", tid, t + 2, 20, t + 5, 3);
        w.kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", tid, t + 6,
                 21, t + 8, 10, nccl_args);
        t += 20;
        for (int k = 0; k < kKernels; ++k) {
          w.range("cpu_op",
                  pass == 0 ? "aten::mm" : "autograd::engine::evaluate_function: MmBackward0", tid,
                  t, 10);
          w.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", tid, t + 1, 7, t + 5, 12);
          t += 20;
        }
      }
    }
    t = step_start + step_len;
  }
  return path;
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void BM_ImportKineto(benchmark::State& state) {
  const auto path = write_trace(static_cast<int>(state.range(0)));
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
  std::size_t ops = 0;
  for (auto _ : state) {
    const auto imported = import_kineto(path);
    ops = imported.timeline.ops.size();
    benchmark::DoNotOptimize(ops);
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["trace_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["gpu_ops"] = static_cast<double>(ops);
  state.counters["peak_rss_MB"] = static_cast<double>(peak_rss_kib()) * 1024 / 1e6;
  std::filesystem::remove(path);
}
// 128 layers: 4.8 MB of trace, 10,752 GPU ops; 1024 layers: 38 MB, 86,016 GPU ops.
BENCHMARK(BM_ImportKineto)->Arg(128)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
