#include "shardscope/gui/time_axis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace shardscope::gui {

TimeAxis::TimeAxis(TimeNs start, TimeNs end, double width_px)
    : limit_(std::max(end, TimeNs{1})), width_(std::max(1.0, width_px)) {
  set_range(start, end);
}

void TimeAxis::set_limit(TimeNs limit) {
  limit_ = std::max<TimeNs>(limit, 1);
  clamp();
}

void TimeAxis::set_width(double width_px) {
  width_ = std::max(1.0, width_px);
}

void TimeAxis::set_range(TimeNs start, TimeNs end) {
  start_ = start;
  end_ = std::max(end, start + 1);
  clamp();
}

double TimeAxis::to_px(TimeNs t) const {
  return static_cast<double>(t - start_) / static_cast<double>(span()) * width_;
}

TimeNs TimeAxis::to_time(double px) const {
  return start_ + static_cast<TimeNs>(std::llround(px / width_ * static_cast<double>(span())));
}

void TimeAxis::zoom(double factor, double anchor_px) {
  if (factor <= 0) return;
  const TimeNs anchor = to_time(anchor_px);
  const double new_span =
      std::max(static_cast<double>(kMinSpan), static_cast<double>(span()) / factor);
  const double left = anchor_px / width_ * new_span;
  start_ = anchor - static_cast<TimeNs>(std::llround(left));
  end_ = start_ + static_cast<TimeNs>(std::llround(new_span));
  clamp();
}

void TimeAxis::pan(double dx_px) {
  const auto shift = static_cast<TimeNs>(std::llround(dx_px * ns_per_px()));
  start_ -= shift;
  end_ -= shift;
  clamp();
}

void TimeAxis::clamp() {
  TimeNs span = std::min(end_ - start_, limit_);
  span = std::max(span, std::min(kMinSpan, limit_));
  start_ = std::clamp<TimeNs>(start_, 0, limit_ - span);
  end_ = start_ + span;
}

double nice_step(double raw) {
  if (!(raw > 0)) return 1;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    // The tolerance keeps 0.3 / 0.1 = 2.9999999999999996 from giving 5 instead of 2.
    if (decade * m >= raw * (1 - 1e-12)) return decade * m;
  }
  return decade * 10;
}

TimeNs tick_step(const TimeAxis& axis, double target_px) {
  const double raw = std::max(axis.ns_per_px() * target_px, 1.0);
  return std::max<TimeNs>(1, std::llround(nice_step(raw)));
}

TimeUnit tick_unit(TimeNs step) {
  for (TimeUnit unit :
       {TimeUnit{"s", kNsPerS}, TimeUnit{"ms", kNsPerMs}, TimeUnit{"us", kNsPerUs}}) {
    if (step >= unit.ns) return unit;
  }
  return TimeUnit{};
}

std::string tick_label(TimeNs t, TimeUnit unit) {
  // Ticks sit at multiples of a step of at least one unit: whole numbers of units.
  if (t % unit.ns == 0) return fmt::format("{} {}", t / unit.ns, unit.name);
  return fmt::format("{:.3f} {}", unit.of(t), unit.name);
}

}  // namespace shardscope::gui
