#pragma once
// The caching-allocator model's free blocks of one pool, ordered as PyTorch's
// std::set<Block*, BlockComparatorSize>: by size, then address. best_fit(size) is the first block
// not smaller than `size` (PyTorch's pool.blocks.lower_bound).
//
// Segregated fit, as in TLSF: blocks sit in size classes (four per power of two of 512-byte units),
// each class a short sorted vector, and a bitmap of the non-empty classes finds the next class with
// a block in one instruction. Classes are ordered by size, so the first block of the next
// non-empty class is the overall successor: the answer is exactly the ordered set's, at a cost
// that does not grow with the number of free blocks. (A single sorted vector moved ~40 entries
// per insert and erase; a red-black tree cost more still.)

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope::sim {

class FreeBlockIndex {
 public:
  struct Entry {
    Bytes size;
    std::int64_t address;
    int block;
  };

  void insert(const Entry& e) {
    const int c = size_class(e.size);
    auto& list = classes_[static_cast<std::size_t>(c)];
    list.insert(lower_bound(list, e.size, e.address), e);
    set_bit(c);
  }

  void erase(Bytes size, std::int64_t address) {
    const int c = size_class(size);
    auto& list = classes_[static_cast<std::size_t>(c)];
    const auto it = lower_bound(list, size, address);
    if (it == list.end() || it->address != address) return;
    list.erase(it);
    if (list.empty()) clear_bit(c);
  }

  /// Where best_fit found its block, to erase it without searching again.
  struct Position {
    int size_class = -1;
    std::size_t index = 0;
    int block = -1;  // -1: no block fits
  };

  /// The smallest block of at least `size` bytes (lowest address among equals).
  Position best_fit(Bytes size) const {
    int c = size_class(size);
    const auto& list = classes_[static_cast<std::size_t>(c)];
    const auto it = lower_bound(list, size, -1);
    if (it != list.end()) return {c, static_cast<std::size_t>(it - list.begin()), it->block};
    c = next_class(c + 1);
    if (c < 0) return {};
    return {c, 0, classes_[static_cast<std::size_t>(c)].front().block};
  }

  void erase(const Position& at) {
    auto& list = classes_[static_cast<std::size_t>(at.size_class)];
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(at.index));
    if (list.empty()) clear_bit(at.size_class);
  }

 private:
  static constexpr int kClasses = 192;  // covers blocks below 2^57 bytes
  using List = std::vector<Entry>;

  static List::const_iterator lower_bound(const List& list, Bytes size, std::int64_t address) {
    auto first = list.begin();
    auto n = list.size();
    while (n > 0) {  // hand-written: the comparator inlines, and lists are short
      const auto half = n / 2;
      const auto mid = first + static_cast<std::ptrdiff_t>(half);
      if (mid->size < size || (mid->size == size && mid->address < address)) {
        first = mid + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return first;
  }
  static List::iterator lower_bound(List& list, Bytes size, std::int64_t address) {
    const auto it = lower_bound(static_cast<const List&>(list), size, address);
    return list.begin() + (it - list.cbegin());
  }

  // Four classes per power of two of 512-byte units; monotonic in size.
  static int size_class(Bytes size) {
    const auto units = static_cast<std::uint64_t>(size >> 9);
    if (units < 4) return static_cast<int>(units);
    const int e = static_cast<int>(std::bit_width(units)) - 1;
    return 4 * (e - 1) + static_cast<int>((units >> (e - 2)) & 3);
  }

  void set_bit(int c) { bits_[static_cast<std::size_t>(c) / 64] |= std::uint64_t{1} << (c % 64); }
  void clear_bit(int c) { bits_[static_cast<std::size_t>(c) / 64] &= ~(std::uint64_t{1} << (c % 64)); }

  int next_class(int from) const {
    for (int w = from / 64; w < kClasses / 64; ++w) {
      std::uint64_t word = bits_[static_cast<std::size_t>(w)];
      if (w == from / 64) word &= ~std::uint64_t{0} << (from % 64);
      if (word) return w * 64 + std::countr_zero(word);
    }
    return -1;
  }

  std::array<List, kClasses> classes_;
  std::array<std::uint64_t, kClasses / 64> bits_{};
};

}  // namespace shardscope::sim
