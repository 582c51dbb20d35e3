// --slow-rank R:F (run, simulate) and --slow-node N:F (simulate): which ranks are slower.
#include <fmt/format.h>

#include <charconv>

#include "commands.hpp"
#include "shardscope/core/rank_speed.hpp"

namespace shardscope::cli {
namespace {

// "INDEX:FACTOR" items of one flag; every malformed item is reported, then all at once.
std::map<int, double> parse_factors(const std::vector<std::string>& items, const char* flag,
                                    const char* what) {
  std::map<int, double> out;
  std::vector<Problem> problems;
  for (const auto& item : items) {
    const auto colon = item.find(':');
    int index = -1;
    double factor = 0;
    bool ok = colon != std::string::npos;
    if (ok) {
      const auto [i_end, i_ec] = std::from_chars(item.data(), item.data() + colon, index);
      const auto [f_end, f_ec] =
          std::from_chars(item.data() + colon + 1, item.data() + item.size(), factor);
      ok = i_ec == std::errc() && i_end == item.data() + colon && f_ec == std::errc() &&
           f_end == item.data() + item.size() && index >= 0 && factor > 0 && factor <= 100;
    }
    if (!ok) {
      problems.push_back({flag, item, fmt::format("is not {}:FACTOR", what),
                          fmt::format("e.g. 3:1.5 ({} 3 runs 1.5× as long; factor in (0, 100])",
                                      what == std::string("RANK") ? "rank" : "node")});
      continue;
    }
    out[index] = factor;
  }
  throw_if_any(std::move(problems));
  return out;
}

}  // namespace

std::map<int, double> parse_slow_ranks(const std::vector<std::string>& items) {
  return parse_factors(items, "--slow-rank", "RANK");
}

std::map<int, double> slow_ranks_of(const std::vector<std::string>& ranks,
                                    const std::vector<std::string>& nodes, int world_size,
                                    int gpus_per_node) {
  const auto by_rank = parse_slow_ranks(ranks);
  const auto by_node = parse_factors(nodes, "--slow-node", "NODE");
  std::vector<Problem> problems;
  std::map<int, double> out;
  const int node_count = (world_size + gpus_per_node - 1) / gpus_per_node;
  for (const auto& [node, factor] : by_node) {
    if (node >= node_count) {
      problems.push_back({"--slow-node", fmt::format("{}:{}", node, factor),
                          fmt::format("node {} is not in the cluster", node),
                          fmt::format("0..{}", node_count - 1)});
      continue;
    }
    for (int r = node * gpus_per_node; r < std::min(world_size, (node + 1) * gpus_per_node); ++r)
      out[r] = factor;
  }
  for (const auto& [rank, factor] : by_rank) {  // a rank named alone wins over its node
    if (rank >= world_size) {
      problems.push_back({"--slow-rank", fmt::format("{}:{}", rank, factor),
                          fmt::format("rank {} is not in the world", rank),
                          fmt::format("0..{}", world_size - 1)});
      continue;
    }
    out[rank] = factor;
  }
  throw_if_any(std::move(problems));
  return out;
}

std::map<int, double> with_gpu_sigma(std::map<int, double> named, int world_size, double sigma,
                                     std::uint64_t seed) {
  const std::vector<double> draws = gpu_speed_draws(world_size, sigma, seed);
  for (int r = 0; r < static_cast<int>(draws.size()); ++r) {
    const auto it = named.find(r);
    named[r] = draws[static_cast<std::size_t>(r)] * (it == named.end() ? 1.0 : it->second);
  }
  return named;
}

}  // namespace shardscope::cli
