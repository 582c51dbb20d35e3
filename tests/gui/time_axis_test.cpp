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

TEST(TimeAxis, NiceStepsAreTheSmallestOneTwoOrFiveAtLeastTheRawStep) {
  EXPECT_DOUBLE_EQ(nice_step(0.3), 0.5);
  EXPECT_DOUBLE_EQ(nice_step(0.2), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(16.6), 20.0);
  EXPECT_DOUBLE_EQ(nice_step(20.0), 20.0);
  EXPECT_DOUBLE_EQ(nice_step(51), 100.0);
  EXPECT_DOUBLE_EQ(nice_step(3e9), 5e9);
}

TEST(TimeAxis, TickLabelsOfAViewShareOneUnitAndAreWholeNumbers) {
  // A 5.1 s step at 1400 px gives 500 ms ticks: every label in ms, whole numbers.
  TimeAxis axis(0, 5'097 * kNsPerMs, 1219);
  const TimeNs step = tick_step(axis, 110);
  EXPECT_EQ(step, 500 * kNsPerMs);
  const TimeUnit unit = tick_unit(step);
  EXPECT_STREQ(unit.name, "ms");
  EXPECT_EQ(tick_label(0, unit), "0 ms");
  EXPECT_EQ(tick_label(3 * step, unit), "1500 ms");
  EXPECT_STREQ(tick_unit(2 * kNsPerS).name, "s");
  EXPECT_STREQ(tick_unit(20 * kNsPerUs).name, "us");
  EXPECT_STREQ(tick_unit(500).name, "ns");
  EXPECT_EQ(tick_label(1'234'000, TimeUnit{"ms", kNsPerMs}), "1.234 ms");
}

}  // namespace
}  // namespace shardscope::gui
