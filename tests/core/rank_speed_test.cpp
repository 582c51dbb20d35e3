// GPU speed drawn per rank: none without a sigma, the same draws for the same seed, and draws
// whose mean and spread are the sigma asked for.
#include "shardscope/core/rank_speed.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace shardscope {
namespace {

TEST(RankSpeed, NoSigmaDrawsNothing) {
  EXPECT_TRUE(gpu_speed_draws(64, 0.0, 1).empty());
}

TEST(RankSpeed, TheSameSeedDrawsTheSameFactors) {
  EXPECT_EQ(gpu_speed_draws(64, 0.03, 5), gpu_speed_draws(64, 0.03, 5));
  EXPECT_NE(gpu_speed_draws(64, 0.03, 5), gpu_speed_draws(64, 0.03, 6));
  // A rank's draw does not depend on the world's size: rank order from one stream.
  const auto small = gpu_speed_draws(8, 0.03, 5), large = gpu_speed_draws(64, 0.03, 5);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), large.begin()));
}

TEST(RankSpeed, DrawsHaveTheAskedSpread) {
  const auto f = gpu_speed_draws(20'000, 0.05, 1);
  double mean = 0;
  for (double x : f) mean += x;
  mean /= static_cast<double>(f.size());
  double var = 0;
  for (double x : f) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / static_cast<double>(f.size() - 1));
  EXPECT_NEAR(mean, 1.0, 0.002);  // 4 standard errors of the mean (0.05 / sqrt(20,000))
  EXPECT_NEAR(sd, 0.05, 0.002);
  for (double x : f) EXPECT_GE(x, 0.1);
}

}  // namespace
}  // namespace shardscope
