#include "shardscope/sim/kernel_shape_model.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace shardscope::sim {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

struct Tile {
  std::int64_t m;
  std::int64_t n;
};

// The CTA tiles cuBLAS's sm80/sm90 bf16 kernels use for large products.
constexpr std::array<Tile, 3> kTiles{Tile{128, 256}, Tile{256, 128}, Tile{128, 128}};

}  // namespace

GemmCost gemm_cost(const Gemm& g, std::int64_t repeat, int sm_count,
                   const KernelShapeParams& params, int sms_left) {
  const double r = static_cast<double>(repeat);
  const Flops flops = shape_flops(g);
  if (sm_count <= 0 || flops <= 0) return {flops * r, 0};
  const std::int64_t sms = sm_count;
  const std::int64_t left = sms_left > 0 ? std::min<std::int64_t>(sms_left, sms) : sms;
  // Candidates compare by their FLOPs alone: split-K's partial sums are small next to them
  // wherever split-K is chosen (few tiles, long k).
  Flops best_work = std::numeric_limits<double>::infinity();
  GemmCost best;
  for (const Tile& t : kTiles) {
    const std::int64_t tiles = ceil_div(g.m, t.m) * ceil_div(g.n, t.n) * g.batch;
    std::int64_t split = 1;
    if (tiles < sms)
      split = std::max<std::int64_t>(1, std::min(sms / tiles, g.k / params.gemm_split_k_min));
    const double k_per_tile =
        static_cast<double>(g.k) / static_cast<double>(split) + params.gemm_k_overhead;
    const double tile_work = 2.0 * static_cast<double>(t.m * t.n) * k_per_tile;
    const Flops work = static_cast<double>(ceil_div(tiles * split, sms) * sms) * tile_work;
    if (work < best_work) {
      best_work = work;
      const Bytes partials = split > 1 ? 4 * g.m * g.n * g.batch * split : 0;
      const Flops ran = static_cast<double>(ceil_div(tiles * split, left) * sms) * tile_work;
      best = {ran * r, partials * repeat};
    }
  }
  return best;
}

double sm_share(int sm_count, int sms) {
  return sms > 0 && sms < sm_count ? static_cast<double>(sm_count) / sms : 1.0;
}

double sm_model_slowdown(const Kernel& kernel, int sm_count, int sms_left,
                         const KernelShapeParams& params) {
  if (const auto* g = std::get_if<Gemm>(&kernel.shape)) {
    const Flops alone = gemm_cost(*g, 1, sm_count, params).full_rate_flops;
    return alone > 0 ? gemm_cost(*g, 1, sm_count, params, sms_left).full_rate_flops / alone : 1.0;
  }
  if (std::holds_alternative<Attention>(kernel.shape)) return sm_share(sm_count, sms_left);
  return 1.0;
}

Flops attention_full_rate_flops(const Attention& a, std::int64_t repeat,
                                const KernelShapeParams& params) {
  const Flops flops = shape_flops(a);  // the backward's 2.5× included
  if (flops <= 0) return 0;
  const double keys = static_cast<double>(a.kv_len) * (a.causal ? 0.5 : 1.0);
  const double half =
      a.backward ? params.attention_backward_half_length : params.attention_forward_half_length;
  const double d0 = params.attention_head_dim_overhead;
  const double head_dim = (1 + d0 / static_cast<double>(a.head_dim)) / (1 + d0 / 128.0);
  return flops * (1 + half / keys) * (a.backward ? params.attention_backward_factor : 1.0) *
         head_dim * static_cast<double>(repeat);
}

}  // namespace shardscope::sim
