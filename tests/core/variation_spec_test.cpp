// The variation.* scenario keys: factor lists as files spell them, what the reader refuses, and
// how a scenario's slow nodes, ranks and sigma draws become each rank's GPU time factor.
#include "shardscope/core/variation_spec.hpp"

#include <gtest/gtest.h>

#include "scenario_test_util.hpp"
#include "shardscope/core/rank_speed.hpp"

namespace shardscope {
namespace {

using testing::has_problem;
using testing::problems_of;

constexpr const char* kTwoNodes =
    "model: {preset: tiny}\ncluster: {preset: h100-sxm-80gb, nodes: 2}\n";

TEST(VariationSpec, FactorListsParseAndPrintBack) {
  std::string bad;
  const auto f = parse_factor_list("3:1.5, 7:1.2 3:2", &bad);
  EXPECT_TRUE(bad.empty());
  EXPECT_EQ(f, (std::map<int, double>{{3, 2.0}, {7, 1.2}}));  // a later item wins
  EXPECT_EQ(factor_list_text(f), "3:2, 7:1.2");
  EXPECT_EQ(parse_factor_list(factor_list_text(f)), f);
  parse_factor_list("1:fast, 2, -1:2, 4:0, 5:101, 6:1.1", &bad);
  EXPECT_EQ(bad, "1:fast, 2, -1:2, 4:0, 5:101");
  EXPECT_FALSE(parse_factor_item("3:1.5x"));
  EXPECT_EQ(parse_factor_item("0:100"), (std::pair{0, 100.0}));
}

TEST(VariationSpec, AScenarioReadsEveryKey) {
  const Scenario s = scenario_from_text(std::string(kTwoNodes) +
                                        "variation: {gpu_sigma: 0.02, slow_ranks: '9:1.5', "
                                        "slow_nodes: '1:1.1', slow_links: '0:2', jitter: 0.05, "
                                        "issue_delay: 20us, seed: 42}\n");
  const VariationSpec& v = s.variation;
  EXPECT_TRUE(v.any());
  EXPECT_EQ(v.gpu_sigma, 0.02);
  EXPECT_EQ(v.slow_ranks, (std::map<int, double>{{9, 1.5}}));
  EXPECT_EQ(v.slow_nodes, (std::map<int, double>{{1, 1.1}}));
  EXPECT_EQ(v.slow_links, (std::map<int, double>{{0, 2.0}}));
  EXPECT_EQ(v.jitter, 0.05);
  EXPECT_EQ(v.issue_delay, 20 * kNsPerUs);
  EXPECT_EQ(v.seed, 42U);
  EXPECT_FALSE(scenario_from_text(kTwoNodes).variation.any());
}

TEST(VariationSpec, TheReaderNamesEveryBadKey) {
  const auto p = problems_of(std::string(kTwoNodes) +
                             "variation: {slow_ranks: '16:1.1', slow_nodes: '1:fast', "
                             "slow_links: '2:2', jitter: 2, issue_delay: 2s, gpu_sigma: -1}\n");
  EXPECT_TRUE(has_problem(p, "variation.slow_ranks", "rank 16 is not in the cluster"));
  EXPECT_TRUE(has_problem(p, "variation.slow_nodes", "'1:fast' is not NODE:FACTOR"));
  EXPECT_TRUE(has_problem(p, "variation.slow_links", "node 2 is not in the cluster"));
  EXPECT_TRUE(has_problem(p, "variation.jitter"));
  EXPECT_TRUE(has_problem(p, "variation.issue_delay"));
  EXPECT_TRUE(has_problem(p, "variation.gpu_sigma"));
  EXPECT_TRUE(has_problem(problems_of(std::string(kTwoNodes) + "variation: {slow: '1:2'}\n"),
                          "variation.slow"));
}

TEST(VariationSpec, GpuTimeFactorsNameNodesThenRanksTimesTheirDraws) {
  VariationSpec v;
  v.slow_nodes = {{1, 1.2}};
  v.slow_ranks = {{9, 1.5}};
  EXPECT_EQ(
      gpu_time_factors(v, 16, 8),
      (std::map<int, double>{
          {8, 1.2}, {9, 1.5}, {10, 1.2}, {11, 1.2}, {12, 1.2}, {13, 1.2}, {14, 1.2}, {15, 1.2}}));
  v.gpu_sigma = 0.03;
  v.seed = 3;
  const auto f = gpu_time_factors(v, 16, 8);
  const auto draws = gpu_speed_draws(16, 0.03, 3);
  ASSERT_EQ(f.size(), 16U);
  EXPECT_DOUBLE_EQ(f.at(0), draws[0]);
  EXPECT_DOUBLE_EQ(f.at(8), draws[8] * 1.2);
  EXPECT_DOUBLE_EQ(f.at(9), draws[9] * 1.5);
}

}  // namespace
}  // namespace shardscope
