#include "shardscope/gui/flow_layout.hpp"

#include <gtest/gtest.h>

namespace shardscope::gui {
namespace {

TEST(FlowLayout, WrapsBeforeAnItemWouldOverflowAndKeepsTheOrder) {
  const auto places = flow_layout({40, 50, 30, 60}, 100, 10);
  ASSERT_EQ(places.size(), 4u);
  EXPECT_EQ(places[0].row, 0);
  EXPECT_DOUBLE_EQ(places[0].x, 0);
  EXPECT_EQ(places[1].row, 0);
  EXPECT_DOUBLE_EQ(places[1].x, 50);  // 40 + gap: ends at 100, fits exactly
  EXPECT_EQ(places[2].row, 1);        // 110 + 30 would overflow
  EXPECT_DOUBLE_EQ(places[2].x, 0);
  EXPECT_EQ(places[3].row, 1);
  EXPECT_DOUBLE_EQ(places[3].x, 40);
  EXPECT_EQ(flow_rows(places), 2);
}

TEST(FlowLayout, NoItemEndsPastTheWidthUnlessItIsWiderAlone) {
  const std::vector<double> widths{120, 35, 35, 35, 90, 10, 10, 250, 5};
  for (double available : {60.0, 100.0, 200.0, 1000.0}) {
    const auto places = flow_layout(widths, available, 8);
    for (std::size_t i = 0; i < widths.size(); ++i) {
      if (widths[i] > available) {
        EXPECT_DOUBLE_EQ(places[i].x, 0);  // a row of its own
        if (i + 1 < widths.size()) {
          EXPECT_GT(places[i + 1].row, places[i].row);
        }
      } else {
        EXPECT_LE(places[i].x + widths[i], available);
      }
      if (i > 0) {
        EXPECT_GE(places[i].row, places[i - 1].row);
      }
    }
  }
  EXPECT_EQ(flow_rows({}), 0);
}

}  // namespace
}  // namespace shardscope::gui
