#include "shardscope/gui/time_axis.hpp"

#include <gtest/gtest.h>

namespace shardscope::gui {
namespace {

TEST(TimeAxis, MapsTimeToPixelsAndBack) {
  TimeAxis axis(0, 1000 * kNsPerUs, 1000);
  EXPECT_DOUBLE_EQ(axis.to_px(500 * kNsPerUs), 500.0);
  EXPECT_EQ(axis.to_time(250.0), 250 * kNsPerUs);
  EXPECT_DOUBLE_EQ(axis.ns_per_px(), 1000.0);
}

TEST(TimeAxis, ZoomKeepsTheTimeUnderTheCursor) {
  TimeAxis axis(0, 10 * kNsPerMs, 800);
  const TimeNs before = axis.to_time(200);
  axis.zoom(4.0, 200);
  EXPECT_EQ(axis.span(), 10 * kNsPerMs / 4);
  EXPECT_NEAR(static_cast<double>(axis.to_time(200)), static_cast<double>(before), 20.0);
  axis.zoom(1e9, 200);
  EXPECT_EQ(axis.span(), TimeAxis::kMinSpan);  // zoom stops at 1 µs across the view
}

TEST(TimeAxis, PanAndZoomStayInsideTheData) {
  TimeAxis axis(0, 10 * kNsPerMs, 1000);
  axis.zoom(2.0, 0);
  axis.pan(5000);  // far to the left
  EXPECT_EQ(axis.start(), 0);
  axis.pan(-1e7);  // far to the right
  EXPECT_EQ(axis.end(), 10 * kNsPerMs);
  axis.zoom(0.001, 500);  // zoom out past everything
  EXPECT_EQ(axis.start(), 0);
  EXPECT_EQ(axis.end(), 10 * kNsPerMs);
}

TEST(TimeAxis, TickStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  for (TimeNs span :
       {TimeNs{1234}, TimeNs{987'654}, TimeNs{3'000'000'000}, TimeNs{77 * kNsPerMs}}) {
    TimeAxis axis(0, span, 1000);
    const TimeNs step = tick_step(axis, 100);
    TimeNs mantissa = step;
    while (mantissa % 10 == 0) mantissa /= 10;
    EXPECT_TRUE(mantissa == 1 || mantissa == 2 || mantissa == 5) << step;
    EXPECT_GE(axis.to_px(step) - axis.to_px(0), 100.0 - 1e-9);
    EXPECT_LE(axis.to_px(step) - axis.to_px(0), 500.0);
  }
}

}  // namespace
}  // namespace shardscope::gui
