#pragma once
// The caching-allocator model's free blocks of one pool. best_fit(size) answers as PyTorch's
// std::set<Block*, BlockComparatorSize>::lower_bound does: the smallest block of at least `size`
// bytes, the lowest address among equals.
//
// Segregated fit, as in TLSF: blocks sit in size classes (four per power of two of 512-byte units)
// and a bitmap of the non-empty classes finds the next class with a block in one instruction.
// Classes are ordered by size, so the answer lies in the request's class or is the smallest block
// of the next non-empty class. A class is an unordered doubly linked list of entries in one node
// table per pool (nodes of erased entries are reused), so insert and erase are O(1), nothing moves,
// and a pool allocates only when its table grows; best_fit scans the one or two classes it needs,
// which hold a dozen blocks or so. Keeping each class sorted cost more: allocations and frees
// outnumber fits four to one. (A vector per class cost a heap allocation each time one grew.)

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
  /// Where an entry sits: valid until that entry is erased. -1: none.
  using Handle = int;

  FreeBlockIndex() { head_.fill(-1); }

  Handle insert(const Entry& e) {
    const int c = size_class(e.size);
    int n = spare_;
    if (n >= 0) {
      spare_ = nodes_[static_cast<std::size_t>(n)].next;
    } else {
      n = static_cast<int>(nodes_.size());
      nodes_.emplace_back();
    }
    int& head = head_[static_cast<std::size_t>(c)];
    nodes_[static_cast<std::size_t>(n)] = {e, -1, head, c};
    if (head >= 0) nodes_[static_cast<std::size_t>(head)].prev = n;
    else set_bit(c);
    head = n;
    return n;
  }

  void erase(Handle n) {
    Node& node = nodes_[static_cast<std::size_t>(n)];
    if (node.prev >= 0) nodes_[static_cast<std::size_t>(node.prev)].next = node.next;
    else if ((head_[static_cast<std::size_t>(node.size_class)] = node.next) < 0) clear_bit(node.size_class);
    if (node.next >= 0) nodes_[static_cast<std::size_t>(node.next)].prev = node.prev;
    node.next = spare_;
    spare_ = n;
  }

  /// The smallest block of at least `size` bytes (lowest address among equals); -1 if none.
  int best_fit(Bytes size) const {
    const int c = size_class(size);
    if (const int b = smallest(c, size); b >= 0) return b;
    const int next = next_class(c + 1);
    return next < 0 ? -1 : smallest(next, 0);
  }

 private:
  static constexpr int kClasses = 192;  // covers blocks below 2^57 bytes
  struct Node {
    Entry entry;
    int prev;
    int next;  // in its class, or in the spare list once erased
    int size_class;
  };

  // The block of least (size, address) in class `c` among those of at least `size` bytes; -1 if none.
  int smallest(int c, Bytes size) const {
    const Entry* best = nullptr;
    for (int n = head_[static_cast<std::size_t>(c)]; n >= 0; n = nodes_[static_cast<std::size_t>(n)].next) {
      const Entry& e = nodes_[static_cast<std::size_t>(n)].entry;
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

  std::vector<Node> nodes_;
  int spare_ = -1;                        // erased nodes, linked through `next`
  std::array<int, kClasses> head_;        // first node of each class, -1 if empty
  std::array<std::uint64_t, kClasses / 64> bits_{};
};

}  // namespace shardscope::sim
