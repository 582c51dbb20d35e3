#include "shardscope/core/rank_speed.hpp"

#include <algorithm>
#include <random>

namespace shardscope {

std::vector<double> gpu_speed_draws(int world_size, double sigma, std::uint64_t seed) {
  if (sigma <= 0) return {};
  // A stream of its own: not the per-rank jitter streams (seed·kMix + rank).
  std::mt19937_64 rng(seed ^ 0xC2B2AE3D27D4EB4FULL);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> out(static_cast<std::size_t>(std::max(world_size, 0)));
  for (double& f : out) f = std::max(0.1, 1.0 + sigma * noise(rng));
  return out;
}

}  // namespace shardscope
