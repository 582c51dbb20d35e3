#include "shardscope/gui/lane_layout.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "core/timeline_test_util.hpp"

namespace shardscope::gui {
namespace {

// A timeline with `per_lane` back-to-back ops of random lengths on each of three streams.
Timeline random_timeline(int per_lane, unsigned seed) {
  Timeline t;
  t.streams = {{"cpu", StreamKind::cpu},
               {"compute", StreamKind::compute},
               {"comm", StreamKind::communication}};
  t.groups = {"layers.0"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<TimeNs> len(1, 5000), gap(0, 2000);
  for (StreamId s = 1; s <= 2; ++s) {
    TimeNs now = 0;
    for (int i = 0; i < per_lane; ++i) {
      now += gap(rng);
      const TimeNs d = len(rng);
      t.ops.push_back(testing::timeline_op(static_cast<OpId>(t.ops.size()),
                                           s == 1 ? OpKind::forward : OpKind::all_gather, s, now,
                                           now + d));
      t.ops.back().group = 0;
      now += d;
    }
  }
  return t;
}

TEST(LaneLayout, CpuLaneFirstThenStreams) {
  const auto t = random_timeline(10, 1);
  LaneLayout layout(&t);
  ASSERT_EQ(layout.lane_count(), 3);
  EXPECT_EQ(layout.lane_stream(0), 0);
  EXPECT_EQ(layout.lane_ops(1).size(), 10u);
}

TEST(LaneLayout, VisibleItemsAccountForEveryOpInRangeExactlyOnce) {
  const auto t = random_timeline(2000, 7);
  LaneLayout layout(&t);
  for (auto [start, end] :
       {std::pair<TimeNs, TimeNs>{0, 20'000'000}, {1'000'000, 1'300'000}, {5'000'000, 5'010'000}}) {
    TimeAxis axis(0, t.end_time(), 900);
    axis.set_range(start, end);
    for (int lane = 1; lane <= 2; ++lane) {
      int expected = 0;
      for (int i : layout.lane_ops(lane)) {
        const auto& op = t.ops[static_cast<std::size_t>(i)];
        expected += op.end > axis.start() && op.start < axis.end();
      }
      int drawn = 0;
      double last_x1 = -1;
      for (const auto& item : layout.visible(lane, axis, 3.0)) {
        drawn += item.count;
        EXPECT_GE(item.x0, last_x1 - 3.0);  // left to right
        EXPECT_LE(item.x1, axis.width() + 1e-9);
        if (item.op >= 0) {
          EXPECT_EQ(item.count, 1);
        }
        last_x1 = item.x1;
      }
      EXPECT_EQ(drawn, expected) << lane << " " << start;
    }
  }
}

TEST(LaneLayout, NarrowOpsFoldIntoFewCountedBlocks) {
  const auto t = random_timeline(100'000, 3);
  LaneLayout layout(&t);
  TimeAxis axis(0, t.end_time(), 1000);
  const auto items = layout.visible(1, axis, 3.0);
  EXPECT_LE(items.size(), 1000u / 3u + 1u);  // at most one item per 3 pixels
  int total = 0;
  for (const auto& i : items) total += i.count;
  EXPECT_EQ(total, 100'000);
}

TEST(LaneLayout, ZoomedInCostFollowsTheVisibleItems) {
  // 1M ops: a 1 µs window must be answered by binary search, not a scan.
  const auto t = random_timeline(500'000, 5);
  LaneLayout layout(&t);
  TimeAxis axis(0, t.end_time(), 1000);
  axis.set_range(t.end_time() / 2, t.end_time() / 2 + 20'000);
  const auto items = layout.visible(1, axis, 3.0);
  EXPECT_LE(items.size(), 20u);
}

TEST(LaneLayout, OpAtFindsTheOpUnderATime) {
  const auto t = random_timeline(100, 9);
  LaneLayout layout(&t);
  for (int i : layout.lane_ops(2)) {
    const auto& op = t.ops[static_cast<std::size_t>(i)];
    EXPECT_EQ(layout.op_at(2, (op.start + op.end) / 2), i);
  }
  EXPECT_EQ(layout.op_at(2, -5), -1);
}

}  // namespace
}  // namespace shardscope::gui

#include "shardscope/gui/sweep_table.hpp"

namespace shardscope::gui {
namespace {

TEST(SweepTable, CsvAndJsonFromTheSameSweepAgree) {
  const std::vector<sim::SweepAxis> axes{{"fsdp.reshard_after_forward", {"true", "false"}}};
  std::vector<sim::SweepPoint> points(2);
  for (int i = 0; i < 2; ++i) {
    points[static_cast<std::size_t>(i)].values = {i == 0 ? "true" : "false"};
    points[static_cast<std::size_t>(i)].summary.step_time = (250 + i) * kNsPerMs;
    points[static_cast<std::size_t>(i)].summary.tokens_per_s_per_gpu = 1000.5 + i;
    points[static_cast<std::size_t>(i)].summary.peak_reserved = (i + 1) * kGiB;
    points[static_cast<std::size_t>(i)].fits = true;
    points[static_cast<std::size_t>(i)].pareto = i == 1;
  }
  points[1].error = "a, \"quoted\" problem";
  const auto from_csv = sweep_rows_from_csv(sim::sweep_csv(axes, points), "s.csv");
  const auto from_json = sweep_rows_from_json(sim::sweep_json(axes, points), "s.json");
  ASSERT_EQ(from_csv.size(), 2u);
  ASSERT_EQ(from_json.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(from_csv[i].label(), from_json[i].label());
    EXPECT_DOUBLE_EQ(from_csv[i].step_time_s, from_json[i].step_time_s);
    EXPECT_EQ(from_csv[i].peak_reserved, from_json[i].peak_reserved);
    EXPECT_EQ(from_csv[i].pareto, from_json[i].pareto);
  }
  EXPECT_EQ(from_csv[1].error, "a, \"quoted\" problem");
  EXPECT_THROW(sweep_rows_from_csv("a,b\n1,2\n", "bad.csv"), ValidationError);
}

}  // namespace
}  // namespace shardscope::gui
