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
  EXPECT_THROW(simulate_ranks(sc, s, {{}, 1.5, 1}), Error);
}

}  // namespace
}  // namespace shardscope::sim
