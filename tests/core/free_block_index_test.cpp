// FreeBlockIndex answers best_fit exactly as PyTorch's ordered set of free blocks per pool does
// (std::set ordered by size, then address; lower_bound of the request), under any mix of inserts
// and erases in several pools. Checked against one std::set per pool on random operations.
#include "shardscope/core/free_block_index.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace shardscope {
namespace {

using Key = std::tuple<Bytes, std::int64_t, int>;  // size, address, block

int reference_fit(const std::set<Key>& set, Bytes size) {
  const auto it = set.lower_bound(Key{size, std::numeric_limits<std::int64_t>::min(), 0});
  return it == set.end() ? -1 : std::get<2>(*it);
}

TEST(FreeBlockIndex, BestFitMatchesAnOrderedSetPerPoolUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(7);
  // Sizes cluster on a few values (as activation and all-gather blocks do) and spread over many
  // size classes, from 512 B to 64 GiB.
  const std::vector<Bytes> common{512, 1536, 2 * kMiB, 20 * kMiB, 436 * kMiB, 1 * kGiB};
  auto random_size = [&]() -> Bytes {
    if (rng() % 2) return common[rng() % common.size()];
    const int shift = 9 + static_cast<int>(rng() % 27);
    return ((static_cast<Bytes>(rng() % (1ULL << 20)) << shift) >> 20) / 512 * 512 + 512;
  };
  constexpr int kPools = 3;
  constexpr int kBlockIds =
      600;  // ids are reused once unlisted, as the allocator reuses block slots
  FreeBlockIndex index;
  std::vector<std::set<Key>> reference(kPools);
  for (int p = 0; p < kPools; ++p) ASSERT_EQ(index.add_pool(), p);
  struct Listed {
    int pool = -1;  // -1: not listed
    Bytes size = 0;
    std::int64_t address = 0;
  };
  std::vector<Listed> state(kBlockIds);
  for (int step = 0; step < 30000; ++step) {
    const int block = static_cast<int>(rng() % kBlockIds);
    Listed& s = state[static_cast<std::size_t>(block)];
    ASSERT_EQ(index.listed(block), s.pool >= 0) << "step " << step;
    if (s.pool < 0) {
      s = {static_cast<int>(rng() % kPools), random_size(),
           static_cast<std::int64_t>(rng() % (1ULL << 50))};
      index.insert(s.pool, block, s.size, s.address);
      reference[static_cast<std::size_t>(s.pool)].insert({s.size, s.address, block});
    } else {
      index.erase(block);
      reference[static_cast<std::size_t>(s.pool)].erase({s.size, s.address, block});
      s.pool = -1;
    }
    const Bytes request = random_size();
    for (int p = 0; p < kPools; ++p) {
      ASSERT_EQ(index.best_fit(p, request),
                reference_fit(reference[static_cast<std::size_t>(p)], request))
          << "step " << step << ", pool " << p << ", request " << request;
    }
  }
}

TEST(FreeBlockIndex, EqualSizesGoToTheLowestAddress) {
  FreeBlockIndex index;
  const int pool = index.add_pool();
  index.insert(pool, 0, 4096, 300);
  index.insert(pool, 1, 4096, 100);
  index.insert(pool, 2, 8192, 50);
  index.insert(pool, 3, 4096, 200);
  EXPECT_EQ(index.best_fit(pool, 4096), 1);
  EXPECT_EQ(index.best_fit(pool, 4097), 2);  // the next class holds the only block big enough
  EXPECT_EQ(index.best_fit(pool, 8193), -1);
}

TEST(FreeBlockIndex, PoolsDoNotShareBlocksAndErasingAnUnlistedBlockChangesNothing) {
  FreeBlockIndex index;
  const int a = index.add_pool(), b = index.add_pool();
  index.insert(a, 0, 4096, 0);
  EXPECT_EQ(index.best_fit(b, 512), -1);
  index.erase(7);  // never listed
  index.erase(0);
  index.erase(0);  // no longer listed
  EXPECT_FALSE(index.listed(0));
  EXPECT_EQ(index.best_fit(a, 512), -1);
  index.insert(b, 0, 4096, 0);  // a slot may be listed again, in another pool
  EXPECT_EQ(index.best_fit(b, 512), 0);
  EXPECT_EQ(index.best_fit(a, 512), -1);
}

}  // namespace
}  // namespace shardscope
