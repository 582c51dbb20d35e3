#pragma once
// Maps a visible time range [start, end) onto `width` pixels, and zooms and pans it.
// Pure arithmetic, no Qt: tested without a display.

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

/// "1.5 ms", "120 us": tick labels with units; and a tick step of 1, 2 or 5 × 10^k ns giving about
/// `target_px` between ticks.
TimeNs tick_step(const TimeAxis& axis, double target_px);

}  // namespace shardscope::gui
