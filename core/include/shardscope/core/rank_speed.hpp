#pragma once
// GPUs of one SKU are not equally fast (power and thermal limits, binning): a GPU time factor per
// rank drawn around 1, the same for whoever draws them (simulate --gpu-sigma, run --gpu-sigma);
// and the other per-rank draws of a job's variation (variation_spec.hpp).

#include <cstdint>
#include <map>
#include <vector>

#include "shardscope/core/schedule.hpp"

namespace shardscope {

/// By rank: max(0.1, 1 + sigma·N(0, 1)), from one stream seeded by `seed` (rank order). Empty when
/// sigma is 0.
std::vector<double> gpu_speed_draws(int world_size, double sigma, std::uint64_t seed);

// What one rank draws per op, the same whoever draws (the simulator's per-rank replay, the host
// backend): streams seeded by (seed, rank), one draw per op in op order.

/// Each op's GPU time factor: max(0, 1 + jitter·N(0, 1)). Empty when jitter is 0.
std::vector<double> jitter_draws(double jitter, std::uint64_t seed, int rank, std::size_t ops);
/// Each op's issue delay: exponential with mean `mean` ns. Empty when the mean is 0.
std::vector<TimeNs> issue_delay_draws(TimeNs mean, std::uint64_t seed, int rank, std::size_t ops);

/// By communicator of `schedule`: how many times as long the bandwidth part of rank `rank`'s
/// collectives on it take, the slowest of `slow_links` (node → factor) among the nodes of its
/// instance where the instance spans several nodes (inside a node no network link is crossed).
/// Empty when no link is slow.
std::vector<double> link_time_factors(const Schedule& schedule,
                                      const std::map<int, double>& slow_links, int rank,
                                      int gpus_per_node);

}  // namespace shardscope
