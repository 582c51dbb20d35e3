#pragma once
// The caching-allocator model's free blocks, per pool. best_fit(pool, size) answers as PyTorch's
// std::set<Block*, BlockComparatorSize>::lower_bound does for that pool: the smallest block of at
// least `size` bytes, the lowest address among equals.
//
// Segregated fit, as in TLSF: blocks sit in size classes (four per power of two of 512-byte units)
// and a bitmap per pool of its non-empty classes finds the next class with a block in one
// instruction. Classes are ordered by size, so the answer lies in the request's class or is the
// smallest block of the next non-empty class. A class is an unordered doubly linked list threaded
// through one node table indexed by the caller's block id (a block is in at most one pool's list),
// so insert and erase are O(1), nothing moves, and nothing is allocated once the table has room for
// every block id; best_fit scans the one or two classes it needs, which hold a few blocks. Keeping
// each class sorted cost more: allocations and frees outnumber fits four to one. (A vector per
// class cost a heap allocation each time one grew; a node table per pool, with a spare list, cost
// a handle per block and a copy of each entry.)

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope {

class FreeBlockIndex {
 public:
  /// A new, empty pool; pools are numbered from 0 in the order they are added.
  int add_pool() {
    pools_.emplace_back();
    return static_cast<int>(pools_.size() - 1);
  }
  /// Room for block ids below `n` without growing the node table.
  void reserve(std::size_t n) { nodes_.reserve(n); }

  /// Lists block `block` (not listed now) in `pool` with its size and address.
  void insert(int pool, int block, Bytes size, std::int64_t address) {
    const auto b = static_cast<std::size_t>(block);
    if (b >= nodes_.size()) nodes_.resize(b + 1);
    Pool& p = pools_[static_cast<std::size_t>(pool)];
    const int c = size_class(size);
    int& head = p.head[static_cast<std::size_t>(c)];
    nodes_[b] = {size, address, -1, head, pool, c};
    if (head >= 0)
      nodes_[static_cast<std::size_t>(head)].prev = block;
    else
      p.set_bit(c);
    head = block;
  }

  bool listed(int block) const {
    const auto b = static_cast<std::size_t>(block);
    return b < nodes_.size() && nodes_[b].size_class >= 0;
  }

  /// Unlists block `block`, if listed.
  void erase(int block) {
    if (!listed(block)) return;
    Node& node = nodes_[static_cast<std::size_t>(block)];
    if (node.prev >= 0) {
      nodes_[static_cast<std::size_t>(node.prev)].next = node.next;
    } else {
      Pool& p = pools_[static_cast<std::size_t>(node.pool)];
      if ((p.head[static_cast<std::size_t>(node.size_class)] = node.next) < 0)
        p.clear_bit(node.size_class);
    }
    if (node.next >= 0) nodes_[static_cast<std::size_t>(node.next)].prev = node.prev;
    node.size_class = -1;
  }

  /// The block of `pool` with the smallest size of at least `size` bytes (lowest address among
  /// equals); -1 if none.
  int best_fit(int pool, Bytes size) const {
    const Pool& p = pools_[static_cast<std::size_t>(pool)];
    const int c = size_class(size);
    if (const int b = smallest(p, c, size); b >= 0) return b;
    const int next = p.next_class(c + 1);
    return next < 0 ? -1 : smallest(p, next, 0);
  }

 private:
  static constexpr int kClasses = 192;  // covers blocks below 2^57 bytes
  struct Node {
    Bytes size = 0;
    std::int64_t address = 0;
    int prev = -1;
    int next = -1;
    int pool = -1;
    int size_class = -1;  // -1: not listed
  };
  struct Pool {
    std::array<int, kClasses> head;  // first block of each class, -1 if empty
    std::array<std::uint64_t, kClasses / 64> bits{};
    Pool() { head.fill(-1); }

    void set_bit(int c) {
      bits[static_cast<unsigned>(c) / 64] |= std::uint64_t{1} << (static_cast<unsigned>(c) % 64);
    }
    void clear_bit(int c) {
      bits[static_cast<unsigned>(c) / 64] &= ~(std::uint64_t{1} << (static_cast<unsigned>(c) % 64));
    }
    int next_class(int from) const {
      for (int w = from / 64; w < kClasses / 64; ++w) {
        std::uint64_t word = bits[static_cast<std::size_t>(w)];
        if (w == from / 64) word &= ~std::uint64_t{0} << (from % 64);
        if (word) return w * 64 + std::countr_zero(word);
      }
      return -1;
    }
  };

  // The block of least (size, address) in class `c` among those of at least `size` bytes; -1 if
  // none.
  int smallest(const Pool& p, int c, Bytes size) const {
    int best = -1;
    const Node* bn = nullptr;
    for (int n = p.head[static_cast<std::size_t>(c)]; n >= 0;) {
      const Node& e = nodes_[static_cast<std::size_t>(n)];
      if (e.size >= size &&
          (!bn || e.size < bn->size || (e.size == bn->size && e.address < bn->address))) {
        best = n;
        bn = &e;
      }
      n = e.next;
    }
    return best;
  }

  // Four classes per power of two of 512-byte units; monotonic in size.
  static int size_class(Bytes size) {
    const auto units = static_cast<std::uint64_t>(size >> 9);
    if (units < 4) return static_cast<int>(units);
    const auto e = static_cast<unsigned>(std::bit_width(units)) - 1;
    return static_cast<int>(4U * (e - 1) + static_cast<unsigned>((units >> (e - 2)) & 3));
  }

  std::vector<Node> nodes_;  // by block id
  std::vector<Pool> pools_;
};

}  // namespace shardscope
