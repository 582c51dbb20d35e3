#pragma once
// Interns label texts into one of the schedule's label lists (Schedule::buffer_labels,
// Schedule::op_labels), for lowering and for reading a schedule back: the same few dozen texts
// come thousands of times. A small cache by the address of the text (string literals, mostly)
// answers before any hashing; the text is compared too, so any string is safe to pass. Behind it,
// a TextIndex of the list itself.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/text_index.hpp"

namespace shardscope {

class LabelTable {
 public:
  /// The index of `text` in `texts`, appended when new. `texts` must only grow through this table.
  std::int32_t id(std::vector<std::string>& texts, std::string_view text) {
    auto& hit = recent_[(reinterpret_cast<std::uintptr_t>(text.data()) >> 3) % recent_.size()];
    if (hit.id >= 0 && hit.data == text.data() && texts[static_cast<std::size_t>(hit.id)] == text)
      return hit.id;
    hit = {text.data(), lookup(texts, text)};
    return hit.id;
  }

 private:
  // Kept out of line so that the cache hit above, nearly every call, inlines small.
  [[gnu::noinline]] std::int32_t lookup(std::vector<std::string>& texts, std::string_view text) {
    const auto text_of = [&](std::int32_t id) -> std::string_view {
      return texts[static_cast<std::size_t>(id)];
    };
    if (const std::int32_t id = index_.find(text, text_of); id >= 0) return id;
    if (texts.empty())
      texts.reserve(
          32);  // a schedule has a few dozen labels: grow the list once or twice, not five times
    const auto id = static_cast<std::int32_t>(texts.size());
    texts.emplace_back(text);
    index_.add(id, text_of);
    return id;
  }

  TextIndex index_;  // into the list itself
  struct Recent {
    const char* data = nullptr;
    std::int32_t id = -1;
  };
  std::array<Recent, 64> recent_{};
};

}  // namespace shardscope
