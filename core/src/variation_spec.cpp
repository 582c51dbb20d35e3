#include "shardscope/core/variation_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "shardscope/core/rank_speed.hpp"

namespace shardscope {

std::optional<std::pair<int, double>> parse_factor_item(std::string_view item) {
  const auto colon = item.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  int index = -1;
  double factor = 0;
  const char* const begin = item.data();
  const char* const end = item.data() + item.size();
  const auto [i_end, i_ec] = std::from_chars(begin, begin + colon, index);
  const auto [f_end, f_ec] = std::from_chars(begin + colon + 1, end, factor);
  if (i_ec != std::errc() || i_end != begin + colon || f_ec != std::errc() || f_end != end ||
      index < 0 || !(factor > 0 && factor <= 100))
    return std::nullopt;
  return std::pair{index, factor};
}

std::map<int, double> parse_factor_list(std::string_view text, std::string* bad) {
  std::map<int, double> out;
  if (text == "none") return out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || text[i] == ' ') {
      ++i;
      continue;
    }
    const std::size_t j = std::min(text.find_first_of(", ", i), text.size());
    const std::string_view item = text.substr(i, j - i);
    if (const auto parsed = parse_factor_item(item)) {
      out[parsed->first] = parsed->second;
    } else if (bad != nullptr) {
      *bad += fmt::format("{}{}", bad->empty() ? "" : ", ", item);
    }
    i = j;
  }
  return out;
}

std::string factor_list_text(const std::map<int, double>& factors) {
  std::string out;
  for (const auto& [index, factor] : factors)
    out += fmt::format("{}{}:{:g}", out.empty() ? "" : ", ", index, factor);
  return out;
}

std::map<int, double> gpu_time_factors(const VariationSpec& v, int world_size, int gpus_per_node) {
  std::map<int, double> named;
  for (const auto& [node, factor] : v.slow_nodes) {
    for (int r = node * gpus_per_node; r < std::min(world_size, (node + 1) * gpus_per_node); ++r)
      named[r] = factor;
  }
  for (const auto& [rank, factor] : v.slow_ranks)
    if (rank < world_size) named[rank] = factor;
  const std::vector<double> draws = gpu_speed_draws(world_size, v.gpu_sigma, v.seed);
  for (int r = 0; r < static_cast<int>(draws.size()); ++r) {
    const auto it = named.find(r);
    named[r] = draws[static_cast<std::size_t>(r)] * (it == named.end() ? 1.0 : it->second);
  }
  return named;
}

}  // namespace shardscope
