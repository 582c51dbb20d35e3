#pragma once
// GPUs of one SKU are not equally fast (power and thermal limits, binning): a GPU time factor per
// rank drawn around 1, the same for whoever draws them (simulate --gpu-sigma, run --gpu-sigma).

#include <cstdint>
#include <vector>

namespace shardscope {

/// By rank: max(0.1, 1 + sigma·N(0, 1)), from one stream seeded by `seed` (rank order). Empty when
/// sigma is 0.
std::vector<double> gpu_speed_draws(int world_size, double sigma, std::uint64_t seed);

}  // namespace shardscope
