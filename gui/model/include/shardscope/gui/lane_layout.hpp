#pragma once
// Lanes of a timeline (one per stream, the CPU first) and what to draw of each in a visible range:
// items found by binary search (cost follows the visible items, not the timeline), and items
// narrower than `min_px` folded into one counted block, as Tracy does. Stays smooth on 1M ops.

#include <vector>

#include "shardscope/core/timeline.hpp"
#include "shardscope/gui/time_axis.hpp"

namespace shardscope::gui {

struct DrawItem {
  double x0 = 0;
  double x1 = 0;
  int op = -1;                    // index into Timeline::ops, or -1 for a folded block
  int count = 1;                  // ops in a folded block
  OpKind kind = OpKind::forward;  // the kind of the (first) op
  bool mixed = false;             // a folded block of several kinds
};

class LaneLayout {
 public:
  LaneLayout() = default;
  explicit LaneLayout(const Timeline* timeline);

  int lane_count() const { return static_cast<int>(lanes_.size()); }
  StreamId lane_stream(int lane) const { return lane_stream_[static_cast<std::size_t>(lane)]; }
  /// Op indices of a lane, sorted by start (ops of one stream do not overlap).
  const std::vector<int>& lane_ops(int lane) const {
    return lanes_[static_cast<std::size_t>(lane)];
  }

  /// What to draw of `lane` in the axis' range; zero-length ops are skipped.
  std::vector<DrawItem> visible(int lane, const TimeAxis& axis, double min_px = 3.0) const;
  /// The op of `lane` under time `t`, or -1.
  int op_at(int lane, TimeNs t) const;

 private:
  const Timeline* timeline_ = nullptr;
  std::vector<std::vector<int>> lanes_;
  std::vector<StreamId> lane_stream_;
  std::vector<std::vector<TimeNs>> max_end_;  // running max of end per lane, for binary search
};

}  // namespace shardscope::gui
