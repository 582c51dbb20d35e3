// Closed-form checks of the discrete-event engine on hand-built schedules.
#include "shardscope/sim/engine.hpp"

#include <gtest/gtest.h>

#include "shardscope/core/scenario.hpp"

namespace shardscope::sim {
namespace {

// H100 node(s) with a 1 µs launch cost and no FSDP hook cost, so closed forms are exact.
Scenario cluster(int nodes = 1) {
  return scenario_from_text(
      "model: {preset: tiny}\ncluster: {preset: h100-sxm-80gb, nodes: " + std::to_string(nodes) +
      ", cpu: {launch_overhead: 1us, fsdp_hook_overhead: 0ns}}\n");
}

struct Builder {
  Schedule s;
  Builder() {
    s.name = "closed form";
    s.streams = {{"cpu", StreamKind::cpu},
                 {"compute", StreamKind::compute},
                 {"comm_a", StreamKind::communication},
                 {"comm_b", StreamKind::communication}};
    s.communicators = {{"intra_a", 8, 1}, {"intra_b", 8, 1}, {"inter", 16, 2}};
  }
  OpId add(OpKind kind, StreamId stream, CommId comm = kNone, Bytes bytes = 0,
           std::optional<TimeNs> fixed = {}, Flops flops = 0, const std::vector<OpId>& deps = {}) {
    Op op;
    op.kind = kind;
    op.stream = stream;
    op.comm = comm;
    op.bytes = bytes;
    op.fixed_time = fixed;
    op.flops = flops;
    op.deps = deps;
    s.ops.push_back(op);
    return static_cast<OpId>(s.ops.size() - 1);
  }
};

constexpr StreamId kCpu = 0, kCompute = 1, kCommA = 2, kCommB = 3;

TEST(Engine, SingleCollectiveTakesItsModelTime) {
  const auto sc = cluster();
  const CostModel costs(sc);
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, kGiB);
  const auto r = simulate(b.s, costs);
  const TimeNs expected = costs.collectives().estimate(OpKind::all_gather, kGiB, 8, 1).time;
  EXPECT_EQ(r.ops[0].start, 0);
  EXPECT_EQ(r.ops[0].end, expected);
}

TEST(Engine, SerialChainOnOneStreamAddsUp) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::forward, kCompute, kNone, 0, 5 * kNsPerMs);
  b.add(OpKind::forward, kCompute, kNone, 0, 7 * kNsPerMs);
  const auto r = simulate(b.s, costs);
  EXPECT_EQ(r.ops[1].start, 5 * kNsPerMs);
  EXPECT_EQ(r.ops[1].end, 12 * kNsPerMs);
  EXPECT_EQ(r.ops[1].binding, Binding::stream);
  EXPECT_EQ(r.ops[1].predecessor, 0);
}

TEST(Engine, CollectivesOnOneCommunicatorSerialiseAcrossStreams) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, kGiB);
  b.add(OpKind::reduce_scatter, kCommB, 0, kGiB);
  const auto r = simulate(b.s, costs);
  EXPECT_EQ(r.ops[1].start, r.ops[0].end);
  EXPECT_EQ(r.ops[1].binding, Binding::communicator);
  const TimeNs d = costs.collectives().estimate(OpKind::reduce_scatter, kGiB, 8, 1).time;
  EXPECT_EQ(r.ops[1].end, r.ops[0].end + d);
}

TEST(Engine, CollectivesOnTwoCommunicatorsShareTheLink) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, kGiB);
  b.add(OpKind::all_gather, kCommB, 1, kGiB);  // issued 1 µs later
  const auto r = simulate(b.s, costs);
  const TimeNs d = costs.collectives().estimate(OpKind::all_gather, kGiB, 8, 1).time;
  // op0 runs alone for 1 µs, then both at half rate: op0 ends at 2d − 1 µs, op1 at 2d.
  EXPECT_NEAR(static_cast<double>(r.ops[0].end), static_cast<double>(2 * d - kNsPerUs), 2.0);
  EXPECT_NEAR(static_cast<double>(r.ops[1].end), static_cast<double>(2 * d), 2.0);
}

TEST(Engine, InterNodeAndIntraNodeCollectivesUseDifferentLinks) {
  const CostModel costs(cluster(2));
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, kGiB);
  b.add(OpKind::all_gather, kCommB, 2, kGiB);
  const auto r = simulate(b.s, costs);
  EXPECT_EQ(r.ops[0].end, costs.collectives().estimate(OpKind::all_gather, kGiB, 8, 1).time);
  EXPECT_EQ(r.ops[1].end,
            kNsPerUs + costs.collectives().estimate(OpKind::all_gather, kGiB, 16, 2).time);
}

TEST(Engine, ComputeSlowsWhileCommunicationHoldsSms) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, 256 * kMiB);
  b.add(OpKind::forward, kCompute, kNone, 0, std::nullopt, 1e14);  // starts 1 µs later
  const auto r = simulate(b.s, costs);
  const double d =
      static_cast<double>(costs.collectives().estimate(OpKind::all_gather, 256 * kMiB, 8, 1).time) -
      1e3;
  const double c = static_cast<double>(costs.compute_time(1e14, 0));
  // The collective holds every channel's SM (256 MiB fills them all): the GEMM FLOPs take
  // sms / (sms − channels) as long while it runs, the kernel floor does not stretch.
  const int sms = cluster().cluster.gpu.sm_count;
  const int held = cluster().cluster.nccl.channels;
  ASSERT_EQ(costs.contended_sms(), held);
  const double floor = static_cast<double>(ComputeModelParams{}.kernel_floor);
  const double factor = (floor + (c - floor) * sms / (sms - held)) / c;
  // While the collective runs the compute progresses at 1/factor: it ends d·(1 − 1/factor) later,
  // the GPU work it lost beside the collective.
  EXPECT_NEAR(static_cast<double>(r.ops[1].end - r.ops[1].start), c + d * (1 - 1 / factor), 2.0);
  ASSERT_EQ(r.timeline.contention_by_iteration.size(), 1U);
  EXPECT_NEAR(static_cast<double>(r.timeline.contention_by_iteration[0]), d * (1 - 1 / factor),
              2.0);
}

TEST(Engine, MemoryBoundWorkKeepsItsRateBesideACollective) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, 256 * kMiB);
  b.add(OpKind::copy_in, kCompute, kNone, 4 * kGiB);
  const auto r = simulate(b.s, costs);
  Builder alone;
  alone.add(OpKind::copy_in, kCompute, kNone, 4 * kGiB);
  const auto a = simulate(alone.s, costs);
  EXPECT_EQ(r.ops[1].end - r.ops[1].start, a.ops[0].end - a.ops[0].start);
  EXPECT_EQ(r.timeline.contention_by_iteration, (std::vector<TimeNs>{0}));  // known: none lost
}

TEST(Engine, AContentionScaleScalesWhatTheSmModelTakes) {
  // A calibration that found collectives took twice what the model says: the GEMM beside one
  // loses twice the throughput, the memory-bound copy still none.
  const CostModel costs(cluster(), {}, InterferenceParams{2.0});
  const CostModel model(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, 256 * kMiB);
  b.add(OpKind::forward, kCompute, kNone, 0, std::nullopt, 1e14);  // starts 1 µs later
  const auto r = simulate(b.s, costs);
  const auto m = simulate(b.s, model);
  Builder copy;
  copy.add(OpKind::all_gather, kCommA, 0, 256 * kMiB);
  copy.add(OpKind::copy_in, kCompute, kNone, 4 * kGiB);
  const auto rc = simulate(copy.s, costs);
  const auto mc = simulate(copy.s, model);
  const double d =
      static_cast<double>(costs.collectives().estimate(OpKind::all_gather, 256 * kMiB, 8, 1).time) -
      1e3;
  // The model alone: the GEMM ends L·d late, L the share of its throughput it loses (see
  // ComputeSlowsWhileCommunicationHoldsSms); scaled by 2 it ends 2·L·d late.
  const double c = static_cast<double>(costs.compute_time(1e14, 0));
  const double late = static_cast<double>(m.ops[1].end - m.ops[1].start) - c;
  ASSERT_GT(late, 0);
  EXPECT_NEAR(static_cast<double>(r.ops[1].end - r.ops[1].start), c + 2 * late, 4.0);
  EXPECT_EQ(rc.ops[1].end - rc.ops[1].start, mc.ops[1].end - mc.ops[1].start);
  ASSERT_GT(c, d);  // the GEMM outlasts the collective: it lost L·d of work, 2·L·d scaled
  EXPECT_NEAR(static_cast<double>(r.timeline.contention_by_iteration.at(0)), 2 * late, 4.0);
}

TEST(Engine, TheScaledLossIsCappedSoNoOpStalls) {
  EXPECT_DOUBLE_EQ(contended_rate(2.0, 1.0, 1.0), 0.5);     // one wave over half the SMs: 2×
  EXPECT_DOUBLE_EQ(contended_rate(2.0, 1.0, 0.0), 1.0);     // scale 0: no contention
  EXPECT_DOUBLE_EQ(contended_rate(1.0, 1.0, 4.0), 1.0);     // memory-bound: nothing to scale
  EXPECT_NEAR(contended_rate(2.0, 1.0, 4.0), 0.05, 1e-12);  // 4 × ½ capped at 95 %
}

TEST(Engine, FixedTimesAreNotStretched) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, 256 * kMiB);
  b.add(OpKind::forward, kCompute, kNone, 0, 3 * kNsPerMs);
  const auto r = simulate(b.s, costs);
  EXPECT_EQ(r.ops[1].end - r.ops[1].start, 3 * kNsPerMs);
}

TEST(Engine, CpuWaitBlocksIssueUntilTheEventCompletes) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::forward, kCompute, kNone, 0, 10 * kNsPerMs);
  b.add(OpKind::cpu_wait, kCpu, kNone, 0, std::nullopt, 0, {0});
  b.add(OpKind::forward, kCompute, kNone, 0, kNsPerMs);
  const auto r = simulate(b.s, costs);
  EXPECT_EQ(r.ops[1].start, 10 * kNsPerMs);
  EXPECT_GE(r.ops[2].issue, 10 * kNsPerMs);
  EXPECT_EQ(r.ops[1].binding, Binding::dependency);
}

TEST(Engine, CrossStreamDependencyDelaysTheWaiter) {
  const CostModel costs(cluster());
  Builder b;
  b.add(OpKind::all_gather, kCommA, 0, kGiB);
  b.add(OpKind::forward, kCompute, kNone, 0, kNsPerMs, 0, {0});
  const auto r = simulate(b.s, costs);
  EXPECT_EQ(r.ops[1].start, r.ops[0].end);
  EXPECT_EQ(r.ops[1].binding, Binding::dependency);
}

TEST(Engine, ReportsTheFirstBufferThatDoesNotFit) {
  auto sc = cluster();
  sc.cluster.gpu.memory = 100 * kMiB;
  sc.cluster.gpu.context_memory = 0;  // all 100 MiB for the allocator
  const CostModel costs(sc);
  Builder b;
  b.s.buffer_labels = {"big", "bigger"};
  b.s.buffers = {{BufferName{0}, 60 * kMiB, DType::fp32, BufferCategory::activations, kNone,
                  Location::gpu, false},
                 {BufferName{1}, 60 * kMiB, DType::fp32, BufferCategory::activations, kNone,
                  Location::gpu, false}};
  b.add(OpKind::forward, kCompute, kNone, 0, kNsPerMs);
  b.s.ops[0].allocs = {0};
  b.add(OpKind::forward, kCompute, kNone, 0, kNsPerMs);
  b.s.ops[1].allocs = {1};
  const auto r = simulate(b.s, costs);
  ASSERT_TRUE(r.timeline.out_of_memory);
  const OutOfMemoryEvent& oom = *r.timeline.out_of_memory;
  EXPECT_EQ(oom.op, 1);
  EXPECT_EQ(oom.buffer, "bigger");
  EXPECT_EQ(oom.size, 60 * kMiB);
  EXPECT_EQ(oom.reserved, 60 * kMiB);
  EXPECT_EQ(r.timeline.peaks.allocated.bytes, 60 * kMiB);
}

}  // namespace
}  // namespace shardscope::sim
