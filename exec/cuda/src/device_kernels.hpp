#pragma once
// The CUDA kernels the backend launches besides cuBLASLt's GEMMs (device_kernels.cu). Every
// launcher enqueues on `stream` and returns at once; errors surface at the next checked call.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace shardscope::exec::cuda {

// Each launcher returns cudaGetLastError() after its launch, so a launch that failed (a bad
// configuration, no device) is reported by the call that made it (SHARDSCOPE_CUDA).

/// Fills `bytes` with pseudo-random bf16-safe values (never NaN or Inf), so GEMMs draw the power
/// they draw on real data (zeros run cooler and faster).
[[nodiscard]] cudaError_t fill_random(void* data, std::size_t bytes, std::uint32_t seed,
                                      cudaStream_t stream);

/// Memory-bound traffic: reads `bytes / 2` from `src` and writes them to `dst` (`bytes` of HBM
/// traffic in all), the way norms, activations and residual adds move memory.
[[nodiscard]] cudaError_t move_bytes(const void* src, void* dst, std::size_t bytes,
                                     cudaStream_t stream);

/// Row softmax in place over `rows` rows of `cols` bf16 values; row r keeps only its first
/// `causal_offset + r + 1` columns (the rest become 0) when `causal`.
[[nodiscard]] cudaError_t softmax_rows(void* scores, std::int64_t rows, std::int64_t cols,
                                       bool causal, std::int64_t causal_offset, std::int64_t batch,
                                       cudaStream_t stream);

/// torch.optim.AdamW's update over `n` fp32 (or bf16 when `bf16`) parameters, in one fused pass.
struct AdamWArgs {
  void* param = nullptr;
  const void* grad = nullptr;
  void* exp_avg = nullptr;
  void* exp_avg_sq = nullptr;
  std::int64_t n = 0;
  bool bf16 = false;
  float lr = 1e-4F, beta1 = 0.9F, beta2 = 0.95F, eps = 1e-8F, weight_decay = 0.1F;
  int step = 1;
};
[[nodiscard]] cudaError_t adamw(const AdamWArgs& args, cudaStream_t stream);

/// An emulated collective (--comm emulate): `ctas` blocks (NCCL's channels) copy `input` into
/// `output` (cyclically) and stay resident until `duration_ns` has passed on the GPU's global
/// timer, so the SMs and HBM NCCL would use are busy for the wire time the model predicts.
[[nodiscard]] cudaError_t emulated_collective(const void* input, std::size_t input_bytes,
                                              void* output, std::size_t output_bytes,
                                              std::uint64_t duration_ns, int ctas,
                                              cudaStream_t stream);

/// Holds `sms` SMs (fewer than the GPU has) as a collective's channels hold them: one resident
/// block each, with the SM's whole shared memory so that no GEMM or attention block runs beside
/// it. Block i sets `started[i]` to 1 when it runs and spins until `*release` is non-zero or
/// `max_ns` has passed on the GPU's timer (a bound, so an abandoned hold cannot hang the GPU).
/// `started` (`sms` ints) and `release` are mapped host memory (device pointers of
/// cudaHostAllocMapped).
[[nodiscard]] cudaError_t hold_sms(int sms, int* started, const int* release, std::uint64_t max_ns,
                                   cudaStream_t stream);

}  // namespace shardscope::exec::cuda
