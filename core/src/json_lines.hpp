#pragma once
// What the schedule, timeline and config readers and writers share (private to core): the
// one-item-per-line array layout, how streams, communicators and an op's placement are written,
// and parsing with errors that name the file.

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope::detail {

/// Appends `  "key": [\n    item,\n    item\n  ]` (+ "," unless last); `to_json(item, index)`.
template <typename T, typename F>
void emit_json_array(std::string& out, std::string_view key, const std::vector<T>& items, F to_json,
                     bool last) {
  out += fmt::format("  \"{}\": [", key);
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += to_json(items[i], i).dump();
  }
  out += items.empty() ? "]" : "\n  ]";
  out += last ? "\n" : ",\n";
}

// The unused index lets emit_json_array take these as they are.
inline nlohmann::ordered_json stream_json(const Stream& s, std::size_t = 0) {
  return nlohmann::ordered_json{{"name", s.name}, {"kind", to_string(s.kind)}};
}

inline nlohmann::ordered_json communicator_json(const Communicator& c, std::size_t = 0) {
  return nlohmann::ordered_json{{"name", c.name}, {"size", c.size}, {"nodes", c.nodes}};
}

/// Writes where an op runs and how much it moves, under the names the schedule and timeline
/// formats share; `op` is an Op or a TimelineOp.
template <typename OpLike>
void put_op_placement(nlohmann::ordered_json& j, const OpLike& op) {
  j["kind"] = to_string(op.kind);
  j["stream"] = op.stream;
  j["group"] = op.group;
  j["phase"] = to_string(op.phase);
  j["iteration"] = op.iteration;
  j["microbatch"] = op.microbatch;
  j["comm"] = op.comm;
  j["bytes"] = op.bytes;
}

/// Parses JSON; a syntax error becomes a ValidationError naming `origin`.
inline nlohmann::json parse_json(std::string_view text, const std::string& origin) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw ValidationError({Problem{origin, "", fmt::format("invalid JSON: {}", e.what()), ""}});
  }
}

}  // namespace shardscope::detail
