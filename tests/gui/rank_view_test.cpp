// The Ranks tab's data: a lane per rank class's GPU stream (the straggler's first, identical ranks
// folded), the collectives a class held the others at labelled, and the step-time histogram.
#include "shardscope/gui/rank_view.hpp"

#include <gtest/gtest.h>

#include <set>

#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope::gui {
namespace {

TEST(RankView, HistogramBinsCoverTheRangeAndCountEveryTime) {
  const auto bins = histogram({10, 12, 19, 20, 15, 11}, 2);
  ASSERT_EQ(bins.size(), 2U);
  EXPECT_EQ(bins[0].from, 10);
  EXPECT_EQ(bins[0].to, 15);
  EXPECT_EQ(bins[1].to, 20);
  EXPECT_EQ(bins[0].count, 3);  // 10, 11, 12
  EXPECT_EQ(bins[1].count, 3);  // 15, 19, 20 (the last bin is closed)
  const auto same = histogram({7, 7, 7}, 5);
  ASSERT_EQ(same.size(), 1U);
  EXPECT_EQ(same[0].count, 3);
  EXPECT_TRUE(histogram({}, 5).empty());
}

TEST(RankView, OneLaneSetPerClassTheStragglersFirstAndItsHoldsLabelled) {
  const Scenario sc = scenario_from_text(
      "model: {preset: llama3.1-8b, layers: 2}\n"
      "cluster: {preset: h100-sxm-80gb, nodes: 2}\n"
      "training: {seq_len: 2048}\n"
      "variation: {slow_nodes: '1:1.2'}\n");
  const Schedule s = lower(sc);
  const auto ranks = sim::simulate_ranks(sc, s, sim::rank_variation(sc.variation, s.world_size, 8));
  ASSERT_EQ(ranks.classes.size(), 2U);
  const Timeline t = rank_lanes(ranks);
  const Timeline& one = ranks.classes.front().result.timeline;
  // Per class: the compute stream and the all-gather and reduce-scatter streams.
  std::set<StreamId> with_collectives;
  for (const auto& op : one.ops)
    if (is_collective(op.kind)) with_collectives.insert(op.stream);
  ASSERT_EQ(with_collectives.size(), 2U);
  const std::size_t gpu_streams = 1 + with_collectives.size();
  ASSERT_EQ(t.streams.size(), 2 * gpu_streams);
  EXPECT_EQ(t.streams.front().name.rfind("ranks 8-15 (8) · ", 0), 0U) << t.streams.front().name;
  EXPECT_NE(t.streams.back().name.find("ranks 0-7 (8)"), std::string::npos);
  // The slow class was last to be ready at every collective it held the others at, and those are
  // labelled on its lanes only.
  std::size_t labelled = 0;
  for (const auto& op : t.ops) {
    if (op.label < 0) continue;
    ++labelled;
    EXPECT_TRUE(is_collective(op.kind));
    EXPECT_EQ(t.op_labels[static_cast<std::size_t>(op.label)], "last to be ready: ranks 8-15");
    EXPECT_LT(op.stream, static_cast<StreamId>(gpu_streams));
  }
  EXPECT_EQ(labelled, ranks.classes[ranks.straggler].last_ready.size());
  EXPECT_GT(labelled, 0U);
}

}  // namespace
}  // namespace shardscope::gui
