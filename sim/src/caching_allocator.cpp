#include "shardscope/sim/caching_allocator.hpp"

#include <algorithm>

namespace shardscope::sim {
namespace {
constexpr Bytes kMinBlockSize = 512;
constexpr Bytes kSmallSize = 1 * kMiB;
constexpr Bytes kSmallBuffer = 2 * kMiB;
constexpr Bytes kLargeBuffer = 20 * kMiB;
constexpr Bytes kMinLargeAlloc = 10 * kMiB;
constexpr Bytes kRoundLarge = 2 * kMiB;
constexpr Bytes kPage = 2 * kMiB;

Bytes round_up(Bytes value, Bytes multiple) { return (value + multiple - 1) / multiple * multiple; }
}  // namespace

CachingAllocator::CachingAllocator(Bytes capacity, AllocatorParams params) : capacity_(capacity), params_(params) {}

Bytes CachingAllocator::round_size(Bytes size) { return size < kMinBlockSize ? kMinBlockSize : round_up(size, kMinBlockSize); }

Bytes CachingAllocator::segment_size(Bytes rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

int CachingAllocator::pool_of(StreamId stream, bool small) {
  auto [it, inserted] = pools_.try_emplace({stream, small}, static_cast<int>(free_.size()));
  if (inserted) {
    free_.emplace_back();
    pool_small_.push_back(small);
    expandable_segment_.push_back(-1);
  }
  return it->second;
}

void CachingAllocator::insert_free(int b) {
  const Block& blk = blocks_[static_cast<std::size_t>(b)];
  auto& list = free_[static_cast<std::size_t>(segments_[static_cast<std::size_t>(blk.segment)].pool)];
  const FreeKey key{blk.size, blk.segment, blk.offset, b};
  list.insert(std::lower_bound(list.begin(), list.end(), key), key);
}

void CachingAllocator::erase_free(int b) {
  const Block& blk = blocks_[static_cast<std::size_t>(b)];
  auto& list = free_[static_cast<std::size_t>(segments_[static_cast<std::size_t>(blk.segment)].pool)];
  const FreeKey key{blk.size, blk.segment, blk.offset, b};
  const auto it = std::lower_bound(list.begin(), list.end(), key);
  if (it != list.end() && *it == key) list.erase(it);
}

int CachingAllocator::find_free(int pool, Bytes size) const {
  const auto& list = free_[static_cast<std::size_t>(pool)];
  const auto it = std::lower_bound(list.begin(), list.end(), FreeKey{size, -1, -1, -1});
  return it == list.end() ? -1 : std::get<3>(*it);
}

// Marks `b` allocated with `size`, splitting off the rest when PyTorch would.
int CachingAllocator::take(int b, Bytes size) {
  erase_free(b);
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  const Bytes rest = blk.size - size;
  const bool small = pool_small_[static_cast<std::size_t>(segments_[static_cast<std::size_t>(blk.segment)].pool)];
  if ((small && rest >= kMinBlockSize) || (!small && rest > kSmallSize)) {
    Block tail;
    tail.offset = blk.offset + size;
    tail.size = rest;
    tail.segment = blk.segment;
    tail.prev = b;
    tail.next = blk.next;
    blocks_.push_back(tail);
    const int t = static_cast<int>(blocks_.size() - 1);
    Block& head = blocks_[static_cast<std::size_t>(b)];  // re-fetch: push_back may reallocate
    if (head.next >= 0) blocks_[static_cast<std::size_t>(head.next)].prev = t;
    head.next = t;
    head.size = size;
    insert_free(t);
  }
  blocks_[static_cast<std::size_t>(b)].allocated = true;
  return b;
}

int CachingAllocator::new_segment(int pool, Bytes size) {
  segments_.push_back({pool, size, true});
  Block blk;
  blk.size = size;
  blk.segment = static_cast<int>(segments_.size() - 1);
  blocks_.push_back(blk);
  reserved_ += size;
  ++live_segments_;
  const int b = static_cast<int>(blocks_.size() - 1);
  insert_free(b);
  return b;
}

bool CachingAllocator::grow_expandable(int pool, Bytes size, int& block_out) {
  int& seg = expandable_segment_[static_cast<std::size_t>(pool)];
  if (seg < 0) {
    const Bytes grow = round_up(size, kPage);
    if (reserved_ + grow > capacity_) return false;
    block_out = new_segment(pool, grow);
    seg = blocks_[static_cast<std::size_t>(block_out)].segment;
    return true;
  }
  // Extend at the end, reusing a trailing free block.
  int last = -1;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.segment == seg && b.next < 0 && b.size > 0) last = static_cast<int>(i);
  }
  Block& tail = blocks_[static_cast<std::size_t>(last)];
  const Bytes have = tail.allocated ? 0 : tail.size;
  const Bytes grow = round_up(size - have, kPage);
  if (reserved_ + grow > capacity_) return false;
  reserved_ += grow;
  segments_[static_cast<std::size_t>(seg)].size += grow;
  if (!tail.allocated) {
    erase_free(last);
    blocks_[static_cast<std::size_t>(last)].size += grow;
    insert_free(last);
    block_out = last;
  } else {
    Block blk;
    blk.offset = tail.offset + tail.size;
    blk.size = grow;
    blk.segment = seg;
    blk.prev = last;
    blocks_.push_back(blk);
    const int b = static_cast<int>(blocks_.size() - 1);
    blocks_[static_cast<std::size_t>(last)].next = b;
    insert_free(b);
    block_out = b;
  }
  return true;
}

void CachingAllocator::release_cached() {
  // A segment is releasable when it is a single free block: one pass over the blocks.
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    if (b.size == 0 || b.allocated || b.prev >= 0 || b.next >= 0) continue;
    Segment& seg = segments_[static_cast<std::size_t>(b.segment)];
    if (!seg.live) continue;
    erase_free(static_cast<int>(i));
    b.size = 0;
    seg.live = false;
    reserved_ -= seg.size;
    --live_segments_;
    if (expandable_segment_[static_cast<std::size_t>(seg.pool)] == b.segment) expandable_segment_[static_cast<std::size_t>(seg.pool)] = -1;
  }
}

bool CachingAllocator::allocate(BufferId id, Bytes size, StreamId stream) {
  const Bytes rounded = round_size(size);
  const bool small = rounded <= kSmallSize;
  const int pool = pool_of(stream, small);
  int b = find_free(pool, rounded);
  if (b < 0) {
    const bool ok = params_.expandable_segments && !small ? grow_expandable(pool, rounded, b) : false;
    if (!ok) {
      const Bytes seg = segment_size(rounded);
      if (!(params_.expandable_segments && !small) && reserved_ + seg <= capacity_) {
        b = new_segment(pool, seg);
      } else {
        release_cached();
        if (params_.expandable_segments && !small) {
          if (!grow_expandable(pool, rounded, b)) return false;
        } else {
          if (reserved_ + seg > capacity_) return false;
          b = new_segment(pool, seg);
        }
      }
    }
  }
  take(b, rounded);
  if (static_cast<std::size_t>(id) >= live_.size()) live_.resize(static_cast<std::size_t>(id) + 1, -1);
  live_[static_cast<std::size_t>(id)] = b;
  allocated_ += rounded;
  return true;
}

void CachingAllocator::free(BufferId id) {
  if (!owns(id)) return;
  int b = live_[static_cast<std::size_t>(id)];
  live_[static_cast<std::size_t>(id)] = -1;
  Block* blk = &blocks_[static_cast<std::size_t>(b)];
  allocated_ -= blk->size;
  blk->allocated = false;
  // Coalesce with free neighbours in the same segment.
  if (blk->prev >= 0 && !blocks_[static_cast<std::size_t>(blk->prev)].allocated) {
    const int p = blk->prev;
    erase_free(p);
    Block& prev = blocks_[static_cast<std::size_t>(p)];
    prev.size += blk->size;
    prev.next = blk->next;
    if (blk->next >= 0) blocks_[static_cast<std::size_t>(blk->next)].prev = p;
    blk->size = 0;
    b = p;
    blk = &blocks_[static_cast<std::size_t>(b)];
  }
  if (blk->next >= 0 && !blocks_[static_cast<std::size_t>(blk->next)].allocated) {
    const int n = blk->next;
    erase_free(n);
    Block& next = blocks_[static_cast<std::size_t>(n)];
    blk->size += next.size;
    blk->next = next.next;
    if (next.next >= 0) blocks_[static_cast<std::size_t>(next.next)].prev = b;
    next.size = 0;
  }
  insert_free(b);
}

}  // namespace shardscope::sim
