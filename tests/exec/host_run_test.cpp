// The host backend runs a lowered scenario: dependency, stream and communicator order as the IR
// says, the simulation's times within a stated tolerance, stragglers delaying everyone, and errors
// that name the op instead of hanging.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <thread>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/exec/host_job.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/rank_simulation.hpp"

namespace shardscope::exec {
namespace {

const std::string kOracle = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/fsdp2-overlap-oracle.yaml";

sim::PipelineResult plan(int gpus) {
  return sim::simulate_scenario(
      load_scenario(kOracle, {fmt::format("cluster.gpus_per_node={}", gpus)}));
}

// The simulator's per-op times and CPU issue costs as the host backend's costs (what
// `shardscope run` passes).
HostJobOptions options_for(const sim::PipelineResult& p) {
  HostJobOptions o;
  o.backend.cost = [&p, costs = std::make_shared<sim::CostModel>(p.scenario)](OpId id,
                                                                              const Op& op) {
    const auto& rec = p.simulation.ops[static_cast<std::size_t>(id)];
    const sim::OpCost c = costs->cost(p.schedule, op);
    return HostCost{rec.end - rec.start, c.cpu, c.latency};
  };
  o.backend.timeout = std::chrono::milliseconds(10'000);
  o.run.facts = p.timeline().facts;
  return o;
}

std::map<OpId, const TimelineOp*> by_id(const Timeline& t) {
  std::map<OpId, const TimelineOp*> out;
  for (const auto& op : t.ops) out[op.op] = &op;
  return out;
}

class HostRun : public ::testing::TestWithParam<int> {};

TEST_P(HostRun, RunsInDependencyStreamAndCommunicatorOrder) {
  const auto p = plan(GetParam());
  const auto result = run_host_threads(p.schedule, options_for(p));
  const auto ops = by_id(result.timeline);
  ASSERT_EQ(ops.size(), p.schedule.ops.size());
  std::map<StreamId, const TimelineOp*> last_on_stream;
  std::map<CommId, const TimelineOp*> last_on_comm;
  for (const auto& [id, op] : ops) {  // in op id (issue) order
    for (OpId d : op->deps) EXPECT_GE(op->start, ops.at(d)->end) << "op " << id << " dep " << d;
    if (auto& prev = last_on_stream[op->stream]; prev) {
      EXPECT_GE(op->start, prev->end) << id;
    }
    last_on_stream[op->stream] = op;
    if (op->comm != kNone) {
      if (auto& prev = last_on_comm[op->comm]; prev) {
        EXPECT_GE(op->start, prev->end) << id;
      }
      last_on_comm[op->comm] = op;
    }
  }
  // Every collective moved data and every element was checked on every rank.
  int collectives = 0;
  for (const auto& op : p.schedule.ops) collectives += is_collective(op.kind);
  EXPECT_EQ(result.collectives_checked, collectives * GetParam());
  EXPECT_GT(result.elements_checked, 0);
  EXPECT_EQ(result.ranks.size(), static_cast<std::size_t>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostRun, ::testing::Values(2, 4, 8));

// Sleeps end at absolute deadlines and never early, and the host backend obeys the same
// dependency, stream, communicator and issue order as the simulator, so no op can start before
// its simulated start or take less than its simulated duration: a max-plus system with longer
// durations only moves later. How far later (the wake-up latency) is a timing goal, measured by
// bench/host_run_bench.cpp, not asserted here.
TEST(HostRun, NoOpStartsEarlierOrRunsShorterThanSimulated) {
  const auto p = plan(2);
  auto options = options_for(p);
  options.backend.time_scale = 10;
  const auto result = run_host_threads(p.schedule, options);
  const auto ops = by_id(result.timeline);
  ASSERT_EQ(ops.size(), p.schedule.ops.size());
  // Spans are divided by the time scale and rounded to the nanosecond.
  constexpr TimeNs kRounding = 1;
  for (std::size_t i = 0; i < p.schedule.ops.size(); ++i) {
    const TimelineOp& measured = *ops.at(static_cast<OpId>(i));
    const auto& simulated = p.simulation.ops[i];
    EXPECT_GE(measured.start + kRounding, simulated.start) << "op " << i;
    EXPECT_GE(measured.duration() + 2 * kRounding, simulated.end - simulated.start) << "op " << i;
  }
  EXPECT_GE(analysis::summarize(result.timeline).step_time + kRounding, p.summary.step_time);
}

TEST(HostRun, ASlowRankDelaysEveryRank) {
  const auto p = plan(2);
  auto options = options_for(p);
  options.slow_ranks = {{1, 1.5}};
  const auto result = run_host_threads(p.schedule, options);
  // Rank 0 waits for rank 1 at every collective: its step stretches too, to at least what the
  // simulator's per-rank replay predicts for the same slow GPU (sleeps never end early; the
  // host's own latency only adds). The upper side is a wall-clock number: host_run_bench.
  const TimeNs predicted = sim::simulate_ranks(p.scenario, p.schedule, {{{1, 1.5}}}).step_time;
  ASSERT_GT(predicted, p.summary.step_time * 21 / 20);
  ASSERT_EQ(result.ranks.size(), 2U);
  for (const RankStep& rank : result.ranks)
    EXPECT_GE(static_cast<double>(rank.step_time), 0.98 * static_cast<double>(predicted));
  // Only rank 1's own work took longer: its compute stream was busy 1.5× as long as rank 0's, less
  // what the wake-up latency both ranks pay per op takes off the ratio.
  EXPECT_GT(static_cast<double>(result.ranks[1].compute_busy),
            1.25 * static_cast<double>(result.ranks[0].compute_busy));
}

TEST(HostRun, ASlowLinkStretchesTheCollectivesAcrossIt) {
  // The oracle over 2 nodes of 1 GPU, node 1's links 3× as slow: every all-gather and
  // reduce-scatter crosses them, on both ranks, and each rank's step is at least the per-rank
  // replay's (sleeps never end early). A backend that ignored the link would measure the
  // symmetric step, well under it.
  const auto p = sim::simulate_scenario(
      load_scenario(kOracle, {"cluster.nodes=2", "cluster.gpus_per_node=1"}));
  auto options = options_for(p);
  options.slow_links = {{1, 3.0}};
  options.gpus_per_node = 1;
  sim::RankVariation slow_link;
  slow_link.link_time_factor = {{1, 3.0}};
  const TimeNs predicted = sim::simulate_ranks(p.scenario, p.schedule, slow_link).step_time;
  ASSERT_GT(predicted, p.summary.step_time * 11 / 10);
  const auto result = run_host_threads(p.schedule, options);
  ASSERT_EQ(result.ranks.size(), 2U);
  for (const RankStep& rank : result.ranks)
    EXPECT_GE(static_cast<double>(rank.step_time), 0.98 * static_cast<double>(predicted));
}

TEST(HostRun, JitterChangesDurationsAroundTheirCost) {
  const auto p = plan(2);
  auto options = options_for(p);
  options.backend.jitter = 0.2;
  const auto result = run_host_threads(p.schedule, options);
  int changed = 0;
  for (const auto& op : result.timeline.ops) {
    const auto& rec = p.simulation.ops[static_cast<std::size_t>(op.op)];
    const TimeNs planned = rec.end - rec.start;
    if (op.kind == OpKind::forward || op.kind == OpKind::backward)
      changed += std::llabs(op.duration() - planned) > planned / 50;
  }
  EXPECT_GT(changed, 0);
}

// Costs of zero: these tests exercise the data, the buffers and the order, not the time.
HostJobOptions instant() {
  HostJobOptions o;
  o.backend.cost = [](OpId, const Op&) { return HostCost{0, 0}; };
  o.backend.timeout = std::chrono::milliseconds(20'000);
  return o;
}

// Every example — FSDP2, FSDP1 hybrid, HSDP, CPU offload, resharding to 4 after forward — runs
// on the host with each collective moved in the dtype and counts its IR names, on buffers live
// in the rank's allocator, every element checked on every rank. Worlds are cut to 16 ranks.
TEST(HostRun, EveryExampleMovesEachCollectiveOnTheBuffersItsIrNames) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"fsdp2-overlap-oracle.yaml", {}},  // a custom model: its groups as they are
      {"llama3-8b-h100x8.yaml", {"fsdp.reshard_after_forward=4", "model.layers=4"}},
      {"llama2-13b-fsdp1-hybrid.yaml", {"cluster.nodes=2", "model.layers=4"}},
      {"llama2-7b-cpu-offload.yaml", {"model.layers=4"}},
      {"llama3-405b-hsdp-128-nodes.yaml",
       {"cluster.nodes=2", "fsdp.mesh.replicate=2", "fsdp.mesh.shard=8", "model.layers=4"}},
      {"plan-llama3-8b-2-nodes.yaml", {"training.grad_accum=2", "model.layers=4"}},
  };
  for (const auto& [file, overrides] : cases) {
    SCOPED_TRACE(file);
    // Four layers keep every kind of group (root, blocks) and collective at a fraction of the
    // ops: 16 rank threads meet at each collective.
    std::vector<std::string> keys = overrides;
    keys.emplace_back("training.iterations=1");
    const Schedule s =
        lower(load_scenario(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/" + file, keys));
    const auto result = run_host_threads(s, instant());
    int collectives = 0;
    for (const auto& op : s.ops) collectives += is_collective(op.kind);
    EXPECT_GT(collectives, 0);
    EXPECT_EQ(result.collectives_checked, std::int64_t{collectives} * s.world_size);
  }
}

// A device that gives the allocator less than the run stands for: the Timeline records the
// capacity the allocator really had, so "fits" is judged against it.
TEST(HostRun, TheTimelineRecordsTheSmallerOfThePlannedAndTheBackendsCapacity) {
  const auto p = plan(2);
  for (const Bytes backend_capacity :
       {p.timeline().memory_capacity / 2, p.timeline().memory_capacity * 2}) {
    auto options = instant();
    options.run.memory_capacity = p.timeline().memory_capacity;
    options.backend.memory_capacity = backend_capacity;
    const auto result = run_host_threads(p.schedule, options);
    EXPECT_EQ(result.timeline.memory_capacity,
              std::min(backend_capacity, p.timeline().memory_capacity));
  }
}

// A schedule that names a buffer it has freed, or reads a buffer as another dtype, fails at that
// op on the host instead of moving whatever memory is at hand.
TEST(HostRun, ACollectiveOnAFreedOrMistypedBufferFailsNamingIt) {
  const auto p = plan(2);
  const auto gather = static_cast<std::size_t>(
      std::find_if(p.schedule.ops.begin(), p.schedule.ops.end(),
                   [](const Op& op) { return op.kind == OpKind::all_gather; }) -
      p.schedule.ops.begin());
  ASSERT_LT(gather, p.schedule.ops.size());
  Schedule freed = p.schedule;  // the copy-in before it frees the all-gather output
  freed.ops[gather - 1].frees.push_back(freed.ops[gather].output.buffer);
  Schedule mistyped = p.schedule;
  DType& dtype = mistyped.ops[gather].input.dtype;
  dtype = dtype == DType::fp32 ? DType::bf16 : DType::fp32;
  for (const auto& [s, message] : {std::pair{&freed, "which is not allocated when it is issued"},
                                   std::pair{&mistyped, "which does not fit its"}}) {
    try {
      (void)run_host_threads(*s, instant());
      FAIL() << message;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("all_gather_output"), std::string::npos) << e.what();
    }
  }
}

TEST(HostRun, AMissingPeerEndsInAnErrorNamingTheOpNotAHang) {
  const auto p = plan(2);
  auto options = options_for(p);
  LocalHostWorld local({2, p.schedule.communicators, 4096});
  auto b = options.backend;
  b.world = &local.world();
  b.timeout = std::chrono::milliseconds(300);
  HostBackend rank0(b);  // rank 1 never comes
  try {
    (void)run(p.schedule, rank0, options.run);
    FAIL() << "finished without its peer";
  } catch (const ExecError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("all_gather"), std::string::npos) << what;
    EXPECT_NE(what.find("communicator shard"), std::string::npos) << what;
    EXPECT_NE(what.find("timed out"), std::string::npos) << what;
    EXPECT_NE(e.op(), kNone);
  }
  // How soon it gives up is a wall-clock property: exec/timeouts_timing_test.cpp (label timing).
}

TEST(HostRun, RanksIssuingDifferentCollectivesFailWithinTheTimeout) {
  const auto p = plan(2);
  auto options = options_for(p);
  Schedule other = p.schedule;  // rank 1 issues an all-reduce where rank 0 all-gathers
  for (auto& op : other.ops) {
    if (is_collective(op.kind)) {
      op.kind = OpKind::all_reduce;
      break;
    }
  }
  LocalHostWorld local({2, p.schedule.communicators, 1 << 20});
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto b = options.backend;
      b.rank = r;
      b.world = &local.world();
      b.timeout = std::chrono::milliseconds(2000);
      HostBackend backend(b);
      try {
        (void)run(r == 0 ? p.schedule : other, backend, options.run);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string all = errors[0] + "\n" + errors[1];
  EXPECT_NE(all.find("ranks issued different collectives"), std::string::npos) << all;
}

}  // namespace
}  // namespace shardscope::exec
