// How ranks differ, from the command line (simulate, run): --slow-rank, --slow-node, --slow-link,
// --jitter, --issue-delay, --gpu-sigma and --seed on top of the scenario's variation.* keys.
#include <fmt/format.h>

#include "commands.hpp"

namespace shardscope::cli {
namespace {

// "INDEX:FACTOR" items of one flag; every malformed item is reported, then all at once.
std::map<int, double> parse_factors(const std::vector<std::string>& items, const char* flag,
                                    const char* what) {
  std::map<int, double> out;
  std::vector<Problem> problems;
  for (const auto& item : items) {
    if (const auto parsed = parse_factor_item(item)) {
      out[parsed->first] = parsed->second;
      continue;
    }
    problems.push_back({flag, item, fmt::format("is not {}:FACTOR", what),
                        fmt::format("e.g. 3:1.5 ({} 3 takes 1.5× as long; factor in (0, 100])",
                                    what == std::string("RANK") ? "rank" : "node")});
  }
  throw_if_any(std::move(problems));
  return out;
}

// Items of a flag whose index is not below `count`.
void check_in_world(const std::map<int, double>& factors, const char* flag, const char* what,
                    int count, std::vector<Problem>& problems) {
  for (const auto& [index, factor] : factors) {
    if (index < count) continue;
    problems.push_back({flag, fmt::format("{}:{:g}", index, factor),
                        fmt::format("{} {} is not in the {}", what, index,
                                    what == std::string("rank") ? "world" : "cluster"),
                        fmt::format("0..{}", count - 1)});
  }
}

struct ParsedFlags {
  std::map<int, double> ranks, nodes, links;
  std::optional<TimeNs> issue_delay;
};

ParsedFlags parse_flags(const VariationArgs& args) {
  ParsedFlags p;
  std::vector<Problem> problems;
  const auto collect = [&](auto parse) {
    try {
      parse();
    } catch (const ValidationError& e) {
      problems.insert(problems.end(), e.problems().begin(), e.problems().end());
    }
  };
  collect([&] { p.ranks = parse_factors(args.slow_ranks, "--slow-rank", "RANK"); });
  collect([&] { p.nodes = parse_factors(args.slow_nodes, "--slow-node", "NODE"); });
  collect([&] { p.links = parse_factors(args.slow_links, "--slow-link", "NODE"); });
  if (!args.issue_delay.empty()) {
    p.issue_delay = parse_duration(args.issue_delay);
    if (!p.issue_delay || *p.issue_delay < 0 || *p.issue_delay > kNsPerS) {
      problems.push_back(
          {"--issue-delay", args.issue_delay, "is not a duration in [0, 1 s]", "e.g. 20us, 1.5ms"});
    }
  }
  throw_if_any(std::move(problems));
  return p;
}

}  // namespace

void check_variation_args(const VariationArgs& args) {
  parse_flags(args);
}

VariationSpec variation_of(const Scenario& scenario, const VariationArgs& args) {
  const ParsedFlags p = parse_flags(args);
  const int world = scenario.cluster.world_size(), nodes = scenario.cluster.nodes;
  std::vector<Problem> problems;
  check_in_world(p.ranks, "--slow-rank", "rank", world, problems);
  check_in_world(p.nodes, "--slow-node", "node", nodes, problems);
  check_in_world(p.links, "--slow-link", "node", nodes, problems);
  throw_if_any(std::move(problems));
  VariationSpec v = scenario.variation;
  for (const auto& [rank, f] : p.ranks) v.slow_ranks[rank] = f;
  for (const auto& [node, f] : p.nodes) v.slow_nodes[node] = f;
  for (const auto& [node, f] : p.links) v.slow_links[node] = f;
  if (args.jitter) v.jitter = *args.jitter;
  if (args.gpu_sigma) v.gpu_sigma = *args.gpu_sigma;
  if (p.issue_delay) v.issue_delay = *p.issue_delay;
  if (args.seed) v.seed = *args.seed;
  return v;
}

}  // namespace shardscope::cli
