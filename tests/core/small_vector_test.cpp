// SmallVector behaves as std::vector under random pushes, copies, moves, assignments and clears,
// across the inline/heap boundary (the inline bytes double as the heap pointer and capacity).
#include "shardscope/core/small_vector.hpp"

#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

namespace shardscope {
namespace {

template <typename V, typename T>
void expect_same(const V& v, const std::vector<T>& ref, int step) {
  ASSERT_EQ(v.size(), ref.size()) << "step " << step;
  ASSERT_EQ(v.empty(), ref.empty()) << "step " << step;
  ASSERT_TRUE(std::equal(v.begin(), v.end(), ref.begin(), ref.end())) << "step " << step;
  for (std::size_t i = 0; i < ref.size(); ++i)
    ASSERT_EQ(v[i], ref[i]) << "step " << step << ", index " << i;
  if (!ref.empty()) {
    ASSERT_EQ(v.front(), ref.front());
    ASSERT_EQ(v.back(), ref.back());
  }
}

template <typename T, std::uint32_t N>
void run_random_operations(std::uint64_t seed) {
  using V = SmallVector<T, N>;
  std::mt19937_64 rng(seed);
  std::vector<V> vs(4);
  std::vector<std::vector<T>> refs(4);
  for (int step = 0; step < 20000; ++step) {
    const std::size_t a = rng() % vs.size(), b = rng() % vs.size();
    switch (rng() % 10) {
      case 0:
        vs[a] = vs[b];
        refs[a] = refs[b];
        break;  // copy-assign, self included
      case 1:   // move-assign; a moved-from SmallVector is empty (a std::vector's state is
                // unspecified)
        if (a == b) break;
        vs[a] = std::move(vs[b]);
        refs[a] = std::move(refs[b]);
        refs[b].clear();
        break;
      case 2: {
        V copy(vs[b]);
        vs[a] = std::move(copy);
        refs[a] = refs[b];
        break;
      }
      case 3:
        if (rng() % 4 == 0) {
          vs[a].clear();
          refs[a].clear();
        }
        break;
      case 4: {
        const std::vector<T> values(rng() % (std::size_t{3} * N), static_cast<T>(step));
        vs[a] = values;
        refs[a] = values;
        break;
      }
      default: {
        const T v = static_cast<T>(rng());
        vs[a].push_back(v);
        refs[a].push_back(v);
        break;
      }
    }
    for (std::size_t k = 0; k < vs.size(); ++k) expect_same(vs[k], refs[k], step);
    ASSERT_EQ(vs[a] == vs[b], refs[a] == refs[b]) << "step " << step;
  }
}

TEST(SmallVector, BehavesAsAVectorUnderRandomOperations) {
  run_random_operations<std::int32_t, 5>(1);  // IdList: five ids inline
  run_random_operations<std::int32_t, 3>(2);  // the fewest int32 that hold a pointer and a capacity
  run_random_operations<std::int64_t, 4>(3);  // WorkspaceSizes
}

TEST(SmallVector, KeepsItsInlineElementsInTwentyFourBytes) {
  EXPECT_EQ(sizeof(SmallVector<std::int32_t, 5>), 24U);
  SmallVector<std::int32_t, 5> v{1, 2, 3, 4, 5};
  const std::int32_t* inline_data = v.data();
  EXPECT_EQ(static_cast<const void*>(inline_data),
            static_cast<const void*>(&v));  // inline: no heap block
  v.push_back(6);                           // the sixth goes to the heap, the first five with it
  EXPECT_NE(static_cast<const void*>(v.data()), static_cast<const void*>(&v));
  EXPECT_EQ(v, (SmallVector<std::int32_t, 5>{1, 2, 3, 4, 5, 6}));
  v.clear();
  EXPECT_TRUE(v.empty());
  v.push_back(7);  // a cleared vector keeps its heap block
  EXPECT_EQ(v.size(), 1U);
  EXPECT_EQ(v.front(), 7);
}

}  // namespace
}  // namespace shardscope
