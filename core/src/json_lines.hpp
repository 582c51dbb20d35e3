#pragma once
// What the schedule, timeline and config readers and writers share (private to core): the
// one-item-per-line array layout, and parsing with errors that name the file.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/error.hpp"

namespace shardscope::detail {

/// Appends `  "key": [\n    item,\n    item\n  ]` (+ "," unless last); `to_json(item, index)`.
template <typename T, typename F>
void emit_json_array(std::string& out, std::string_view key, const std::vector<T>& items, F to_json, bool last) {
  out += fmt::format("  \"{}\": [", key);
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += to_json(items[i], i).dump();
  }
  out += items.empty() ? "]" : "\n  ]";
  out += last ? "\n" : ",\n";
}

/// Parses JSON; a syntax error becomes a ValidationError naming `origin`.
inline nlohmann::json parse_json(std::string_view text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ValidationError({Problem{origin, "", fmt::format("invalid JSON: {}", e.what()), ""}});
  }
}

}  // namespace shardscope::detail
