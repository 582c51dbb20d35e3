#include "shardscope/core/analysis.hpp"

#include <gtest/gtest.h>

#include "core/timeline_test_util.hpp"
#include "shardscope/core/compare.hpp"

namespace shardscope::analysis {
namespace {

using testing::no_categories;
using testing::timeline_op;

constexpr TimeNs kMs = kNsPerMs;

// Two iterations on compute (stream 1) and an all-gather stream (stream 2):
//   iteration 0: forward 0–10 ms, backward 10–30 ms
//   iteration 1: all-gather 30–40 ms (exposed), forward 40–50, recompute 50–55, backward 55–80,
//                all-gather 60–70 ms (hidden behind the backward)
Timeline two_iterations() {
  Timeline t;
  t.name = "hand";
  t.source = "measured";
  t.facts = {8, 2, 8192, 1e9, 1e15};
  t.streams = {{"cpu", StreamKind::cpu},
               {"compute", StreamKind::compute},
               {"all_gather", StreamKind::communication}};
  t.groups = {"layers.0"};
  t.communicators = {{"shard", 8, 1}};
  auto op = [&](OpId id, OpKind kind, StreamId stream, TimeNs a, TimeNs b, Phase phase, int it,
                double flops, IdList deps = {}) {
    auto o = timeline_op(id, kind, stream, a * kMs, b * kMs, phase);
    o.iteration = it;
    o.flops = flops;
    o.group = 0;
    o.deps = std::move(deps);
    if (kind == OpKind::all_gather) o.comm = 0;
    t.ops.push_back(o);
  };
  op(0, OpKind::forward, 1, 0, 10, Phase::forward, 0, 1e12);
  op(1, OpKind::backward, 1, 10, 30, Phase::backward, 0, 2e12);
  op(2, OpKind::all_gather, 2, 30, 40, Phase::forward, 1, 0);
  op(3, OpKind::forward, 1, 40, 50, Phase::forward, 1, 1e12, {2});
  op(4, OpKind::recompute, 1, 50, 55, Phase::backward, 1, 1e12);
  op(5, OpKind::backward, 1, 55, 80, Phase::backward, 1, 2e12);
  op(6, OpKind::all_gather, 2, 60, 70, Phase::backward, 1, 0);
  sort_timeline_ops(t.ops);
  t.memory = {{0, 10, 20, no_categories(), kNone}, {40 * kMs, 50, 60, no_categories(), 3}};
  t.peaks = peaks_from_samples(t);
  t.memory_capacity = 100;
  return t;
}

TEST(Analysis, StepTimeThroughputAndUtilisationFollowTheirDefinitions) {
  const auto s = summarize(two_iterations());
  EXPECT_EQ(s.source, "measured");
  EXPECT_EQ(s.step_time, 50 * kMs);                                // 80 − 30 ms
  EXPECT_DOUBLE_EQ(s.tokens_per_s_per_gpu.value(), 8192 / 0.050);  // 163,840 tokens/s
  EXPECT_DOUBLE_EQ(s.mfu.value(), 8192 / 0.050 * 1e9 / 1e15);
  EXPECT_DOUBLE_EQ(s.hfu.value(), *s.mfu * 4e12 / 3e12);  // recompute FLOPs count for HFU only
  EXPECT_EQ(s.forward_time, 20 * kMs);  // 30–50 ms: the all-gather belongs to forward
  EXPECT_EQ(s.backward_time, 30 * kMs);
  EXPECT_EQ(s.comm_total, 20 * kMs);
  EXPECT_EQ(s.comm_exposed, 10 * kMs);
  EXPECT_DOUBLE_EQ(s.overlap_fraction.value(), 0.5);
  EXPECT_EQ(s.collectives.at("all_gather"), 2);
  ASSERT_EQ(s.stream_busy.size(), 3u);
  EXPECT_EQ(s.stream_busy[1].second, 40 * kMs);
  EXPECT_EQ(s.stream_busy[2].second, 20 * kMs);
  EXPECT_EQ(s.peak_allocated, 50);
  EXPECT_EQ(s.peak_reserved, 60);
  EXPECT_EQ(s.peak_op, "forward layers.0 (forward, iteration 1)");
  EXPECT_EQ(s.fit, Fit::fits);
  EXPECT_EQ(s.headroom, 40);  // 100 − 60 B
  EXPECT_FALSE(s.tight);
}

// A fit with less than the margin free is tight, and every table says how much is free; a run
// that does not fit says why beside its peak.
TEST(Analysis, AFitCloserThanTheMarginIsTightAndAMissSaysWhy) {
  Timeline t = two_iterations();
  t.memory_capacity = 61;  // 1 B free of 61: under 2 %
  auto s = summarize(t);
  EXPECT_EQ(s.fit, Fit::fits);
  EXPECT_EQ(s.headroom, 1);
  EXPECT_TRUE(s.tight);
  EXPECT_NE(summary_table(s).find("(TIGHT: fits with 1 B free, under 2.0 % of capacity)"),
            std::string::npos)
      << summary_table(s);
  t.memory_tight_margin = 0.0;  // a margin of none: never tight
  EXPECT_FALSE(summarize(t).tight);
  t.memory_capacity = 50;  // 10 B over
  s = summarize(t);
  EXPECT_EQ(s.fit, Fit::does_not_fit);
  EXPECT_NE(summary_table(s).find("(DOES NOT FIT: 10 B over the capacity)"), std::string::npos);
  // A failed allocation is the reason even where the reserved peak stayed below the capacity.
  t.memory_capacity = 100;
  t.out_of_memory = OutOfMemoryEvent{kNone, "layers.0/act", BufferCategory::activations, 70, 60};
  s = summarize(t);
  EXPECT_EQ(s.fit, Fit::does_not_fit);
  EXPECT_NE(summary_table(s).find("DOES NOT FIT: layers.0/act (activations, 70 B) does not fit"),
            std::string::npos)
      << summary_table(s);
}

// What the producer did not record is unknown in the summary, in its table and in its JSON:
// never 0 tokens/s, 0 % MFU, 0 B of 0 B "fits" or 100 % of no communication overlapped.
TEST(Analysis, NumbersARunDidNotRecordAreUnknownNotZero) {
  Timeline t = two_iterations();
  t.facts.tokens_per_iteration = 0;  // an imported trace: no tokens, FLOPs or peak known
  t.facts.model_flops_per_token = 0;
  t.facts.peak_flops = 0;
  t.memory.clear();  // no memory profile
  t.peaks = {};
  t.memory_capacity = 0;
  std::erase_if(t.ops, [](const TimelineOp& op) { return is_collective(op.kind); });
  const auto s = summarize(t);
  EXPECT_EQ(s.tokens_per_s_per_gpu, std::nullopt);
  EXPECT_EQ(s.mfu, std::nullopt);
  EXPECT_EQ(s.hfu, std::nullopt);
  EXPECT_EQ(s.overlap_fraction, std::nullopt);
  EXPECT_EQ(s.peak_allocated, std::nullopt);
  EXPECT_EQ(s.peak_reserved, std::nullopt);
  EXPECT_EQ(s.capacity, std::nullopt);
  EXPECT_EQ(s.fit, Fit::unknown);
  const std::string table = summary_table(s);
  for (const char* line :
       {"throughput                  unknown", "MFU / HFU                   unknown",
        "communication               none", "peak allocated              unknown",
        "peak reserved               unknown of unknown (fit unknown)"})
    EXPECT_NE(table.find(line), std::string::npos) << line << "\n" << table;
  const std::string json = summary_to_json(s);
  for (const char* field :
       {"\"tokens_per_s_per_gpu\": null", "\"mfu\": null", "\"reserved_bytes\": null",
        "\"fits\": null", "\"overlap_fraction\": null"})
    EXPECT_NE(json.find(field), std::string::npos) << field;
  // Allocated bytes with no reserved bytes beside them: reserved was not recorded (a caching
  // allocator reserves at least what it hands out).
  t.peaks.allocated.bytes = 4096;
  const auto cpu_trace = summarize(t);
  EXPECT_EQ(cpu_trace.peak_allocated, 4096);
  EXPECT_EQ(cpu_trace.peak_reserved, std::nullopt);
  // Compared with a run that knows them, the deltas are unknown too.
  const auto c = compare(two_iterations(), t);
  for (const auto& m : c.metrics) {
    if (m.name == "throughput" || m.name == "MFU" || m.name == "peak reserved" ||
        m.name == "overlap" || m.name == "compute beside it") {
      EXPECT_FALSE(m.known()) << m.name;
    }
  }
  EXPECT_NE(comparison_table(c, false).find("unknown"), std::string::npos);
}

TEST(Analysis, CriticalPathFollowsWhatEachOpWaitedFor) {
  auto t = two_iterations();
  const auto path = critical_path(t);
  // backward ← recompute ← forward ← (dependency) all-gather; the all-gather followed iteration 0
  // with no gap, so no CPU time.
  ASSERT_EQ(path.ops, (std::vector<OpId>{5, 4, 3, 2}));
  EXPECT_EQ(path.by_kind.at("all_gather"), 10 * kMs);
  EXPECT_EQ(path.by_kind.at("backward"), 25 * kMs);
  EXPECT_EQ(path.by_kind.count("cpu"), 0u);
  // Delay the forward by 2 ms after its all-gather: the gap is CPU issue time.
  for (auto& op : t.ops) {
    if (op.op >= 3 && op.iteration == 1 && op.kind != OpKind::all_gather) {
      op.start += 2 * kMs;
      op.end += 2 * kMs;
    }
  }
  EXPECT_EQ(critical_path(t).by_kind.at("cpu"), 2 * kMs);
}

TEST(Analysis, NoDependenciesMeansNoCriticalPath) {
  auto t = two_iterations();
  for (auto& op : t.ops) op.deps.clear();
  EXPECT_TRUE(summarize(t).critical_path.ops.empty());
}

TEST(Analysis, SummaryJsonAndTableCarryTheSource) {
  const auto s = summarize(two_iterations());
  EXPECT_NE(summary_to_json(s).find("\"source\": \"measured\""), std::string::npos);
  EXPECT_NE(summary_table(s).find("hand (8 GPUs), measured,"), std::string::npos);
}

TEST(RangeSummary, ExposedCommunicationIsTheCommunicationComputeDoesNotHide) {
  Timeline t;
  t.streams = {{"compute", StreamKind::compute}, {"all_gather", StreamKind::communication}};
  t.groups = {"g"};
  // compute 0–10 ms and 20–30 ms; all-gather 5–25 ms: 10 ms of it hidden, 10 exposed.
  t.ops = {timeline_op(0, OpKind::forward, 0, 0, 10 * kMs),
           timeline_op(2, OpKind::all_gather, 1, 5 * kMs, 25 * kMs),
           timeline_op(1, OpKind::forward, 0, 20 * kMs, 30 * kMs)};
  t.memory = {{0, 10, 20, {}, kNone}, {15 * kMs, 50, 60, {}, 2}, {40 * kMs, 5, 60, {}, 1}};
  const auto r = summarize_range(t, 0, 30 * kMs);
  EXPECT_EQ(r.ops, 3);
  EXPECT_EQ(r.compute, 20 * kMs);
  EXPECT_EQ(r.communication, 20 * kMs);
  EXPECT_EQ(r.exposed_communication, 10 * kMs);
  EXPECT_DOUBLE_EQ(r.overlap, 0.5);
  EXPECT_EQ(r.peak_allocated, 50);
  const auto part = summarize_range(t, 12 * kMs, 18 * kMs);  // only communication
  EXPECT_EQ(part.exposed_communication, 6 * kMs);
  EXPECT_EQ(part.peak_allocated, 50);  // the sample in force from 15 ms
}

}  // namespace
}  // namespace shardscope::analysis

namespace shardscope::analysis {
namespace {

TEST(Compare, ATimelineAgainstItselfIsAllZeros) {
  const auto t = two_iterations();
  const auto c = compare(t, t);
  for (const auto& m : c.metrics) EXPECT_EQ(m.a, m.b) << m.name;
  for (const auto& k : c.kinds) EXPECT_EQ(k.a, k.b);
  ASSERT_EQ(c.ops.size(), t.ops.size());
  for (const auto& op : c.ops) {
    EXPECT_EQ(op.start_delta, 0);
    EXPECT_EQ(op.duration_delta, 0);
  }
  EXPECT_EQ(c.only_in_a + c.only_in_b, 0);
}

TEST(Compare, AShiftedCopyShowsTheShiftAndNothingElse) {
  const auto a = two_iterations();
  auto b = a;
  for (auto& op : b.ops) {
    op.start += 3 * kMs;
    op.end += 3 * kMs;
  }
  for (auto& op : b.ops) {
    if (op.op == 5) op.end += kMs;  // and the last backward 1 ms longer
  }
  const auto c = compare(a, b);
  for (const auto& op : c.ops) EXPECT_EQ(op.start_delta, 3 * kMs);
  EXPECT_EQ(c.ops.front().duration_delta, kMs);  // the largest delta first
  EXPECT_EQ(c.metrics.front().name, "step time");
  EXPECT_NEAR(c.metrics.front().b.value() - c.metrics.front().a.value(), ns_to_s(kMs), 1e-12);
  const auto json = comparison_json(c, true);
  EXPECT_NE(json.find("\"start_delta_ns\": 3000000"), std::string::npos);
}

TEST(Compare, OpsOnlyOneSideHasAreCounted) {
  const auto a = two_iterations();
  auto b = a;
  b.ops.pop_back();
  const auto c = compare(a, b);
  EXPECT_EQ(c.only_in_a, 1);
  EXPECT_EQ(c.only_in_b, 0);
}

TEST(Compare, SaysWhatTheMeasuredRunDidThatThePlanDidNot) {
  const auto a = two_iterations();
  auto b = a;
  // B gathers layers.0 once more in backward of iteration 1 (on a second NCCL stream), and runs
  // its forward all-gather of iteration 1 on the compute stream.
  b.streams.push_back({"nccl 2", StreamKind::communication});
  auto extra = b.ops.back();
  ASSERT_EQ(extra.kind, OpKind::all_gather);
  extra.stream = 3;
  extra.start = 72 * kMs;
  extra.end = 75 * kMs;
  b.ops.push_back(extra);
  for (auto& op : b.ops) {
    if (op.op == 2) op.stream = 1;
  }
  sort_timeline_ops(b.ops);
  const auto c = compare(a, b);
  ASSERT_EQ(c.extra_in_b.size(), 1U);
  EXPECT_EQ(c.extra_in_b[0].kind, OpKind::all_gather);
  EXPECT_EQ(c.extra_in_b[0].count, 1);
  EXPECT_EQ(c.extra_in_b[0].time, 3 * kMs);
  EXPECT_EQ(c.extra_in_b[0].examples, std::vector<std::string>{"layers.0 backward it 1 #1"});
  EXPECT_TRUE(c.extra_in_a.empty());
  ASSERT_EQ(c.stream_mismatches.size(), 1U);
  EXPECT_EQ(c.stream_mismatches[0].b_stream, StreamKind::compute);
  EXPECT_EQ(c.stream_mismatches[0].a_stream, StreamKind::communication);
  EXPECT_EQ(c.stream_mismatches[0].example, "layers.0 forward it 1 #0");
  // A: one stream for all-gathers; B: three (compute, the first and the second NCCL stream).
  ASSERT_EQ(c.collective_streams.size(), 1U);
  EXPECT_EQ(c.collective_streams[0], std::make_tuple(OpKind::all_gather, 1, 3));
  const auto table = comparison_table(c, false);
  EXPECT_NE(table.find("1 all_gather op only in B (3.000 ms): layers.0 backward it 1 #1"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("1 all_gather op on a compute stream in B, a communication stream in A"),
            std::string::npos)
      << table;
  EXPECT_NE(comparison_json(c, false).find("\"stream_mismatches\""), std::string::npos);
}

}  // namespace
}  // namespace shardscope::analysis
