#pragma once
// How the ranks of one job differ (scenario keys variation.*, docs/scenario.md): GPU speed,
// per-op GPU jitter, the CPU thread's issue delays and slow network links. A scenario without them
// is symmetric: every rank is the one rank the simulator replays.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "shardscope/core/units.hpp"

namespace shardscope {

struct VariationSpec {
  // Each rank's GPU time × max(0.1, 1 + gpu_sigma·N(0, 1)), drawn once per rank
  // (gpu_speed_draws): GPUs of one SKU differ by a few percent under power and thermal limits.
  double gpu_sigma = 0.0;
  std::map<int, double> slow_ranks;  // rank → its GPU ops take this × their time
  std::map<int, double> slow_nodes;  // node → every GPU of it so (a rank named alone wins)
  // node → its network links move bytes this × as long: a collective across nodes that include it
  // runs its bandwidth-bound part at the slowest link's pace (a ring is as fast as its slowest
  // link); its latency and collectives inside a node are unchanged.
  std::map<int, double> slow_links;
  double jitter = 0.0;  // each GPU op of each rank × max(0, 1 + jitter·N(0, 1))
  // Mean time the CPU thread is away after issuing each op, exponentially distributed (the Python
  // thread descheduled now and then: most gaps short, a few long). It delays what the CPU issues
  // next.
  TimeNs issue_delay = 0;
  std::uint64_t seed = 1;  // every draw above

  /// Whether any rank differs from another (the per-rank replay has something to do).
  bool any() const {
    return gpu_sigma > 0 || !slow_ranks.empty() || !slow_nodes.empty() || !slow_links.empty() ||
           jitter > 0 || issue_delay > 0;
  }
};

/// "3:1.5" → {3, 1.5}; nullopt unless INDEX is a whole number ≥ 0 and FACTOR a number in (0, 100].
std::optional<std::pair<int, double>> parse_factor_item(std::string_view item);

/// "3:1.5, 7:1.2" (items separated by commas or spaces) → {3: 1.5, 7: 1.2}, a later item winning;
/// "none" and "" → {}; the malformed items in `bad`.
std::map<int, double> parse_factor_list(std::string_view text, std::string* bad = nullptr);

/// "3:1.5, 7:1.2": a factor list as the scenario file spells it.
std::string factor_list_text(const std::map<int, double>& factors);

/// Every rank's GPU time factor that is not 1: slow_nodes (gpus_per_node ranks each), then
/// slow_ranks (winning over their node), each times its gpu_sigma draw. Ranks and nodes outside
/// the world are ignored (the scenario reader refuses them).
std::map<int, double> gpu_time_factors(const VariationSpec& v, int world_size, int gpus_per_node);

}  // namespace shardscope
