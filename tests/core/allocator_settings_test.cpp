// The caching allocator's settings (allocator.* keys, PYTORCH_CUDA_ALLOC_CONF), each against the
// rule in PyTorch's CUDACachingAllocator.cpp it follows, in closed form.
#include <gtest/gtest.h>

#include "shardscope/core/caching_allocator.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {
namespace {

AllocatorParams max_split(Bytes size) {
  AllocatorParams p;
  p.max_split_size = size;
  return p;
}

// round_size / roundup_power2_next_division; the example of PyTorch's CUDA semantics notes:
// 1200 with 4 divisions lies between 1024 and 2048, whose quarters are 1024, 1280, 1536, 1792.
TEST(AllocatorSettings, PowerOfTwoDivisionsRoundUpToTheNextDivision) {
  EXPECT_EQ(CachingAllocator::round_size(1200 * kMiB, 4), 1280 * kMiB);
  EXPECT_EQ(CachingAllocator::round_size(1100 * kMiB, 8), 1152 * kMiB);  // eighths of 1024
  EXPECT_EQ(CachingAllocator::round_size(1024 * kMiB, 4), 1024 * kMiB);  // a power of two stays
  EXPECT_EQ(CachingAllocator::round_size(1000, 4), 1024);  // ≤ 512 × 4: 512-byte rounding
  EXPECT_EQ(CachingAllocator::round_size(1200 * kMiB, 1), 1200 * kMiB);  // off
  CachingAllocator a(kGiB * 4, AllocatorParams{false, 0, 4, 0, 0});
  ASSERT_TRUE(a.allocate(1, 1200 * kMiB, 0));
  EXPECT_EQ(a.allocated(), 1280 * kMiB);
  EXPECT_EQ(a.reserved(), 1280 * kMiB);
}

// get_free_block: a request below max_split_size never takes an oversize block.
TEST(AllocatorSettings, SmallerRequestsDoNotTakeOversizeBlocks) {
  CachingAllocator plain(kGiB), limited(kGiB, max_split(64 * kMiB));
  for (CachingAllocator* a : {&plain, &limited}) {
    ASSERT_TRUE(a->allocate(1, 100 * kMiB, 0));
    a->free(1);
    ASSERT_TRUE(a->allocate(2, 30 * kMiB, 0));
  }
  EXPECT_EQ(plain.reserved(), 100 * kMiB);           // split from the cached block
  EXPECT_EQ(limited.reserved(), (100 + 30) * kMiB);  // a new segment
}

// get_free_block and should_split: an oversize request takes a block at most 20 MiB larger,
// whole.
TEST(AllocatorSettings, OversizeRequestsTakeCloseBlocksWhole) {
  CachingAllocator a(kGiB, max_split(64 * kMiB));
  ASSERT_TRUE(a.allocate(1, 100 * kMiB, 0));
  a.free(1);
  ASSERT_TRUE(a.allocate(2, 70 * kMiB, 0));  // 100 ≥ 70 + 20: not this block
  EXPECT_EQ(a.reserved(), 170 * kMiB);
  a.free(2);
  ASSERT_TRUE(a.allocate(3, 85 * kMiB, 0));  // 100 < 85 + 20: taken, not split
  EXPECT_EQ(a.allocated(), 100 * kMiB);
  EXPECT_EQ(a.placement(3).size, 100 * kMiB);
}

// release_available_cached_blocks: out of memory, the smallest oversize segment covering the
// request is released and the other cached segments stay (without max_split_size every cached
// segment would go).
TEST(AllocatorSettings, OversizeSegmentsAreReleasedFirst) {
  CachingAllocator a(300 * kMiB, max_split(64 * kMiB));
  ASSERT_TRUE(a.allocate(1, 100 * kMiB, 0));  // segment 0
  ASSERT_TRUE(a.allocate(2, 140 * kMiB, 0));  // segment 1
  ASSERT_TRUE(a.allocate(3, 30 * kMiB, 0));   // segment 2
  a.free(1);
  a.free(2);
  a.free(3);
  // 120 MiB: 140 ≥ 120 + 20 and 100 < 120, so no cached block; 270 + 120 > 300.
  ASSERT_TRUE(a.allocate(4, 120 * kMiB, 0));
  EXPECT_EQ(a.retries(), 1);
  EXPECT_TRUE(a.segment_live(0));
  EXPECT_FALSE(a.segment_live(1));
  EXPECT_TRUE(a.segment_live(2));
  EXPECT_EQ(a.reserved(), (100 + 30 + 120) * kMiB);
  // When the oversize segments add up to less than the request, they are released anyway and
  // then every other cached segment too (the second retry).
  CachingAllocator short_of(200 * kMiB, max_split(64 * kMiB));
  ASSERT_TRUE(short_of.allocate(1, 100 * kMiB, 0));
  ASSERT_TRUE(short_of.allocate(2, 30 * kMiB, 0));
  short_of.free(1);
  short_of.free(2);
  ASSERT_TRUE(short_of.allocate(3, 120 * kMiB, 0));
  EXPECT_EQ(short_of.reserved(), 120 * kMiB);
  EXPECT_EQ(short_of.retries(), 1);
}

// garbage_collect_cached_blocks: above the threshold the cached segments at least as old as the
// average (counted in large-pool searches since they emptied) are freed until the excess is
// reclaimed; younger ones stay.
TEST(AllocatorSettings, GarbageCollectionFreesTheOldestCachedSegments) {
  AllocatorParams gc;
  gc.memory_fraction = 1;
  gc.garbage_collection_threshold = 0.5;
  CachingAllocator a(100 * kMiB, gc);
  ASSERT_TRUE(a.allocate(1, 30 * kMiB, 0));  // search 1
  a.free(1);                                 // segment 0 emptied at 1
  ASSERT_TRUE(a.allocate(2, 40 * kMiB, 0));  // search 2: 30 reserved ≤ 50, a new segment
  a.free(2);                                 // segment 1 emptied at 2
  ASSERT_TRUE(a.allocate(3, 44 * kMiB, 0));  // search 3: 70 > 50; ages 2 and 1, average 1.5
  EXPECT_FALSE(a.segment_live(0));
  EXPECT_TRUE(a.segment_live(1));
  EXPECT_EQ(a.reserved(), (40 + 44) * kMiB);
  EXPECT_EQ(a.retries(), 0);
  // The same steps without collection: everything cached until memory runs out.
  CachingAllocator b(100 * kMiB);
  ASSERT_TRUE(b.allocate(1, 30 * kMiB, 0));
  b.free(1);
  ASSERT_TRUE(b.allocate(2, 40 * kMiB, 0));
  b.free(2);
  ASSERT_TRUE(b.allocate(3, 44 * kMiB, 0));
  EXPECT_EQ(b.retries(), 1);
  EXPECT_EQ(b.reserved(), 44 * kMiB);
}

// Expandable segments split any remainder of at least 512 B, in the large pool too
// (should_split).
TEST(AllocatorSettings, ExpandableSegmentsSplitSmallRemainders) {
  CachingAllocator a(kGiB, AllocatorParams{true, 0, 0, 0, 0});
  ASSERT_TRUE(a.allocate(1, 3 * kMiB, 0));  // 4 MiB mapped: a 1 MiB free remainder
  EXPECT_EQ(a.allocated(), 3 * kMiB);
  ASSERT_TRUE(a.allocate(2, 2 * kMiB - kMiB / 2, 0));
  EXPECT_EQ(a.allocated(), 3 * kMiB + 2 * kMiB - kMiB / 2);
  CachingAllocator classic(kGiB);
  ASSERT_TRUE(classic.allocate(1, 19 * kMiB + kMiB / 2, 0));  // 20 MiB segment, 0.5 MiB left
  EXPECT_EQ(classic.allocated(), 20 * kMiB);  // a remainder ≤ 1 MiB stays in the block
}

TEST(AllocatorSettings, ScenarioKeysSetThemAndRefuseWhatPyTorchRefuses) {
  const std::string base =
      "model: {preset: llama3.1-8b, layers: 2}\n"
      "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n";
  const Scenario s = scenario_from_text(
      base +
          "allocator: {max_split_size_mb: 256, roundup_power2_divisions: 8, memory_fraction: "
          "0.9, garbage_collection_threshold: 0.7}\n",
      {});
  EXPECT_EQ(s.allocator.max_split_size, 256 * kMiB);
  EXPECT_EQ(s.allocator.roundup_power2_divisions, 8);
  EXPECT_DOUBLE_EQ(s.allocator.memory_fraction, 0.9);
  EXPECT_DOUBLE_EQ(s.allocator.garbage_collection_threshold, 0.7);
  for (const char* bad : {"{max_split_size_mb: 20}", "{roundup_power2_divisions: 3}",
                          "{garbage_collection_threshold: 0.7}", "{memory_fraction: 0}",
                          "{memory_fraction: 0.5, garbage_collection_threshold: 1}"}) {
    EXPECT_THROW((void)scenario_from_text(base + "allocator: " + bad + "\n", {}), ValidationError)
        << bad;
  }
}

}  // namespace
}  // namespace shardscope
