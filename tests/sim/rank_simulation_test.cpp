// Every rank replayed: closed forms on hand-built schedules, the classes ranks fold into, and a
// lowered job with one slow GPU against its symmetric replay.
#include "shardscope/sim/rank_simulation.hpp"

#include <gtest/gtest.h>

#include "sim_test_util.hpp"

namespace shardscope::sim {
namespace {

constexpr TimeNs kMs = kNsPerMs;

Scenario two_nodes() {
  return scenario_from_text(
      "model: {preset: tiny}\ncluster: {preset: h100-sxm-80gb, nodes: 2, "
      "cpu: {launch_overhead: 0ns, fsdp_hook_overhead: 0ns}}\n");
}

// compute (fixed) → collective on `comm` (fixed) → compute (fixed), on a world of `world`.
Schedule chain(int world, std::vector<Communicator> comms, TimeNs compute, TimeNs collective,
               CommId comm = 0) {
  Schedule s;
  s.name = "chain";
  s.world_size = world;
  s.streams = {{"cpu", StreamKind::cpu},
               {"compute", StreamKind::compute},
               {"comm", StreamKind::communication}};
  s.communicators = std::move(comms);
  const auto add = [&](OpKind kind, StreamId stream, CommId c, TimeNs t,
                       const std::vector<OpId>& deps) {
    Op op;
    op.kind = kind;
    op.stream = stream;
    op.comm = c;
    op.fixed_time = t;
    op.deps = deps;
    s.ops.push_back(op);
    return static_cast<OpId>(s.ops.size() - 1);
  };
  const OpId f = add(OpKind::forward, 1, kNone, compute, {});
  const OpId g = add(OpKind::all_gather, 2, comm, collective, {f});
  add(OpKind::forward, 1, kNone, compute, {g});
  return s;
}

TEST(Engine, RanksOnOneClockStartACollectiveWhenTheLastIsReady) {
  const Scenario sc = two_nodes();
  const CostModel costs(sc);
  const Schedule s = chain(8, {{"shard", 8, 1}}, 10 * kMs, 2 * kMs);
  SimOptions fast, slow;
  slow.gpu_time_factor = 1.5;
  const auto r = simulate_together(s, costs, {fast, slow}, {{0}, {0}});
  ASSERT_EQ(r.size(), 2U);
  EXPECT_EQ(r[0].ops[1].ready, 10 * kMs);
  EXPECT_EQ(r[0].ops[1].start, 15 * kMs);
  EXPECT_EQ(r[0].ops[1].binding, Binding::peers);
  EXPECT_EQ(r[1].ops[1].ready, 15 * kMs);
  EXPECT_EQ(r[1].ops[1].start, 15 * kMs);
  EXPECT_EQ(r[1].ops[1].binding, Binding::dependency);
  EXPECT_EQ(r[0].ops[2].start, 17 * kMs);
  EXPECT_EQ(r[0].ops[2].ready, r[0].ops[2].start);
  // Two instances of one communicator: neither waits for the other.
  const auto apart = simulate_together(s, costs, {fast, slow}, {{0}, {1}});
  EXPECT_EQ(apart[0].ops[1].start, 10 * kMs);
  EXPECT_EQ(apart[1].ops[1].start, 15 * kMs);
}

TEST(Engine, ASlowGpuStretchesItsGpuOpsAndNotItsCollectives) {
  const Scenario sc = two_nodes();
  const CostModel costs(sc);
  SimOptions o;
  o.gpu_time_factor = 1.5;
  const auto r = simulate(chain(8, {{"shard", 8, 1}}, 10 * kMs, 2 * kMs), costs, o);
  EXPECT_EQ(r.ops[0].end, 15 * kMs);
  EXPECT_EQ(r.ops[1].end - r.ops[1].start, 2 * kMs);
  EXPECT_EQ(r.ops[2].end, 32 * kMs);
}

TEST(RankSimulation, EveryRankWaitsAtTheCollectiveForTheSlowOne) {
  const Scenario sc = two_nodes();
  const Schedule s = chain(8, {{"shard", 8, 1}}, 10 * kMs, 2 * kMs);
  const RankSimulation r = simulate_ranks(sc, s, {{{3, 1.5}}});
  ASSERT_EQ(r.classes.size(), 2U);
  EXPECT_EQ(r.classes[0].ranks, (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(r.classes[1].ranks, (std::vector<int>{3}));
  const OpRecord& fast = r.classes[0].result.ops[1];
  const OpRecord& slow = r.classes[1].result.ops[1];
  EXPECT_EQ(fast.ready, 10 * kMs);
  EXPECT_EQ(fast.start, 15 * kMs);  // when rank 3 is ready
  EXPECT_EQ(slow.start, 15 * kMs);
  EXPECT_EQ(r.classes[0].waited.at("all_gather"), 5 * kMs);
  EXPECT_EQ(r.classes[0].waited_total, 5 * kMs);
  EXPECT_EQ(r.classes[1].waited_total, 0);
  EXPECT_EQ(r.classes[0].result.ops[2].end, 27 * kMs);
  EXPECT_EQ(r.classes[1].result.ops[2].end, 32 * kMs);
  EXPECT_EQ(r.straggler, 1U);
  EXPECT_EQ(r.classes[1].arrived_last, 1);
  EXPECT_EQ(r.classes[0].arrived_last, 0);
}

TEST(RankSimulation, HsdpFoldsRanksByWhomTheyWaitFor) {
  // 2 replicas × 8: rank 3's shard group waits for it at every all-gather, rank 11 (its replica
  // peer) at the all-reduce; ranks 8-10 and 12-15 wait for it through rank 11 only.
  const Scenario sc = two_nodes();
  Schedule s = chain(16, {{"shard", 8, 1}, {"replicate", 2, 2}}, 10 * kMs, 2 * kMs, 1);
  const RankSimulation r = simulate_ranks(sc, s, {{{3, 1.2}}});
  ASSERT_EQ(r.classes.size(), 4U);
  EXPECT_EQ(r.classes[0].ranks, (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(r.classes[1].ranks, (std::vector<int>{3}));
  EXPECT_EQ(r.classes[2].ranks, (std::vector<int>{8, 9, 10, 12, 13, 14, 15}));
  EXPECT_EQ(r.classes[3].ranks, (std::vector<int>{11}));
  // The collective here is the replicate one: only rank 11 waits for rank 3 (12 - 10 ms).
  EXPECT_EQ(r.classes[3].waited_total, 2 * kMs);
  EXPECT_EQ(r.classes[0].waited_total, 0);
  EXPECT_EQ(r.classes[2].waited_total, 0);
  EXPECT_EQ(rank_ranges(r.classes[2].ranks), "8-10, 12-15");
}

TEST(RankSimulation, ASymmetricWorldIsOneReplayOfTheSymmetricSimulation) {
  const auto run = testing::run_file(SHARDSCOPE_EXAMPLES_DIR "/llama3-8b-h100x8.yaml",
                                     {"model.layers=4", "training.iterations=2"});
  const RankSimulation r = simulate_ranks(run.scenario, run.schedule, {});
  ASSERT_EQ(r.classes.size(), 1U);
  EXPECT_EQ(r.classes[0].ranks.size(), 8U);
  EXPECT_EQ(r.step_time, run.summary.step_time);
  ASSERT_EQ(r.classes[0].result.ops.size(), run.result.ops.size());
  for (std::size_t i = 0; i < run.result.ops.size(); ++i)
    EXPECT_EQ(r.classes[0].result.ops[i].end, run.result.ops[i].end) << "op " << i;
  // Every rank equally slow is one class too: the world is symmetric again.
  RankVariation all;
  for (int rank = 0; rank < 8; ++rank) all.gpu_time_factor[rank] = 1.1;
  EXPECT_EQ(simulate_ranks(run.scenario, run.schedule, all).classes.size(), 1U);
}

TEST(RankSimulation, OneSlowGpuSetsTheJobsStepAndTheOthersWaitForIt) {
  const auto run = testing::run_file(SHARDSCOPE_EXAMPLES_DIR "/llama3-8b-h100x8.yaml",
                                     {"model.layers=4", "training.iterations=2"});
  const RankSimulation r = simulate_ranks(run.scenario, run.schedule, {{{5, 1.1}}});
  ASSERT_EQ(r.classes.size(), 2U);
  EXPECT_EQ(r.classes[r.straggler].ranks, (std::vector<int>{5}));
  EXPECT_GT(r.classes[0].waited_total, 0);
  // Slower than the symmetric job, and no slower than every rank at rank 5's speed.
  RankVariation all;
  for (int rank = 0; rank < 8; ++rank) all.gpu_time_factor[rank] = 1.1;
  const TimeNs all_slow = simulate_ranks(run.scenario, run.schedule, all).step_time;
  EXPECT_GT(r.step_time, run.summary.step_time);
  EXPECT_LE(r.step_time, all_slow);
}

TEST(RankSimulation, JitterMakesEveryRankItsOwnAndTheSameSeedTheSameRun) {
  const auto run = testing::run_file(SHARDSCOPE_EXAMPLES_DIR "/llama3-8b-h100x8.yaml",
                                     {"model.layers=4", "training.iterations=6"});
  RankVariation v;
  v.jitter = 0.05;
  v.seed = 7;
  const RankSimulation a = simulate_ranks(run.scenario, run.schedule, v);
  ASSERT_EQ(a.classes.size(), 8U);
  EXPECT_EQ(a.iteration_times.size(), 5U);  // after the first
  const RankSimulation b = simulate_ranks(run.scenario, run.schedule, v);
  EXPECT_EQ(a.step_time, b.step_time);
  EXPECT_EQ(a.iteration_times, b.iteration_times);
  v.seed = 8;
  EXPECT_NE(simulate_ranks(run.scenario, run.schedule, v).iteration_times, a.iteration_times);
  // Every collective waits for its slowest draw: the job is slower than its symmetric replay, and
  // its percentiles are ordered.
  EXPECT_GT(a.step_time, run.summary.step_time);
  EXPECT_LE(percentile(a.iteration_times, 50), percentile(a.iteration_times, 95));
  EXPECT_LE(percentile(a.iteration_times, 95), percentile(a.iteration_times, 100));
}

TEST(RankSimulation, PercentilesAreNearestRank) {
  const std::vector<TimeNs> t{50, 10, 40, 20, 30};
  EXPECT_EQ(percentile(t, 50), 30);
  EXPECT_EQ(percentile(t, 20), 10);
  EXPECT_EQ(percentile(t, 21), 20);
  EXPECT_EQ(percentile(t, 95), 50);
  EXPECT_EQ(percentile(t, 100), 50);
  EXPECT_EQ(percentile({}, 50), 0);
}

TEST(RankSimulation, ARankOutsideTheWorldOrABadFactorIsAnError) {
  const Scenario sc = two_nodes();
  const Schedule s = chain(8, {{"shard", 8, 1}}, 10 * kMs, 2 * kMs);
  EXPECT_THROW(simulate_ranks(sc, s, {{{8, 1.1}}}), Error);
  EXPECT_THROW(simulate_ranks(sc, s, {{{1, 0.0}}}), Error);
  EXPECT_THROW(simulate_ranks(sc, s, {{{1, 101.0}}}), Error);
  EXPECT_THROW(simulate_ranks(sc, s, {.jitter = 1.5}), Error);
  EXPECT_THROW(simulate_ranks(sc, s, {.link_time_factor = {{2, 2.0}}}), Error);  // 1 node
  EXPECT_THROW(simulate_ranks(sc, s, {.link_time_factor = {{0, 0.0}}}), Error);
  EXPECT_THROW(simulate_ranks(sc, s, {.issue_delay = -1}), Error);
}

// The chain's collective priced by the model (latency + bytes over the bus bandwidth).
Schedule chain_with_modelled_collective(int world, std::vector<Communicator> comms) {
  Schedule s = chain(world, std::move(comms), 10 * kMs, 0);
  s.ops[1].fixed_time.reset();
  s.ops[1].bytes = 256 * kMiB;
  return s;
}

TEST(Engine, ASlowLinkStretchesTheBandwidthPartOfACollectiveNotItsLatency) {
  const Scenario sc = two_nodes();
  const CostModel costs(sc);
  const Schedule s = chain_with_modelled_collective(16, {{"shard", 16, 2}});
  const OpCost c = costs.cost(s, s.ops[1]);
  ASSERT_GT(c.latency, 0);
  ASSERT_GT(c.duration, 4 * c.latency);
  SimOptions o;
  o.comm_time_factors = {2.0};
  const auto r = simulate(s, costs, o);
  EXPECT_EQ(r.ops[1].end - r.ops[1].start, c.latency + 2 * (c.duration - c.latency));
  EXPECT_EQ(r.ops[0].end, 10 * kMs);  // compute is the GPU's
}

TEST(RankSimulation, ASlowLinkSlowsEveryCollectiveAcrossItsNodeAndNoneInsideANode) {
  const Scenario sc = two_nodes();
  const CostModel costs(sc);
  // FULL_SHARD over both nodes: every rank's all-gather crosses node 1's links.
  const Schedule across = chain_with_modelled_collective(16, {{"shard", 16, 2}});
  const OpCost c = costs.cost(across, across.ops[1]);
  const RankSimulation a = simulate_ranks(sc, across, {.link_time_factor = {{1, 3.0}}});
  ASSERT_EQ(a.classes.size(), 2U);  // node 1 differs, though nobody waits for anybody
  EXPECT_EQ(a.classes[1].ranks.front(), 8);
  EXPECT_EQ(a.classes[1].link_time_factor, 3.0);
  for (const RankClass& rc : a.classes) {
    const OpRecord& g = rc.result.ops[1];
    EXPECT_EQ(g.end - g.start, c.latency + 3 * (c.duration - c.latency));
    EXPECT_EQ(rc.waited_total, 0);
  }
  // Shard groups inside each node: no network link is crossed, nothing changes.
  const Schedule inside = chain_with_modelled_collective(16, {{"shard", 8, 1}});
  const OpCost ci = costs.cost(inside, inside.ops[1]);
  const RankSimulation b = simulate_ranks(sc, inside, {.link_time_factor = {{1, 3.0}}});
  for (const RankClass& rc : b.classes)
    EXPECT_EQ(rc.result.ops[1].end - rc.result.ops[1].start, ci.duration);
}

TEST(RankSimulation, IssueDelaysAreExponentialDrawsThatDelayTheCpuBoundJob) {
  // A CPU-bound schedule: 2,000 zero-time kernels issued one after the other, each costing the
  // CPU 1 µs to issue. The rank's step grows by the sum of its draws (mean 10 µs each).
  Scenario sc = two_nodes();
  Schedule s;
  s.name = "issue";
  s.world_size = 2;
  s.streams = {{"cpu", StreamKind::cpu}, {"compute", StreamKind::compute}};
  for (int i = 0; i < 2000; ++i) {
    Op op;
    op.kind = OpKind::forward;
    op.stream = 1;
    op.fixed_time = 0;
    s.ops.push_back(op);
  }
  const RankSimulation base = simulate_ranks(sc, s, {});
  const RankVariation v{.issue_delay = 10 * kNsPerUs, .seed = 4};
  const RankSimulation r = simulate_ranks(sc, s, v);
  ASSERT_EQ(r.classes.size(), 2U);  // every rank its own draws
  for (const RankClass& rc : r.classes) {
    const double added = static_cast<double>(rc.step_time - base.step_time);
    // The sum of 2,000 exponential draws of mean 10 µs: 20 ms, σ = √2000 · 10 µs ≈ 0.45 ms.
    EXPECT_NEAR(added, 20.0 * kMs, 5 * 0.45 * kMs);
  }
  EXPECT_NE(r.classes[0].step_time, r.classes[1].step_time);
  EXPECT_EQ(simulate_ranks(sc, s, v).step_time, r.step_time);  // the seed decides
}

TEST(RankSimulation, AScenarioVariationResolvesRankByRank) {
  VariationSpec spec;
  spec.slow_nodes = {{1, 1.2}};
  spec.slow_ranks = {{9, 1.5}, {2, 1.1}};  // rank 9 is in node 1: named alone, it wins
  spec.slow_links = {{0, 2.0}};
  spec.jitter = 0.01;
  spec.issue_delay = 5 * kNsPerUs;
  spec.seed = 7;
  const RankVariation v = rank_variation(spec, 16, 8);
  EXPECT_EQ(v.gpu_time_factor.size(), 9U);
  EXPECT_EQ(v.gpu_time_factor.at(2), 1.1);
  EXPECT_EQ(v.gpu_time_factor.at(8), 1.2);
  EXPECT_EQ(v.gpu_time_factor.at(9), 1.5);
  EXPECT_EQ(v.gpu_time_factor.count(0), 0U);
  EXPECT_EQ(v.link_time_factor, spec.slow_links);
  EXPECT_EQ(v.jitter, 0.01);
  EXPECT_EQ(v.issue_delay, 5 * kNsPerUs);
  EXPECT_EQ(v.seed, 7U);
}

}  // namespace
}  // namespace shardscope::sim
