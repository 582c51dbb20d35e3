#pragma once
// Runs a compute op's kernels (core/kernel.hpp) on a stream: the one place the CUDA backend and
// profile-device both go through, so a profiled kernel is timed exactly as a run executes it.
//
// Operands live in a scratch arena of four regions of kRegion bytes, outside the caching
// allocator (the IR names buffers, not the tensors inside them): GEMMs larger than a region run
// as tiles along m and n (the same FLOPs; tiles of thousands of rows run at the whole GEMM's
// efficiency), memory-bound traffic and optimizer passes a region at a time. Attention runs as
// blocked cuBLASLt GEMMs and a softmax kernel (not cuDNN's fused flash attention).

#include <cuda_runtime.h>

#include <array>

#include "gemm_runner.hpp"
#include "shardscope/core/kernel.hpp"

namespace shardscope::exec::cuda {

class KernelRunner {
 public:
  static constexpr Bytes kRegion = 128 * kMiB;
  static constexpr int kRegions = 4;

  KernelRunner();  // allocates and fills the scratch arena
  ~KernelRunner();
  KernelRunner(const KernelRunner&) = delete;
  KernelRunner& operator=(const KernelRunner&) = delete;

  /// One run of `kernel` (its repeats are the caller's).
  void run(const Kernel& kernel, cudaStream_t stream);
  /// `traffic` bytes of HBM: half read, half written.
  void move_traffic(Bytes traffic, cudaStream_t stream);
  void* scratch(int region) const { return scratch_[static_cast<std::size_t>(region)]; }

 private:
  void tiled_gemm(const Gemm& g, cudaStream_t st);
  void attention(const Attention& a, cudaStream_t st);

  std::array<void*, kRegions> scratch_{};
  GemmRunner gemm_;
};

}  // namespace shardscope::exec::cuda
