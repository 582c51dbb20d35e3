#pragma once
// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), to predict
// *reserved* memory, which is what runs out:
//   * sizes round up to 512 B; requests ≤ 1 MiB use the small pool, larger ones the large pool;
//   * a new segment is 2 MiB (small), 20 MiB (large requests < 10 MiB) or the request rounded up
//     to 2 MiB; with expandable_segments each (stream, pool) has one segment that grows in 2 MiB
//     pages;
//   * a buffer of the process group's MemPool (MemoryPool::process_group) comes from that private
//     pool's own segments, never from the default pools' (and the other way round); a private
//     pool has no expandable segments, and its cached segments are not released while the pool
//     lives (the allocator frees only pools whose use count dropped to zero);
//   * free blocks are cached per (stream, pool) and reused only by that stream: best fit, split
//     when the rest is ≥ 512 B (small) or > 1 MiB (large), coalesced with free neighbours on free;
//   * when a new segment does not fit in the GPU, every fully free cached segment is released
//     (cudaFree) and the allocation retried; then it is out of memory. Expandable segments instead
//     unmap the whole pages inside their free blocks (the partial pages at a block's ends stay
//     mapped: a neighbour uses them), which are mapped again when reused.
// The settings (AllocatorParams) change these rules as PyTorch's CUDAAllocatorConfig does:
// expandable segments split any remainder ≥ 512 B; max_split_size keeps oversize blocks whole,
// from smaller requests, and releases them first (release_available_cached_blocks);
// roundup_power2_divisions rounds sizes to power-of-two divisions; a memory fraction caps
// reserved memory, and the garbage-collection threshold frees the oldest cached segments above it
// (garbage_collect_cached_blocks).

#include <vector>

#include "shardscope/core/allocator_params.hpp"
#include "shardscope/core/free_block_index.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope {

class CachingAllocator {
 public:
  CachingAllocator(Bytes capacity, AllocatorParams params = {});

  /// Room for buffer ids below `n` (optional: ids grow the table as they come).
  void reserve_buffers(std::size_t n) {
    if (live_.size() < n) live_.resize(n, -1);
  }
  /// Allocates `size` bytes for `stream` from `pool`; returns false (and changes nothing) when out
  /// of memory.
  bool allocate(BufferId id, Bytes size, StreamId stream,
                MemoryPool pool = MemoryPool::caching_allocator);
  /// Frees `id`'s block; false (and nothing changes) when `id` holds none.
  bool free(BufferId id);
  bool owns(BufferId id) const {
    return id >= 0 && static_cast<std::size_t>(id) < live_.size() &&
           live_[static_cast<std::size_t>(id)] >= 0;
  }

  Bytes allocated() const {
    return allocated_;
  }  // sizes of allocated blocks, as torch.cuda.memory_allocated
  Bytes reserved() const { return reserved_; }  // segments, as torch.cuda.memory_reserved
  Bytes capacity() const { return capacity_; }
  int segments() const { return live_segments_; }
  /// Times cached segments had to be released to satisfy an allocation (PyTorch's
  /// num_alloc_retries).
  int retries() const { return retries_; }

  /// Where buffer `id`'s block lies, for a backend that places real memory: segment `segment`
  /// (0.. segment_count() − 1) at `offset`, `size` bytes; segment −1 when `id` holds none.
  struct Placement {
    int segment = -1;
    Bytes offset = 0;
    Bytes size = 0;
  };
  Placement placement(BufferId id) const {
    if (!owns(id)) return {};
    const Block& b = blocks_[static_cast<std::size_t>(live_[static_cast<std::size_t>(id)])];
    return {b.segment, b.offset, b.size};
  }
  /// Every segment ever created, in creation order; a released one is no longer live. A backend
  /// mirrors them: it reserves each new one and gives back each that stops being live.
  int segment_count() const { return static_cast<int>(segments_.size()); }
  Bytes segment_bytes(int segment) const {
    return segments_[static_cast<std::size_t>(segment)].size;
  }
  bool segment_live(int segment) const { return segments_[static_cast<std::size_t>(segment)].live; }
  bool expandable_segments() const { return params_.expandable_segments; }
  /// Expandable segments map and unmap memory in pages of this size inside their address space.
  static constexpr Bytes kExpandablePage = 2 * kMiB;
  /// `segment` is its pool's expandable segment: address space with some pages mapped.
  bool segment_expandable(int segment) const {
    const Segment& s = segments_[static_cast<std::size_t>(segment)];
    return expandable_segment_[static_cast<std::size_t>(s.pool)] == segment;
  }
  /// The byte ranges of `segment` backed by memory, in address order, adjacent ranges joined: the
  /// whole segment unless it is expandable, whose ranges are whole pages (their sum is what the
  /// segment adds to reserved()).
  struct Extent {
    Bytes offset = 0;
    Bytes size = 0;
    bool operator==(const Extent&) const = default;
  };
  std::vector<Extent> mapped_extents(int segment) const;

  /// A request's size in the allocator: 512-byte multiples, or power-of-two divisions when set.
  static Bytes round_size(Bytes size, int roundup_power2_divisions = 0);
  static Bytes segment_size(Bytes rounded);

 private:
  struct Block {
    Bytes offset = 0;
    Bytes size = 0;
    int segment = 0;
    int pool = 0;  // its segment's pool, kept here: every free-list update needs it
    int prev = -1;
    int next = -1;
    bool allocated = false;
    bool mapped = true;  // expandable segments unmap free pages when memory runs short
  };
  struct Segment {
    int pool = 0;
    Bytes size = 0;
    bool live = true;
    std::int64_t freed_at = 0;  // large-pool searches when it last became one free block
  };
  // Best fit: smallest size first, then lowest address (segment << 40 | offset), as PyTorch's set.
  static std::int64_t address_of(const Block& b) {
    return (static_cast<std::int64_t>(b.segment) << 40) | b.offset;
  }
  // The block is its segment's only block (so, when free, the segment can be released).
  static bool spans_segment(const Block& b) { return b.prev < 0 && b.next < 0; }

  static std::size_t pool_key(StreamId stream, bool small, bool kept) {
    return (static_cast<std::size_t>(stream) * 2 + (small ? 1 : 0)) * 2 + (kept ? 1 : 0);
  }
  // `kept`: the process group's private pool, whose segments are never released.
  int pool_of(StreamId stream, bool small, bool kept) {
    const auto key = pool_key(stream, small, kept);
    return key < pool_index_.size() && pool_index_[key] >= 0 ? pool_index_[key]
                                                             : add_pool(stream, small, kept);
  }
  int add_pool(StreamId stream, bool small, bool kept);
  int take(int block, Bytes size, bool small);
  int split_tail(int block, Bytes head_size, bool tail_mapped);
  void merge_with_next(int block);
  int join_free_neighbours(int block);
  int new_block(const Block& block);
  void retire_block(int block);
  int new_segment(int pool, Bytes size);
  int grow_expandable(int pool, Bytes size);
  bool map_block(int block, Bytes size);
  void unmap_free_pages(int block);
  void release_cached();
  void release_segment(int segment);
  bool free_whole(int segment) const;
  const std::vector<int>& whole_free_candidates();
  bool release_oversize(int pool, Bytes size);
  void collect_garbage();
  int find_free(int pool, Bytes rounded) const;
  void insert_free(int block);
  void erase_free(int block);

  Bytes capacity_;
  AllocatorParams params_;
  std::vector<Block> blocks_;
  std::vector<Segment> segments_;
  FreeBlockIndex free_;                   // free blocks of every pool, by block id
  std::vector<int> pool_index_;           // (stream · 2 + small) → pool, -1 if none
  std::vector<int> dead_blocks_;          // slots of coalesced blocks, reused by splits
  std::vector<int> expandable_segment_;   // per pool, -1 if none
  std::vector<std::uint8_t> small_pool_;  // per pool, 1 for a small pool
  std::vector<std::uint8_t> kept_pool_;   // per pool, 1 for the process group's private pool
  std::vector<int> segment_tail_;         // per segment, its last block
  std::vector<int> live_;                 // buffer → block, -1 when not allocated
  std::vector<int> whole_free_segments_;  // segments that emptied since the last release
  Bytes allocated_ = 0;
  Bytes reserved_ = 0;
  std::int64_t large_searches_ = 0;  // the age clock of garbage collection
  int live_segments_ = 0;
  int retries_ = 0;
};

}  // namespace shardscope
