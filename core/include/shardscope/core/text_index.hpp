#pragma once
// An open-addressing hash index of dense ids (0, 1, 2, …) by their text. The texts stay with the
// caller, who passes `text_of(id)`: no key copies and no nodes to allocate. Power-of-two slots,
// linear probing, never more than half full, so probes stay short. Interns labels
// (label_table.hpp) and finds configuration keys by path (ConfigReader).

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace shardscope {

class TextIndex {
 public:
  /// The id whose text is `text`, or -1.
  template <typename TextOf>
  std::int32_t find(std::string_view text, const TextOf& text_of) const {
    if (slots_.empty()) return -1;
    for (std::size_t h = first_slot(text);; h = next_slot(h)) {
      const std::int32_t id = slots_[h];
      if (id < 0 || text_of(id) == text) return id;
    }
  }

  /// Indexes `id`, the next id (0 to id − 1 are indexed already), whose text is not indexed yet.
  template <typename TextOf>
  void add(std::int32_t id, const TextOf& text_of) {
    if (2 * (static_cast<std::size_t>(id) + 1) > slots_.size()) {  // rebuild, twice the size
      slots_.assign(slots_.empty() ? kFirstSize : 2 * slots_.size(), -1);
      for (std::int32_t i = 0; i < id; ++i) place(i, text_of(i));
    }
    place(id, text_of(id));
  }

 private:
  static constexpr std::size_t kFirstSize = 64;

  std::size_t first_slot(std::string_view text) const {
    return std::hash<std::string_view>{}(text) & (slots_.size() - 1);
  }
  std::size_t next_slot(std::size_t h) const { return (h + 1) & (slots_.size() - 1); }
  void place(std::int32_t id, std::string_view text) {
    std::size_t h = first_slot(text);
    while (slots_[h] >= 0) h = next_slot(h);
    slots_[h] = id;
  }

  std::vector<std::int32_t> slots_;  // an id, or -1
};

}  // namespace shardscope
