#include "shardscope/core/rank_speed.hpp"

#include <algorithm>
#include <random>

#include "shardscope/core/communicator_layout.hpp"

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

std::vector<double> jitter_draws(double jitter, std::uint64_t seed, int rank, std::size_t ops) {
  if (jitter <= 0) return {};
  constexpr std::uint64_t kMix = 0x9E3779B97F4A7C15;
  std::mt19937_64 rng(seed * kMix + static_cast<std::uint64_t>(rank));
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> out(ops);
  for (double& f : out) f = std::max(0.0, 1.0 + jitter * noise(rng));
  return out;
}

std::vector<TimeNs> issue_delay_draws(TimeNs mean, std::uint64_t seed, int rank, std::size_t ops) {
  if (mean <= 0) return {};
  constexpr std::uint64_t kMix = 0xD6E8FEB86659FD93;  // a stream apart from the jitter draws
  std::mt19937_64 rng(seed * kMix + static_cast<std::uint64_t>(rank));
  std::exponential_distribution<double> away(1.0 / static_cast<double>(mean));
  std::vector<TimeNs> out(ops);
  for (TimeNs& t : out) t = static_cast<TimeNs>(std::llround(away(rng)));
  return out;
}

std::vector<double> link_time_factors(const Schedule& schedule,
                                      const std::map<int, double>& slow_links, int rank,
                                      int gpus_per_node) {
  if (slow_links.empty()) return {};
  std::vector<double> out;
  for (const Communicator& comm : schedule.communicators) {
    double f = 1.0;
    if (comm.nodes > 1) {
      const Membership me = membership(comm, schedule.world_size, rank);
      for (int p = 0; p < me.size; ++p) {
        const int node = rank_at(comm, schedule.world_size, me.instance, p) / gpus_per_node;
        if (const auto it = slow_links.find(node); it != slow_links.end())
          f = std::max(f, it->second);
      }
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace shardscope
