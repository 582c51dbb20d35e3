#pragma once
// The caching-allocator model's free blocks of one pool. best_fit(size) answers as PyTorch's
// std::set<Block*, BlockComparatorSize>::lower_bound does: the smallest block of at least `size`
// bytes, the lowest address among equals.
//
// Segregated fit, as in TLSF: blocks sit in size classes (four per power of two of 512-byte units)
// and a bitmap of the non-empty classes finds the next class with a block in one instruction.
// Classes are ordered by size, so the answer lies in the request's class or is the smallest block
// of the next non-empty class. Within a class blocks are not kept in order: insert appends, erase
// moves the last entry into the hole (the caller keeps each block's slot), and best_fit scans the
// one or two classes it needs, which hold a dozen blocks or so. Keeping each class sorted cost
// more: allocations and frees outnumber fits four to one.

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
  /// Where an entry sits; valid until the entry is erased or another entry moves into it.
  struct Slot {
    int size_class = -1;  // -1: not listed
    std::uint32_t index = 0;
  };

  Slot insert(const Entry& e) {
    const int c = size_class(e.size);
    auto& list = classes_[static_cast<std::size_t>(c)];
    list.push_back(e);
    set_bit(c);
    return {c, static_cast<std::uint32_t>(list.size() - 1)};
  }

  /// Removes the entry at `slot`. Returns the block whose entry moved into `slot` (its slot is now
  /// `slot`), or -1 when none moved.
  int erase(Slot slot) {
    auto& list = classes_[static_cast<std::size_t>(slot.size_class)];
    int moved = -1;
    if (slot.index + 1 < list.size()) {
      list[slot.index] = list.back();
      moved = list[slot.index].block;
    }
    list.pop_back();
    if (list.empty()) clear_bit(slot.size_class);
    return moved;
  }

  /// The smallest block of at least `size` bytes (lowest address among equals); -1 if none.
  int best_fit(Bytes size) const {
    const int c = size_class(size);
    if (const int b = smallest(classes_[static_cast<std::size_t>(c)], size); b >= 0) return b;
    const int next = next_class(c + 1);
    return next < 0 ? -1 : smallest(classes_[static_cast<std::size_t>(next)], 0);
  }

 private:
  static constexpr int kClasses = 192;  // covers blocks below 2^57 bytes
  using List = std::vector<Entry>;

  // The block of least (size, address) among those of at least `size` bytes; -1 if none.
  static int smallest(const List& list, Bytes size) {
    const Entry* best = nullptr;
    for (const Entry& e : list) {
      if (e.size < size) continue;
      if (!best || e.size < best->size || (e.size == best->size && e.address < best->address)) best = &e;
    }
    return best ? best->block : -1;
  }

  // Four classes per power of two of 512-byte units; monotonic in size.
  static int size_class(Bytes size) {
    const auto units = static_cast<std::uint64_t>(size >> 9);
    if (units < 4) return static_cast<int>(units);
    const auto e = static_cast<unsigned>(std::bit_width(units)) - 1;
    return static_cast<int>(4 * (e - 1) + ((units >> (e - 2)) & 3));
  }

  void set_bit(int c) { bits_[static_cast<unsigned>(c) / 64] |= std::uint64_t{1} << (static_cast<unsigned>(c) % 64); }
  void clear_bit(int c) { bits_[static_cast<unsigned>(c) / 64] &= ~(std::uint64_t{1} << (static_cast<unsigned>(c) % 64)); }

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
