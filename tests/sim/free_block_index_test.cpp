// FreeBlockIndex answers best_fit exactly as PyTorch's ordered set of free blocks does
// (std::set ordered by size, then address; lower_bound of the request), under any mix of inserts
// and erases. Checked against a std::set on random operations.
#include "shardscope/sim/free_block_index.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>
#include <tuple>
#include <vector>

namespace shardscope::sim {
namespace {

using Key = std::tuple<Bytes, std::int64_t, int>;  // size, address, block

int reference_fit(const std::set<Key>& set, Bytes size) {
  const auto it = set.lower_bound(Key{size, std::numeric_limits<std::int64_t>::min(), 0});
  return it == set.end() ? -1 : std::get<2>(*it);
}

TEST(FreeBlockIndex, BestFitMatchesAnOrderedSetUnderRandomInsertsAndErases) {
  std::mt19937_64 rng(7);
  // Sizes cluster on a few values (as activation and all-gather blocks do) and spread over many
  // size classes, from 512 B to 64 GiB.
  const std::vector<Bytes> common{512, 1536, 2 * kMiB, 20 * kMiB, 436 * kMiB, 1 * kGiB};
  auto random_size = [&]() -> Bytes {
    if (rng() % 2) return common[rng() % common.size()];
    const int shift = 9 + static_cast<int>(rng() % 27);
    return ((static_cast<Bytes>(rng() % (1ULL << 20)) << shift) >> 20) / 512 * 512 + 512;
  };
  FreeBlockIndex index;
  std::set<Key> reference;
  std::vector<FreeBlockIndex::Handle> handle_of;  // by block id
  std::vector<FreeBlockIndex::Entry> entry_of;
  std::vector<int> listed;
  for (int step = 0; step < 20000; ++step) {
    if (listed.empty() || rng() % 3 != 0) {
      const int block = static_cast<int>(handle_of.size());
      const FreeBlockIndex::Entry e{random_size(), static_cast<std::int64_t>(rng() % (1ULL << 50)), block};
      handle_of.push_back(index.insert(e));
      entry_of.push_back(e);
      reference.insert({e.size, e.address, e.block});
      listed.push_back(block);
    } else {
      const std::size_t k = rng() % listed.size();
      const int block = listed[k];
      listed[k] = listed.back();
      listed.pop_back();
      index.erase(handle_of[static_cast<std::size_t>(block)]);
      const auto& e = entry_of[static_cast<std::size_t>(block)];
      reference.erase({e.size, e.address, e.block});
    }
    const Bytes request = random_size();
    ASSERT_EQ(index.best_fit(request), reference_fit(reference, request)) << "step " << step << ", request " << request;
  }
}

TEST(FreeBlockIndex, EqualSizesGoToTheLowestAddress) {
  FreeBlockIndex index;
  index.insert({4096, 300, 0});
  index.insert({4096, 100, 1});
  index.insert({8192, 50, 2});
  index.insert({4096, 200, 3});
  EXPECT_EQ(index.best_fit(4096), 1);
  EXPECT_EQ(index.best_fit(4097), 2);  // the next class holds the only block big enough
  EXPECT_EQ(index.best_fit(8193), -1);
}

}  // namespace
}  // namespace shardscope::sim
