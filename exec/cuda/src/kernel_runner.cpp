#include "kernel_runner.hpp"

#include <algorithm>

#include "cuda_check.hpp"
#include "device_kernels.hpp"

namespace shardscope::exec::cuda {
namespace {

constexpr int kCausalChunks = 8;  // query-row chunks of a causal attention: 56 % of full work

}  // namespace

KernelRunner::KernelRunner() {
  for (auto& region : scratch_) {
    SHARDSCOPE_CUDA(cudaMalloc(&region, static_cast<std::size_t>(kRegion)));
    SHARDSCOPE_CUDA(fill_random(region, static_cast<std::size_t>(kRegion), 7, nullptr));
  }
  SHARDSCOPE_CUDA(cudaDeviceSynchronize());
}

KernelRunner::~KernelRunner() {
  for (void* region : scratch_) {
    if (region != nullptr) SHARDSCOPE_CUDA_LOG(cudaFree(region));
  }
}

void KernelRunner::run(const Kernel& k, cudaStream_t st) {
  switch (k.kind()) {
    case KernelKind::gemm:
      tiled_gemm(std::get<Gemm>(k.shape), st);
      return;
    case KernelKind::attention:
      attention(std::get<Attention>(k.shape), st);
      return;
    case KernelKind::memory:
    case KernelKind::loss:
      move_traffic(kernel_memory_bytes({k.label, 1, k.shape}), st);
      return;
    case KernelKind::optimizer: {
      const auto& o = std::get<OptimizerUpdate>(k.shape);
      const std::int64_t per_pass = kRegion / static_cast<Bytes>(bytes_per_element(o.dtype));
      for (std::int64_t done = 0; done < o.elements; done += per_pass) {
        AdamWArgs a;
        a.param = scratch_[0];
        a.grad = scratch_[1];
        a.exp_avg = scratch_[2];
        a.exp_avg_sq = scratch_[3];
        a.n = std::min(per_pass, o.elements - done);
        a.bf16 = o.dtype != DType::fp32;
        SHARDSCOPE_CUDA(adamw(a, st));
      }
      // Foreach: the same update in several passes; the passes beyond the fused one move their
      // bytes as bandwidth kernels.
      OptimizerUpdate fused = o;
      fused.impl = OptimizerImpl::fused;
      const Bytes extra =
          o.elements * bytes_per_element(o.dtype) *
          (optimizer_accesses_per_element(o) - optimizer_accesses_per_element(fused));
      if (extra > 0) move_traffic(extra, st);
      return;
    }
  }
}

// Tiles of at most one scratch region per operand, along m and n: the same FLOPs; tiles of
// thousands of rows run at the whole GEMM's efficiency.
void KernelRunner::tiled_gemm(const Gemm& g, cudaStream_t st) {
  const Bytes elem = std::max(bytes_per_element(g.input), bytes_per_element(g.output));
  const std::int64_t nc =
      std::clamp<std::int64_t>(kRegion / (std::max<std::int64_t>(g.k, 1) * elem * g.batch), 1, g.n);
  const std::int64_t mc =
      std::clamp<std::int64_t>(kRegion / (std::max(g.k, nc) * elem * g.batch), 1, g.m);
  for (std::int64_t m0 = 0; m0 < g.m; m0 += mc) {
    for (std::int64_t n0 = 0; n0 < g.n; n0 += nc) {
      Gemm tile = g;
      tile.m = std::min(mc, g.m - m0);
      tile.n = std::min(nc, g.n - n0);
      gemm_.run(tile, scratch_[0], scratch_[1], scratch_[2], st);
    }
  }
}

// Blocked attention per group of (batch × head) slices: S = Q·Kᵀ, softmax, O = P·V; causal
// attention in kCausalChunks row chunks, each against the keys up to its last row. The backward
// recomputes S and P and runs dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q (2.5× the
// forward's GEMM work, as FlashAttention's).
void KernelRunner::attention(const Attention& a, cudaStream_t st) {
  const std::int64_t slices = a.batch * a.heads;
  const std::int64_t chunks = a.causal ? std::min<std::int64_t>(kCausalChunks, a.q_len) : 1;
  const std::int64_t rows = (a.q_len + chunks - 1) / chunks;
  // Per slice, the largest operand: scores (rows × keys), keys or values (keys × head dim), or
  // queries and outputs (rows × head dim); as many slices per call as fit in a region.
  const std::int64_t largest =
      std::max({rows * a.kv_len, a.kv_len * a.head_dim, rows * a.head_dim});
  const std::int64_t per_call = std::clamp<std::int64_t>(
      kRegion / std::max<std::int64_t>(largest * bytes_per_element(a.dtype), 1), 1, slices);
  for (std::int64_t s0 = 0; s0 < slices; s0 += per_call) {
    const std::int64_t hb = std::min(per_call, slices - s0);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t r = std::min(rows, a.q_len - c * rows);
      const std::int64_t kv = a.causal ? std::min(a.kv_len, (c + 1) * rows) : a.kv_len;
      const auto g = [&](std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb) {
        gemm_.run(Gemm{m, n, k, hb, ta, tb, a.dtype, a.dtype}, scratch_[0], scratch_[1],
                  scratch_[3], st);
      };
      g(r, kv, a.head_dim, false, true);  // S = Q·Kᵀ
      SHARDSCOPE_CUDA(softmax_rows(scratch_[3], r, kv, a.causal, c * rows, hb, st));
      g(r, a.head_dim, kv, false, false);  // O = P·V, or dQ = dS·K in the backward
      if (a.backward) {
        g(r, kv, a.head_dim, false, true);  // dP = dO·Vᵀ
        g(kv, a.head_dim, r, true, false);  // dV = Pᵀ·dO
        g(kv, a.head_dim, r, true, false);  // dK = dSᵀ·Q
        SHARDSCOPE_CUDA(softmax_rows(scratch_[3], r, kv, a.causal, c * rows, hb, st));  // dS
      }
    }
  }
}

// `traffic` bytes of HBM: half read, half written, a region at a time.
void KernelRunner::move_traffic(Bytes traffic, cudaStream_t st) {
  for (Bytes left = traffic; left > 0; left -= 2 * kRegion)
    SHARDSCOPE_CUDA(move_bytes(scratch_[0], scratch_[1],
                               static_cast<std::size_t>(std::min(left, 2 * kRegion)), st));
}

}  // namespace shardscope::exec::cuda
