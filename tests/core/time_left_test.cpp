#include "shardscope/core/time_left.hpp"

#include <gtest/gtest.h>

namespace shardscope {
namespace {

TEST(TimeLeft, SaysNothingUntilTheTotalIsTrustedAndWorkFollows) {
  TimeLeft t;
  EXPECT_FALSE(t.update(1.0, 5, 1000, false));  // a worst case: not extrapolated
  EXPECT_FALSE(t.update(2.0, 10, 70, true));    // the first trusted total: the rate starts here
  EXPECT_FALSE(t.update(2.5, 10, 70, true));    // no work since: no rate yet
}

TEST(TimeLeft, ExtrapolatesTheRateSinceTheTotalWasTrusted) {
  TimeLeft t;
  ASSERT_FALSE(t.update(0.5, 4, 900, false));  // set-up at another rate: not part of the rate
  ASSERT_FALSE(t.update(2.0, 10, 70, true));
  // 20 units in 2 s since: 10 units/s; 40 units left: 4 s.
  EXPECT_DOUBLE_EQ(*t.update(4.0, 30, 70, true), 4.0);
  // The total moves; the rate is still since the first trusted update: 40 units in 4 s.
  EXPECT_DOUBLE_EQ(*t.update(6.0, 50, 60, true), 1.0);
}

TEST(TimeLeft, SaysNothingOnceTheWorkIsDone) {
  TimeLeft t;
  ASSERT_FALSE(t.update(1.0, 10, 40, true));
  EXPECT_FALSE(t.update(3.0, 40, 40, true));
}

TEST(TimeLeft, ThePhraseWaitsAFewSecondsThenSaysTheTimeOrThatItIsEstimating) {
  EXPECT_EQ(time_left_phrase(kSayTimeLeftAfterS - 0.5, true, 40.0), "");
  EXPECT_EQ(time_left_phrase(kSayTimeLeftAfterS, true, 40.0), "about 40 s left");
  EXPECT_EQ(time_left_phrase(10, true, 150.0), "about 2 min left");
  EXPECT_EQ(time_left_phrase(10, false, std::nullopt), "estimating the time left");
  EXPECT_EQ(time_left_phrase(10, true, std::nullopt), "");  // trusted, no rate yet
}

}  // namespace
}  // namespace shardscope
