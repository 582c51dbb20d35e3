#pragma once
// What a GEMM's or an attention's shape costs beyond its FLOPs: the work a GPU spends on it,
// expressed as the FLOPs it would do in that time at its asymptotic rate (peak · efficiency).
// The cost model divides these "full-rate FLOPs" by peak · matmul_efficiency (GEMMs) or
// peak · attention_efficiency (attention), so a calibration still fits one linear coefficient each.
//
// GEMM (cuBLAS/cuBLASLt on sm80/sm90, NVIDIA's "Matrix Multiplication Background" guide): the
//   output is cut into Tm × Tn tiles, one per SM at a time; a wave of `sm_count` tiles costs what
//   one tile costs, so a GEMM costs
//     waves · sm_count · 2 · Tm · Tn · (k / split + k_overhead)
//   with waves = ⌈tiles · split / sm_count⌉, k_overhead the tile's prologue and epilogue in
//   k-steps, and split > 1 (split-K) when there are fewer tiles than SMs: k is cut into as many
//   slices as fill the GPU, each at least `split_k_min` long, whose fp32 partial products are
//   written and summed (4 · m · n · split bytes, memory-bound). The cheapest of 128 × 256,
//   256 × 128 and 128 × 128 tiles wins, as cuBLAS's heuristic picks among them.
// Attention (FlashAttention-2/3, cuDNN): each query tile streams its keys; the per-tile overhead
//   is amortised over the keys it sees (L = kv_len, half of it when causal), the backward is
//   slower per FLOP, and a small head dimension does less math per byte:
//     F · (1 + L_half / L) · (backward ? backward_factor : 1) · (1 + d0 / d) / (1 + d0 / 128)
//   so head dimension 128, forward, long sequences run at the attention efficiency itself.
//
// The constants are fitted to PyTorch's kernels on an H200 (tests/data/measured/
// 2026-11-27-h200-2/kernel_sweep.csv) by scripts/fit_kernel_shapes.py, which prints the fit's
// errors and leave-one-out errors per shape family (docs/validation.md, "Kernels by shape"); the
// k overhead on that sweep and XLA's published H100 GEMM table together
// (tests/data/published/xla_matmul_h100.csv: k from 256 to 4,096, where the sweep has three
// GEMMs below 2,048).

#include <cstdint>

#include "shardscope/core/kernel.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope::sim {

struct KernelShapeParams {
  double gemm_k_overhead = 160;                 // k-steps a tile spends outside its main loop
  std::int64_t gemm_split_k_min = 512;          // the shortest k slice split-K makes
  double attention_forward_half_length = 192;   // keys per query at which forward runs at 1/2
  double attention_backward_half_length = 512;  // the same for the backward
  double attention_backward_factor = 1.1;       // backward's time per FLOP over forward's
  double attention_head_dim_overhead = 64;  // d0: a head dimension d runs at (1+d0/128)/(1+d0/d)
};

/// What a GEMM costs, repeats and batch included.
struct GemmCost {
  Flops full_rate_flops = 0;  // FLOPs at the asymptotic rate that take its time
  Bytes split_k_bytes = 0;    // HBM traffic of split-K's partial sums
};

/// The GEMM's cost on a GPU of `sm_count` SMs (sm_count ≤ 0: its FLOPs, no quantization).
/// `sms_left` > 0: collectives hold the other SMs while it runs; its tiles and split are still
/// those picked for `sm_count` (the heuristic does not see them), its waves run over `sms_left`
/// SMs, each as long as a wave over all of them.
GemmCost gemm_cost(const Gemm& gemm, std::int64_t repeat, int sm_count,
                   const KernelShapeParams& params, int sms_left = 0);

/// The GPU's `sm_count` SMs over `sms` of them: how much longer work every SM shares takes on
/// those alone (1 on all of them, or on none).
double sm_share(int sm_count, int sms);

/// What the SM model makes of one run of `kernel` on the `sms_left` of `sm_count` SMs that held
/// ones leave: its time over its time on all of them. A GEMM's waves over the SMs left (its tiles
/// and split as picked for all of them; split-K's partial sums, memory-bound, left out), an
/// attention at the SMs' share, any other kernel 1 (HBM, not SMs, bounds it).
double sm_model_slowdown(const Kernel& kernel, int sm_count, int sms_left,
                         const KernelShapeParams& params);

/// An attention kernel's full-rate FLOPs, repeats included.
Flops attention_full_rate_flops(const Attention& attention, std::int64_t repeat,
                                const KernelShapeParams& params);

}  // namespace shardscope::sim
