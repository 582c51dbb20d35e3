#include "shardscope/core/caching_allocator.hpp"

#include <gtest/gtest.h>

namespace shardscope {
namespace {

TEST(CachingAllocator, RoundsAndSizesSegmentsLikePyTorch) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB), 2 * kMiB);        // small pool
  EXPECT_EQ(CachingAllocator::segment_size(5 * kMiB), 20 * kMiB);   // large, < 10 MiB
  EXPECT_EQ(CachingAllocator::segment_size(11 * kMiB), 12 * kMiB);  // rounded to 2 MiB
}

TEST(CachingAllocator, FreedBlocksAreReusedOnlyByTheirStream) {
  CachingAllocator a(kGiB);
  ASSERT_TRUE(a.allocate(1, 100 * kMiB, 0));
  a.free(1);
  EXPECT_EQ(a.allocated(), 0);
  EXPECT_EQ(a.reserved(), 100 * kMiB);  // cached, still reserved
  ASSERT_TRUE(a.allocate(2, 100 * kMiB, 0));
  EXPECT_EQ(a.reserved(), 100 * kMiB);  // reused on the same stream
  a.free(2);
  ASSERT_TRUE(a.allocate(3, 100 * kMiB, 1));
  EXPECT_EQ(a.reserved(), 200 * kMiB);  // another stream cannot use it
}

TEST(CachingAllocator, SplitsLargeSegmentsAndCoalescesOnFree) {
  CachingAllocator a(kGiB);
  ASSERT_TRUE(a.allocate(1, 3 * kMiB, 0));  // a 20 MiB segment
  ASSERT_TRUE(a.allocate(2, 3 * kMiB, 0));  // split from the same segment
  EXPECT_EQ(a.reserved(), 20 * kMiB);
  EXPECT_EQ(a.segments(), 1);
  a.free(1);
  a.free(2);
  ASSERT_TRUE(a.allocate(3, 18 * kMiB, 0));  // needs the coalesced block
  EXPECT_EQ(a.reserved(), 20 * kMiB);
}

// PyTorch counts allocated_bytes by block->size after deciding whether to split: a large block's
// remainder of at most 1 MiB stays with the allocation, and the free gives the same amount back.
TEST(CachingAllocator, AllocatedCountsTheUnsplitRemainderOfALargeBlock) {
  CachingAllocator a(kGiB);
  ASSERT_TRUE(a.allocate(1, 19 * kMiB + kMiB / 2, 0));  // a 20 MiB segment; 0.5 MiB left, not split
  EXPECT_EQ(a.allocated(), 20 * kMiB);
  ASSERT_TRUE(a.allocate(2, 3 * kMiB, 0));  // needs a new segment: nothing was split off the first
  EXPECT_EQ(a.segments(), 2);
  EXPECT_EQ(a.allocated(), 20 * kMiB + 3 * kMiB);  // the second block was split: only its 3 MiB
  a.free(1);
  a.free(2);
  EXPECT_EQ(a.allocated(), 0);
}

TEST(CachingAllocator, ReleasesCachedSegmentsBeforeReportingOutOfMemory) {
  CachingAllocator a(100 * kMiB);
  ASSERT_TRUE(a.allocate(1, 60 * kMiB, 0));
  a.free(1);
  ASSERT_TRUE(a.allocate(2, 70 * kMiB, 1));  // only fits after the stream-0 cache is released
  EXPECT_EQ(a.reserved(), 70 * kMiB);
  EXPECT_FALSE(a.allocate(3, 40 * kMiB, 1));
  EXPECT_EQ(a.allocated(), 70 * kMiB);  // a failed allocation changes nothing
}

// The process group's MemPool: its own segments, reused only by its own buffers, never released
// while it lives, never expandable.
TEST(CachingAllocator, TheProcessGroupPoolKeepsItsSegmentsToItself) {
  AllocatorParams expandable;
  expandable.expandable_segments = true;
  CachingAllocator a(100 * kMiB, expandable);
  ASSERT_TRUE(a.allocate(1, 30 * kMiB, 0, MemoryPool::process_group));
  EXPECT_EQ(a.segments(), 1);
  EXPECT_FALSE(a.segment_expandable(0));
  a.free(1);
  // A default-pool buffer of the same stream does not reuse the free pooled block...
  ASSERT_TRUE(a.allocate(2, 30 * kMiB, 0));
  EXPECT_EQ(a.reserved(), 60 * kMiB);
  // ...a pooled one does.
  ASSERT_TRUE(a.allocate(3, 30 * kMiB, 0, MemoryPool::process_group));
  EXPECT_EQ(a.placement(3).segment, 0);
  a.free(3);
  a.free(2);
  // Running short releases the default pool's cached memory, never the pool's 30 MiB.
  EXPECT_FALSE(a.allocate(4, 72 * kMiB, 0));
  ASSERT_TRUE(a.allocate(5, 70 * kMiB, 0));
  EXPECT_EQ(a.reserved(), 100 * kMiB);
  EXPECT_TRUE(a.segment_live(0));
}

TEST(CachingAllocator, ReleasesOnlySegmentsThatAreFreeWhenMemoryRunsShort) {
  // Segment A empties, then is used again: the retry must keep it. Segment B empties twice.
  CachingAllocator a(100 * kMiB);
  ASSERT_TRUE(a.allocate(1, 30 * kMiB, 0));  // segment A
  ASSERT_TRUE(a.allocate(2, 30 * kMiB, 1));  // segment B (another stream)
  a.free(1);
  ASSERT_TRUE(a.allocate(3, 30 * kMiB, 0));  // A again
  a.free(2);
  ASSERT_TRUE(a.allocate(4, 30 * kMiB, 1));  // B again
  a.free(4);
  EXPECT_EQ(a.reserved(), 60 * kMiB);
  EXPECT_EQ(a.retries(), 0);
  ASSERT_TRUE(a.allocate(5, 60 * kMiB, 2));  // fits only once B is released
  EXPECT_EQ(a.retries(), 1);
  EXPECT_EQ(a.reserved(), 90 * kMiB);  // A (in use) and the new segment
  EXPECT_EQ(a.segments(), 2);
  EXPECT_FALSE(a.allocate(6, 20 * kMiB, 2));  // A is in use: nothing to release
  EXPECT_EQ(a.reserved(), 90 * kMiB);
  a.free(3);
  ASSERT_TRUE(a.allocate(7, 20 * kMiB, 2));  // now A goes
  EXPECT_EQ(a.reserved(), 80 * kMiB);
  EXPECT_EQ(a.segments(), 2);
}

TEST(CachingAllocator, ExpandableSegmentsGrowInPlaceInsteadOfFragmenting) {
  // A growing sequence of large requests: classic segments keep every size, expandable grows one.
  CachingAllocator classic(8 * kGiB), expandable(8 * kGiB, {true});
  BufferId id = 0;
  for (Bytes mb : {100, 150, 200, 250}) {
    ASSERT_TRUE(classic.allocate(id, mb * kMiB, 0));
    ASSERT_TRUE(expandable.allocate(id, mb * kMiB, 0));
    classic.free(id);
    expandable.free(id);
    ++id;
  }
  EXPECT_EQ(classic.reserved(), (100 + 150 + 200 + 250) * kMiB);
  EXPECT_EQ(expandable.reserved(), 250 * kMiB);
}

TEST(CachingAllocator, ExpandableSegmentsUnmapOnlyWholeFreePages) {
  // 2.5 MiB maps pages [0, 4 MiB); its free tail [2.5, 4) shares the second page with it. Making
  // room cannot unmap that page (PyTorch's ExpandableSegment::unmap rounds inwards), so reserved
  // stays 4 MiB and the 4 MiB request that needed it fails.
  CachingAllocator a(6 * kMiB, {true});
  ASSERT_TRUE(a.allocate(0, 5 * kMiB / 2, 0));
  EXPECT_EQ(a.reserved(), 4 * kMiB);
  EXPECT_FALSE(a.allocate(1, 4 * kMiB, 0));
  EXPECT_EQ(a.retries(), 1);
  EXPECT_EQ(a.reserved(), 4 * kMiB);
  EXPECT_EQ(a.mapped_extents(0), (std::vector<CachingAllocator::Extent>{{0, 4 * kMiB}}));
}

TEST(CachingAllocator, ExpandableSegmentsReuseUnmappedSpaceWhole) {
  // Three 2 MiB buffers; the first and last are freed. 6 MiB does not fit beside them: their pages
  // are unmapped, the last one's joins the unmapped space the request grew, and the request takes
  // that joined space at 4 MiB instead of growing the segment again.
  CachingAllocator a(8 * kMiB, {true});
  for (BufferId id = 0; id < 3; ++id) ASSERT_TRUE(a.allocate(id, 2 * kMiB, 0));
  a.free(0);
  a.free(2);
  ASSERT_TRUE(a.allocate(3, 6 * kMiB, 0));
  EXPECT_EQ(a.retries(), 1);
  EXPECT_EQ(a.placement(3).offset, 4 * kMiB);
  EXPECT_EQ(a.segment_bytes(0), 12 * kMiB);
  EXPECT_EQ(a.reserved(), 8 * kMiB);
  EXPECT_EQ(a.mapped_extents(0), (std::vector<CachingAllocator::Extent>{{2 * kMiB, 8 * kMiB}}));
}

}  // namespace
}  // namespace shardscope
