#include "shardscope/core/caching_allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace shardscope {
namespace {
constexpr Bytes kMinBlockSize = 512;
constexpr Bytes kSmallSize = 1 * kMiB;
constexpr Bytes kSmallBuffer = 2 * kMiB;
constexpr Bytes kLargeBuffer = 20 * kMiB;
constexpr Bytes kMinLargeAlloc = 10 * kMiB;
constexpr Bytes kRoundLarge = 2 * kMiB;
constexpr Bytes kPage = CachingAllocator::kExpandablePage;

Bytes round_up(Bytes value, Bytes multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
Bytes round_down(Bytes value, Bytes multiple) {
  return value / multiple * multiple;
}
}  // namespace

CachingAllocator::CachingAllocator(Bytes capacity, AllocatorParams params)
    : capacity_(capacity), params_(params) {
  // A training step near capacity creates (and releases) a hundred segments or more: start with
  // room for them rather than regrowing the tables.
  constexpr std::size_t kTypicalSegments = 256;
  segments_.reserve(kTypicalSegments);
  segment_tail_.reserve(kTypicalSegments);
  blocks_.reserve(kTypicalSegments);
  free_.reserve(kTypicalSegments);
  dead_blocks_.reserve(kTypicalSegments);
  whole_free_segments_.reserve(kTypicalSegments);
}

// PyTorch's round_size and roundup_power2_next_division: with N divisions, a size above 512·N
// rounds up to a multiple of (the power of two below it) ÷ N; a power of two stays as it is. That
// power of two exceeds 256·N, so the step is never 0 (PyTorch's guard for it cannot fire here).
Bytes CachingAllocator::round_size(Bytes size, int roundup_power2_divisions) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const auto divisions = static_cast<Bytes>(roundup_power2_divisions);
  if (divisions <= 1 || size <= kMinBlockSize * divisions) return round_up(size, kMinBlockSize);
  const auto u = static_cast<std::uint64_t>(size);
  if (std::has_single_bit(u)) return size;
  return round_up(size, static_cast<Bytes>(std::bit_floor(u)) / divisions);
}

Bytes CachingAllocator::segment_size(Bytes rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

int CachingAllocator::add_pool(StreamId stream, bool small, bool kept) {
  const auto key = pool_key(stream, small, kept);
  if (key >= pool_index_.size()) pool_index_.resize(key + 1, -1);
  const int pool = free_.add_pool();
  pool_index_[key] = pool;
  small_pool_.push_back(small ? 1 : 0);
  kept_pool_.push_back(kept ? 1 : 0);
  expandable_segment_.push_back(-1);
  return pool;
}

// Blocks live in one vector; slots of blocks merged away are reused, so it stops growing.
inline int CachingAllocator::new_block(const Block& block) {
  if (!dead_blocks_.empty()) {
    const int b = dead_blocks_.back();
    dead_blocks_.pop_back();
    blocks_[static_cast<std::size_t>(b)] = block;
    return b;
  }
  blocks_.push_back(block);
  return static_cast<int>(blocks_.size() - 1);
}

inline void CachingAllocator::retire_block(int b) {
  blocks_[static_cast<std::size_t>(b)].size = 0;
  dead_blocks_.push_back(b);
}

inline void CachingAllocator::insert_free(int b) {
  const Block& blk = blocks_[static_cast<std::size_t>(b)];
  free_.insert(blk.pool, b, blk.size, address_of(blk));
}

inline void CachingAllocator::erase_free(int b) {
  free_.erase(b);
}

// Splits block `b` (not in a free list) after `head_size` bytes; the tail is free and listed.
// Forced inline, as take() below: nearly every allocation splits, and as calls the two cost 2 % of
// a sweep point. (Forcing insert_free inline as well cost more than it saved.)
[[gnu::always_inline]] inline int CachingAllocator::split_tail(int b, Bytes head_size,
                                                               bool tail_mapped) {
  Block tail;
  {
    const Block& head = blocks_[static_cast<std::size_t>(b)];
    tail.offset = head.offset + head_size;
    tail.size = head.size - head_size;
    tail.segment = head.segment;
    tail.pool = head.pool;
    tail.prev = b;
    tail.next = head.next;
    tail.mapped = tail_mapped;
  }
  const int t = new_block(tail);
  Block& head = blocks_[static_cast<std::size_t>(b)];  // re-fetch: new_block may reallocate
  if (head.next >= 0) blocks_[static_cast<std::size_t>(head.next)].prev = t;
  if (segment_tail_[static_cast<std::size_t>(head.segment)] == b)
    segment_tail_[static_cast<std::size_t>(head.segment)] = t;
  head.next = t;
  head.size = head_size;
  insert_free(t);
  return t;
}

// Block `left` takes in its right neighbour (the reverse of split_tail); the neighbour's slot is
// retired. Forced inline: free() calls it at two sites on every free, and as a call it cost 0.6 %
// of a sweep point.
[[gnu::always_inline]] inline void CachingAllocator::merge_with_next(int left) {
  Block& l = blocks_[static_cast<std::size_t>(left)];
  const int r = l.next;
  const Block& right = blocks_[static_cast<std::size_t>(r)];
  l.size += right.size;
  l.next = right.next;
  if (right.next >= 0) blocks_[static_cast<std::size_t>(right.next)].prev = left;
  if (segment_tail_[static_cast<std::size_t>(l.segment)] == r)
    segment_tail_[static_cast<std::size_t>(l.segment)] = left;
  retire_block(r);
}

// Block `b` (free, not listed) takes in its free neighbours of the same mapping state, as
// PyTorch's try_merge_blocks does; returns the block that now covers it (not listed). Forced
// inline: free() runs it on every free.
[[gnu::always_inline]] inline int CachingAllocator::join_free_neighbours(int b) {
  const auto joins = [&](int n) {
    return n >= 0 && !blocks_[static_cast<std::size_t>(n)].allocated &&
           blocks_[static_cast<std::size_t>(n)].mapped ==
               blocks_[static_cast<std::size_t>(b)].mapped;
  };
  if (const int p = blocks_[static_cast<std::size_t>(b)].prev; joins(p)) {
    erase_free(p);
    merge_with_next(p);
    b = p;
  }
  if (const int n = blocks_[static_cast<std::size_t>(b)].next; joins(n)) {
    erase_free(n);
    merge_with_next(b);
  }
  return b;
}

// Marks `b` allocated with `size`, splitting off the rest when PyTorch would (should_split).
[[gnu::always_inline]] inline int CachingAllocator::take(int b, Bytes size, bool small) {
  erase_free(b);
  const Block& blk = blocks_[static_cast<std::size_t>(b)];
  const Bytes rest = blk.size - size;
  const bool split =
      small || params_.expandable_segments
          ? rest >= kMinBlockSize
          : rest > kSmallSize && (params_.max_split_size == 0 || size < params_.max_split_size);
  if (split) split_tail(b, size, blk.mapped);
  blocks_[static_cast<std::size_t>(b)].allocated = true;
  return b;
}

int CachingAllocator::new_segment(int pool, Bytes size) {
  segments_.push_back({pool, size, true});
  Block blk;
  blk.size = size;
  blk.segment = static_cast<int>(segments_.size() - 1);
  blk.pool = pool;
  const int b = new_block(blk);
  segment_tail_.push_back(b);
  reserved_ += size;
  ++live_segments_;
  insert_free(b);
  return b;
}

// Expandable segments: a segment is address space; only mapped pages count as reserved. Growing
// appends unmapped address space at the end; allocations map what they use.
int CachingAllocator::grow_expandable(int pool, Bytes size) {
  int& seg = expandable_segment_[static_cast<std::size_t>(pool)];
  Block blk;
  blk.size = round_up(size, kPage);
  blk.mapped = false;
  if (seg < 0) {
    segments_.push_back({pool, blk.size, true});
    seg = static_cast<int>(segments_.size() - 1);
    segment_tail_.push_back(-1);
    ++live_segments_;
  } else {
    const int tail = segment_tail_[static_cast<std::size_t>(seg)];
    Block& last = blocks_[static_cast<std::size_t>(tail)];
    if (!last.allocated && !last.mapped) {
      // The segment ends in unmapped space too small for the request: extend it.
      erase_free(tail);
      segments_[static_cast<std::size_t>(seg)].size += blk.size - last.size;
      last.size = blk.size;
      insert_free(tail);
      return tail;
    }
    blk.offset = last.offset + last.size;
    blk.prev = tail;
    segments_[static_cast<std::size_t>(seg)].size += blk.size;
  }
  blk.segment = seg;
  blk.pool = pool;
  const int b = new_block(blk);
  if (blk.prev >= 0) blocks_[static_cast<std::size_t>(blk.prev)].next = b;
  segment_tail_[static_cast<std::size_t>(seg)] = b;
  insert_free(b);
  return b;
}

// The segment is live, not expandable, and one free block (so it can be cudaFree'd).
bool CachingAllocator::free_whole(int s) const {
  const Segment& seg = segments_[static_cast<std::size_t>(s)];
  if (!seg.live || expandable_segment_[static_cast<std::size_t>(seg.pool)] == s) return false;
  const Block& blk = blocks_[static_cast<std::size_t>(segment_tail_[static_cast<std::size_t>(s)])];
  return !blk.allocated && spans_segment(blk);
}

void CachingAllocator::release_segment(int s) {
  Segment& seg = segments_[static_cast<std::size_t>(s)];
  const int b = segment_tail_[static_cast<std::size_t>(s)];
  erase_free(b);
  retire_block(b);
  seg.live = false;
  reserved_ -= seg.size;
  --live_segments_;
}

// The listed segments that are still one free block, each once (a segment is listed again each
// time it empties).
const std::vector<int>& CachingAllocator::whole_free_candidates() {
  std::sort(whole_free_segments_.begin(), whole_free_segments_.end());
  whole_free_segments_.erase(std::unique(whole_free_segments_.begin(), whole_free_segments_.end()),
                             whole_free_segments_.end());
  std::erase_if(whole_free_segments_, [&](int s) { return !free_whole(s); });
  return whole_free_segments_;
}

// PyTorch's release_available_cached_blocks, with max_split_size set: release the smallest
// oversize segment of the pool that covers the request, else oversize segments from the largest
// down until they add up to it. True when enough was released.
bool CachingAllocator::release_oversize(int pool, Bytes size) {
  const Bytes key = std::max(size, params_.max_split_size);
  std::vector<int> oversize;
  for (const int s : whole_free_candidates()) {
    const Segment& seg = segments_[static_cast<std::size_t>(s)];
    if (seg.pool == pool && seg.size >= params_.max_split_size) oversize.push_back(s);
  }
  std::sort(oversize.begin(), oversize.end(), [&](int a, int b) {
    return segments_[static_cast<std::size_t>(a)].size <
           segments_[static_cast<std::size_t>(b)].size;
  });
  for (const int s : oversize) {
    if (segments_[static_cast<std::size_t>(s)].size >= key) {
      release_segment(s);
      return true;
    }
  }
  Bytes released = 0;
  for (auto it = oversize.rbegin(); it != oversize.rend() && released < key; ++it) {
    released += segments_[static_cast<std::size_t>(*it)].size;
    release_segment(*it);
  }
  return released >= key;
}

// PyTorch's garbage_collect_cached_blocks: above the threshold, free the whole cached segments of
// the large pools whose age (large-pool searches since they emptied) is at least the average,
// again with the rest, until the excess is reclaimed.
void CachingAllocator::collect_garbage() {
  const auto threshold =
      static_cast<Bytes>(params_.garbage_collection_threshold * static_cast<double>(capacity_));
  if (reserved_ <= threshold) return;
  const Bytes target = reserved_ - threshold;
  std::vector<int> freeable;
  for (const int s : whole_free_candidates()) {
    if (small_pool_[static_cast<std::size_t>(segments_[static_cast<std::size_t>(s)].pool)] == 0)
      freeable.push_back(s);
  }
  const auto age = [&](int s) {
    return static_cast<double>(large_searches_ - segments_[static_cast<std::size_t>(s)].freed_at);
  };
  double total_age = 0;
  for (const int s : freeable) total_age += age(s);
  Bytes reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && !freeable.empty()) {
    const double threshold_age = total_age / static_cast<double>(freeable.size());
    freed = false;
    std::erase_if(freeable, [&](int s) {
      if (age(s) < threshold_age) return false;
      reclaimed += segments_[static_cast<std::size_t>(s)].size;
      total_age -= age(s);
      release_segment(s);
      freed = true;
      return true;
    });
  }
}

void CachingAllocator::release_cached() {
  // Segments that became one free block since the last release are the candidates: a candidate
  // that has been allocated from again since is skipped (it is listed again when it next empties).
  for (const int s : whole_free_segments_) {
    if (free_whole(s)) release_segment(s);
  }
  whole_free_segments_.clear();
  if (!params_.expandable_segments) return;
  // Index loop: unmapping splits blocks, which may grow the vector.
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const Block& blk = blocks_[b];
    if (blk.size == 0 || blk.allocated || !blk.mapped) continue;
    if (expandable_segment_[static_cast<std::size_t>(blk.pool)] != blk.segment) continue;
    unmap_free_pages(static_cast<int>(b));
  }
}

// Unmaps the whole pages inside free block `b` (listed, mapped, in an expandable segment), as
// PyTorch's ExpandableSegment::unmap rounds the range inwards: the partial pages at either end stay
// mapped, split off as free mapped blocks, so every unmapped block is whole pages.
void CachingAllocator::unmap_free_pages(int b) {
  const Block blk = blocks_[static_cast<std::size_t>(b)];
  const Bytes begin = round_up(blk.offset, kPage);
  const Bytes end = round_down(blk.offset + blk.size, kPage);
  if (end <= begin) return;
  erase_free(b);
  int pages = b;
  if (begin > blk.offset) {
    pages = split_tail(b, begin - blk.offset, true);  // listed; the head is listed again below
    insert_free(b);
    erase_free(pages);
  }
  if (end < blk.offset + blk.size) split_tail(pages, end - begin, true);
  blocks_[static_cast<std::size_t>(pages)].mapped = false;
  reserved_ -= end - begin;
  // Unmapped neighbours join, so the segment's unmapped space is reused whole.
  insert_free(join_free_neighbours(pages));
}

std::vector<CachingAllocator::Extent> CachingAllocator::mapped_extents(int segment) const {
  std::vector<Extent> extents;
  if (!segments_[static_cast<std::size_t>(segment)].live) return extents;
  for (int b = segment_tail_[static_cast<std::size_t>(segment)]; b >= 0;
       b = blocks_[static_cast<std::size_t>(b)].prev) {
    const Block& blk = blocks_[static_cast<std::size_t>(b)];
    if (!blk.mapped) continue;
    if (!extents.empty() && extents.back().offset == blk.offset + blk.size) {
      extents.back().offset = blk.offset;  // walking backwards: extend the range downwards
      extents.back().size += blk.size;
    } else {
      extents.push_back({blk.offset, blk.size});
    }
  }
  std::reverse(extents.begin(), extents.end());
  return extents;
}

// Maps the first `size` bytes of an unmapped free block (splitting off the unmapped rest).
bool CachingAllocator::map_block(int b, Bytes size) {
  const Bytes need = std::min(round_up(size, kPage), blocks_[static_cast<std::size_t>(b)].size);
  if (reserved_ + need > capacity_) return false;
  reserved_ += need;
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  if (blk.size > need) {
    erase_free(b);
    split_tail(b, need, false);  // the rest stays unmapped address space
    insert_free(b);
  }
  blocks_[static_cast<std::size_t>(b)].mapped = true;
  return true;
}

// PyTorch's get_free_block: the best fit, unless max_split_size makes it an oversize block for a
// smaller request, or one more than 20 MiB too large for an oversize request.
int CachingAllocator::find_free(int pool, Bytes rounded) const {
  const int b = free_.best_fit(pool, rounded);
  const Bytes max_split = params_.max_split_size;
  if (b < 0 || max_split == 0) return b;
  const Bytes found = blocks_[static_cast<std::size_t>(b)].size;
  if (rounded < max_split && found >= max_split) return -1;
  if (rounded >= max_split && found >= rounded + kLargeBuffer) return -1;
  return b;
}

bool CachingAllocator::allocate(BufferId id, Bytes size, StreamId stream, MemoryPool from) {
  const Bytes rounded = round_size(size, params_.roundup_power2_divisions);
  const bool small = rounded <= kSmallSize;
  const bool kept = from == MemoryPool::process_group;
  // A private pool never uses expandable segments (get_allocated_block skips them for pools with
  // an owner_PrivatePool).
  const bool expandable = params_.expandable_segments && !small && !kept;
  const int pool = pool_of(stream, small, kept);
  if (!small) ++large_searches_;
  // `b` stays listed until take(): map_block and release_cached work on listed free blocks.
  int b = find_free(pool, rounded);
  if (b < 0 && expandable) b = grow_expandable(pool, rounded);
  if (b < 0) {
    const Bytes seg = segment_size(rounded);
    if (params_.memory_fraction > 0 && params_.garbage_collection_threshold > 0) collect_garbage();
    // As malloc: release enough oversize segments and retry; if that was not enough (or released
    // less than the request), release every cached segment and retry.
    const auto fits = [&] { return reserved_ + seg <= capacity_; };
    bool ok = fits();
    if (!ok && params_.max_split_size > 0 && release_oversize(pool, rounded)) {
      ++retries_;
      ok = fits();
    }
    if (!ok) {
      ++retries_;
      release_cached();
      if (!fits()) return false;
    }
    b = new_segment(pool, seg);
  }
  if (!blocks_[static_cast<std::size_t>(b)].mapped && !map_block(b, rounded)) {
    ++retries_;
    release_cached();
    // Unmapping joined unmapped neighbours, `b` perhaps into another block: look again.
    b = free_.best_fit(pool, rounded);
    if (b < 0) b = grow_expandable(pool, rounded);
    if (!blocks_[static_cast<std::size_t>(b)].mapped && !map_block(b, rounded)) return false;
  }
  take(b, rounded, small);
  if (static_cast<std::size_t>(id) >= live_.size())
    live_.resize(static_cast<std::size_t>(id) + 1, -1);
  live_[static_cast<std::size_t>(id)] = b;
  // The whole block counts, a remainder too small to split off included (PyTorch's
  // allocated_bytes grows by block->size after the split decision); free() takes the same back.
  allocated_ += blocks_[static_cast<std::size_t>(b)].size;
  return true;
}

bool CachingAllocator::free(BufferId id) {
  if (!owns(id)) return false;
  int b = live_[static_cast<std::size_t>(id)];
  live_[static_cast<std::size_t>(id)] = -1;
  Block* blk = &blocks_[static_cast<std::size_t>(b)];
  allocated_ -= blk->size;
  blk->allocated = false;
  b = join_free_neighbours(b);
  insert_free(b);
  blk = &blocks_[static_cast<std::size_t>(b)];
  // Only an emptied segment of a default pool becomes a candidate for release: the process
  // group's pool stays in use while the process group lives.
  if (spans_segment(*blk) && kept_pool_[static_cast<std::size_t>(blk->pool)] == 0 &&
      expandable_segment_[static_cast<std::size_t>(blk->pool)] != blk->segment) {
    whole_free_segments_.push_back(blk->segment);
    segments_[static_cast<std::size_t>(blk->segment)].freed_at = large_searches_;
  }
  return true;
}

}  // namespace shardscope
