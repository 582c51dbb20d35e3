#pragma once
// Interns label texts into one of the schedule's label lists (Schedule::buffer_labels,
// Schedule::op_labels), for lowering and for reading a schedule back: the same few dozen texts
// come thousands of times. A small cache
// by the address of the text (string literals, mostly) answers before any hashing; the text is
// compared too, so any string is safe to pass.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shardscope {

class LabelTable {
 public:
  /// The index of `text` in `texts`, appended when new. `texts` must only grow through this table.
  std::int32_t id(std::vector<std::string>& texts, std::string_view text) {
    auto& hit = recent_[(reinterpret_cast<std::uintptr_t>(text.data()) >> 3) % recent_.size()];
    if (hit.id >= 0 && hit.data == text.data() && texts[static_cast<std::size_t>(hit.id)] == text) return hit.id;
    std::int32_t id;
    if (const auto it = ids_.find(text); it != ids_.end()) {
      id = it->second;
    } else {
      id = static_cast<std::int32_t>(texts.size());
      texts.emplace_back(text);
      ids_.emplace(std::string(text), id);
    }
    hit = {text.data(), id};
    return id;
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  std::unordered_map<std::string, std::int32_t, Hash, std::equal_to<>> ids_;
  struct Recent {
    const char* data = nullptr;
    std::int32_t id = -1;
  };
  std::array<Recent, 32> recent_{};
};

}  // namespace shardscope
