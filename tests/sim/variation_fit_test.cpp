// The variation fitted back from every rank's timeline of a run with a known variation: a slow
// rank, jitter and issue delays drawn by the per-rank replay, recovered within their intervals.
#include "shardscope/sim/variation_fit.hpp"

#include <gtest/gtest.h>

#include "shardscope/core/error.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/rank_simulation.hpp"

namespace shardscope::sim {
namespace {

struct RankRun {
  Scenario scenario;
  Schedule schedule;
  std::vector<Timeline> ranks;
};

RankRun replayed(const std::string& variation) {
  RankRun run;
  run.scenario = scenario_from_text(
      "model: {preset: llama3.1-8b, layers: 4}\n"
      "cluster: {preset: h100-sxm-80gb}\n"
      "training: {seq_len: 2048, iterations: 3}\n"
      "variation: " +
      variation + "\n");
  run.schedule = lower(run.scenario);
  const RankSimulation r =
      simulate_ranks(run.scenario, run.schedule,
                     rank_variation(run.scenario.variation, run.schedule.world_size, 8));
  for (const RankClass& c : r.classes) {
    run.ranks.push_back(c.result.timeline);
    run.ranks.back().provenance.rank = c.ranks.front();
  }
  return run;
}

TEST(VariationFit, RecoversASlowRankJitterAndIssueDelays) {
  const RankRun run = replayed("{slow_ranks: '3:1.3', jitter: 0.05, issue_delay: 20us, seed: 5}");
  ASSERT_EQ(run.ranks.size(), 8U);
  const VariationFit fit = fit_variation(run.scenario, run.schedule, run.ranks);
  EXPECT_EQ(fit.ranks, 8);
  EXPECT_EQ(fit.slow_ranks.size(), 1U);
  EXPECT_TRUE(fit.slow_ranks.contains(3));
  // 156 ops of 8 ranks: the factors carry their jitter's mean over the ops (the intervals) and
  // what collectives take from compute beside them, which differs rank to rank (not separated out).
  const FittedValue& slow = fit.gpu_time_factor.at(3);
  EXPECT_NEAR(slow.value, 1.3, 0.05);
  EXPECT_LE(slow.low, 1.3);
  EXPECT_GE(slow.high, slow.value);
  EXPECT_NEAR(fit.gpu_time_factor.at(0).value, 1.0, 0.04);
  EXPECT_NEAR(fit.jitter.value, 0.05, 0.01);
  EXPECT_LT(fit.gpu_sigma.value, 0.03);  // the other ranks differ only by their jitter's mean
  ASSERT_TRUE(fit.issue_delay_ns);
  EXPECT_NEAR(fit.issue_delay_ns->value, 20'000, 4'000);
  EXPECT_LE(fit.issue_delay_ns->low, 20'000);
  EXPECT_GE(fit.issue_delay_ns->high, 20'000 * 0.9);
}

TEST(VariationFit, ASymmetricRunFitsNoVariation) {
  const RankRun run = replayed("{gpu_sigma: 0.0, jitter: 0.0001, seed: 2}");  // ranks apart, ~alike
  const VariationFit fit = fit_variation(run.scenario, run.schedule, run.ranks);
  EXPECT_TRUE(fit.slow_ranks.empty());
  EXPECT_LT(fit.jitter.value, 0.01);  // the floor: compute slowed by overlapping collectives
  EXPECT_LT(fit.gpu_sigma.value, 0.001);
  ASSERT_TRUE(fit.issue_delay_ns);
  EXPECT_LT(fit.issue_delay_ns->value, 1'000);
}

TEST(VariationFit, OneRankOrARankTwiceIsRefused) {
  const RankRun run = replayed("{jitter: 0.01}");
  EXPECT_THROW(fit_variation(run.scenario, run.schedule, {run.ranks[0]}), ValidationError);
  EXPECT_THROW(fit_variation(run.scenario, run.schedule, {run.ranks[0], run.ranks[0]}),
               ValidationError);
}

}  // namespace
}  // namespace shardscope::sim
