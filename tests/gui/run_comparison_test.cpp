#include "shardscope/gui/run_comparison.hpp"

#include <gtest/gtest.h>

namespace shardscope::gui {
namespace {

analysis::Comparison two_matched_ops() {
  analysis::Comparison c;
  analysis::MatchedOp m;
  m.a_op = 7;
  m.b_op = 12;
  m.a_duration = 4 * kNsPerMs;
  m.duration_delta = 1 * kNsPerMs;  // B took 5 ms
  m.start_delta = 300 * kNsPerUs;   // and started 0.3 ms later
  c.ops.push_back(m);
  return c;
}

TEST(RunComparison, EachSideSeesItsCounterpartsDelta) {
  const auto c = two_matched_ops();
  const auto a = counterparts(c, Side::a);
  ASSERT_EQ(a.count(7), 1u);
  EXPECT_EQ(a.at(7).other_duration, 5 * kNsPerMs);
  EXPECT_EQ(a.at(7).duration_delta, 1 * kNsPerMs);
  EXPECT_EQ(a.at(7).start_delta, 300 * kNsPerUs);
  const auto b = counterparts(c, Side::b);
  ASSERT_EQ(b.count(12), 1u);
  EXPECT_EQ(b.at(12).other_duration, 4 * kNsPerMs);
  EXPECT_EQ(b.at(12).duration_delta, -1 * kNsPerMs);
  EXPECT_EQ(b.at(12).start_delta, -300 * kNsPerUs);
}

TEST(RunComparison, HoverTextGivesDurationDeltaPercentAndStart) {
  const auto c = two_matched_ops();
  EXPECT_EQ(counterpart_text(counterparts(c, Side::a).at(7), "measured"),
            "measured: 5.000 ms (+1.000 ms, +25.0 %), starts 300.000 us later");
  EXPECT_EQ(counterpart_text(counterparts(c, Side::b).at(12), "simulated"),
            "simulated: 4.000 ms (−1.000 ms, −20.0 %), starts 300.000 us earlier");
}

TEST(RunComparison, MetricRowsSayBothValuesAndTheDelta) {
  analysis::Comparison c = two_matched_ops();
  c.a.name = "plan";
  c.a.source = "simulated";
  c.b.name = "run";
  c.b.source = "measured";
  c.metrics.push_back({"step time", "s", 2.0, 2.5});
  c.only_in_b = 3;
  c.extra_in_b.push_back({OpKind::all_gather, 3, 6 * kNsPerMs, {}});
  const auto rows = comparison_rows(c, "simulated", "measured");
  ASSERT_GE(rows.size(), 4u);
  EXPECT_EQ(rows[0].first, "simulated → measured");
  EXPECT_EQ(rows[1].first, "step time");
  EXPECT_EQ(rows[1].second, "2.000 s → 2.500 s (+500.000 ms, +25.0 %)");
  EXPECT_EQ(rows[2].second, "1 (0 only in simulated, 3 only in measured)");
  EXPECT_EQ(rows[3].first, "all_gather only in measured");
  EXPECT_EQ(rows[3].second, "3 ops, 6.000 ms (not in simulated)");
}

}  // namespace
}  // namespace shardscope::gui
