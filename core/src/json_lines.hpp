#pragma once
// The one-item-per-line JSON layout the schedule and timeline files share (private to core).

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

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

}  // namespace shardscope::detail
