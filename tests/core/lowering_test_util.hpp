#pragma once
// Helpers for lowering tests: lower YAML text and read orders and counts in PyTorch's notation.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope::testing {

inline Schedule lower_text(const std::string& yaml,
                           const std::vector<std::string>& overrides = {}) {
  return lower(scenario_from_text(yaml, overrides));
}

/// "layers.2" → "2", "root" → "root", anything else unchanged.
inline std::string short_name(const std::string& group) {
  return group.rfind("layers.", 0) == 0 ? group.substr(7) : group;
}

/// The oracle notation of test_fully_shard_comm.py: U = all_gather, R = reshard, PB =
/// reduce_scatter.
inline std::vector<std::string> events(const Schedule& s, Phase phase, int iteration,
                                       const std::string& which = "U R PB", int microbatch = 0) {
  std::vector<std::string> out;
  for (const auto& op : s.ops) {
    if (op.phase != phase || op.iteration != iteration || op.microbatch != microbatch ||
        op.group == kNone)
      continue;
    std::string tag;
    if (op.kind == OpKind::all_gather) tag = "U";
    if (op.kind == OpKind::reshard) tag = "R";
    if (op.kind == OpKind::reduce_scatter) tag = "PB";
    if (tag.empty() || (" " + which + " ").find(" " + tag + " ") == std::string::npos) continue;
    const std::string name = short_name(s.groups[static_cast<std::size_t>(op.group)].name);
    out.push_back(name == "root" ? tag + " root" : tag + name);
  }
  return out;
}

/// The first op of `kind` whose label is `label` ("block", "head+loss", ...).
inline const Op& first_op(const Schedule& s, OpKind kind, std::string_view label) {
  for (const Op& op : s.ops) {
    if (op.kind == kind && op_label(s, op) == label) return op;
  }
  throw std::runtime_error("no " + std::string(label) + " op of that kind");
}

inline int count(const Schedule& s, OpKind kind, Phase phase, int iteration = 0,
                 int microbatch = -1) {
  int n = 0;
  for (const auto& op : s.ops) {
    n += op.kind == kind && op.phase == phase && op.iteration == iteration &&
         (microbatch < 0 || op.microbatch == microbatch);
  }
  return n;
}

/// The sizes of the activation buffers of the block groups ("layers.N"), in buffer order: what
/// each block's forward saves for backward, one buffer per block and micro-batch.
inline std::vector<Bytes> block_activation_buffers(const Schedule& s) {
  std::vector<Bytes> out;
  for (const Buffer& b : s.buffers) {
    if (b.category == BufferCategory::activations && b.group != kNone &&
        s.groups[static_cast<std::size_t>(b.group)].name.starts_with("layers."))
      out.push_back(b.size);
  }
  return out;
}

inline std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (!(c == ' ' && cur.empty())) {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace shardscope::testing
