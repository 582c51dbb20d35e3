#pragma once
// Maps a visible time range [start, end) onto `width` pixels, and zooms and pans it.
// Pure arithmetic, no Qt: tested without a display.

#include <string>

#include "shardscope/core/units.hpp"

namespace shardscope::gui {

class TimeAxis {
 public:
  TimeAxis() = default;
  TimeAxis(TimeNs start, TimeNs end, double width_px);

  /// The whole data range [0, limit]; zoom and pan stay inside it.
  void set_limit(TimeNs limit);
  void set_width(double width_px);
  void set_range(TimeNs start, TimeNs end);

  double to_px(TimeNs t) const;
  TimeNs to_time(double px) const;
  /// Zooms by `factor` (> 1 zooms in) keeping the time under `anchor_px` where it is.
  void zoom(double factor, double anchor_px);
  /// Moves the view by `dx_px` pixels (positive: earlier times come into view).
  void pan(double dx_px);
  void show_all() { set_range(0, limit_); }

  TimeNs start() const { return start_; }
  TimeNs end() const { return end_; }
  TimeNs span() const { return end_ - start_; }
  TimeNs limit() const { return limit_; }
  double width() const { return width_; }
  double ns_per_px() const { return static_cast<double>(span()) / width_; }

  static constexpr TimeNs kMinSpan = 1000;  // 1 µs across the view at most zoom

 private:
  void clamp();

  TimeNs start_ = 0;
  TimeNs end_ = 1;
  TimeNs limit_ = 1;
  double width_ = 1;
};

/// The smallest of 1, 2 or 5 × 10^k that is at least `raw` (> 0): a "nice" tick interval.
double nice_step(double raw);

/// About this many pixels between time ticks, in the timeline and in the memory chart alike.
inline constexpr double kTickSpacingPx = 110;

/// A tick step of 1, 2 or 5 × 10^k ns giving about `target_px` between ticks.
TimeNs tick_step(const TimeAxis& axis, double target_px);

/// The unit every time label of a view uses (the timeline's ticks and the memory chart's axis):
/// the largest of s, ms, us and ns that is no larger than the tick step, so that ticks at
/// multiples of the step read as whole numbers ("500 ms", "1000 ms").
struct TimeUnit {
  const char* name = "ns";
  TimeNs ns = 1;  // nanoseconds per unit
  double of(TimeNs t) const { return static_cast<double>(t) / static_cast<double>(ns); }
};
TimeUnit tick_unit(TimeNs step);
/// "1500 ms": `t` in `unit`, a whole number for a tick (a multiple of a step of at least one
/// unit), three decimals otherwise.
std::string tick_label(TimeNs t, TimeUnit unit);

}  // namespace shardscope::gui
