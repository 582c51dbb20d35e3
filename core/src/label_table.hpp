#pragma once
// Interns label texts into one of the schedule's label lists (Schedule::buffer_labels,
// Schedule::op_labels), for lowering and for reading a schedule back: the same few dozen texts
// come thousands of times. A small cache by the address of the text (string literals, mostly)
// answers before any hashing; the text is compared too, so any string is safe to pass. Behind it,
// an open-addressing table of indices into the list itself: no key copies and no nodes to allocate.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

class LabelTable {
 public:
  /// The index of `text` in `texts`, appended when new. `texts` must only grow through this table.
  std::int32_t id(std::vector<std::string>& texts, std::string_view text) {
    auto& hit = recent_[(reinterpret_cast<std::uintptr_t>(text.data()) >> 3) % recent_.size()];
    if (hit.id >= 0 && hit.data == text.data() && texts[static_cast<std::size_t>(hit.id)] == text) return hit.id;
    hit = {text.data(), lookup(texts, text)};
    return hit.id;
  }

 private:
  // Kept out of line so that the cache hit above, nearly every call, inlines small.
  [[gnu::noinline]] std::int32_t lookup(std::vector<std::string>& texts, std::string_view text) {
    if (slots_.empty()) {
      slots_.assign(64, -1);
      texts.reserve(32);  // a schedule has a few dozen labels: grow the list once or twice, not five times
    }
    for (std::size_t h = std::hash<std::string_view>{}(text) & (slots_.size() - 1);; h = (h + 1) & (slots_.size() - 1)) {
      const std::int32_t slot = slots_[h];
      if (slot < 0) {
        const auto id = static_cast<std::int32_t>(texts.size());
        texts.emplace_back(text);
        slots_[h] = id;
        if (2 * texts.size() > slots_.size()) rehash(texts);  // at most half full: probes stay short
        return id;
      }
      if (texts[static_cast<std::size_t>(slot)] == text) return slot;
    }
  }

  void rehash(const std::vector<std::string>& texts) {
    slots_.assign(slots_.size() * 2, -1);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      std::size_t h = std::hash<std::string_view>{}(texts[i]) & (slots_.size() - 1);
      while (slots_[h] >= 0) h = (h + 1) & (slots_.size() - 1);
      slots_[h] = static_cast<std::int32_t>(i);
    }
  }

  std::vector<std::int32_t> slots_;  // power-of-two size; an index into texts, or -1
  struct Recent {
    const char* data = nullptr;
    std::int32_t id = -1;
  };
  std::array<Recent, 64> recent_{};
};

}  // namespace shardscope
