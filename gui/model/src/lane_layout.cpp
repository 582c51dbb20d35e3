#include "shardscope/gui/lane_layout.hpp"

#include <algorithm>

namespace shardscope::gui {

LaneLayout::LaneLayout(const Timeline* timeline) : timeline_(timeline) {
  const auto& t = *timeline;
  // The CPU lane first, then streams in their order.
  std::vector<StreamId> order;
  for (std::size_t s = 0; s < t.streams.size(); ++s) {
    if (t.streams[s].kind == StreamKind::cpu)
      order.insert(order.begin(), static_cast<StreamId>(s));
    else
      order.push_back(static_cast<StreamId>(s));
  }
  std::vector<int> lane_of(t.streams.size(), 0);
  for (std::size_t l = 0; l < order.size(); ++l)
    lane_of[static_cast<std::size_t>(order[l])] = static_cast<int>(l);
  lanes_.assign(order.size(), {});
  lane_stream_ = order;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.stream < 0 || static_cast<std::size_t>(op.stream) >= t.streams.size()) continue;
    lanes_[static_cast<std::size_t>(lane_of[static_cast<std::size_t>(op.stream)])].push_back(
        static_cast<int>(i));
  }
  max_end_.resize(lanes_.size());
  for (std::size_t l = 0; l < lanes_.size(); ++l) {
    auto& ops = lanes_[l];
    std::stable_sort(ops.begin(), ops.end(), [&](int a, int b) {
      return t.ops[static_cast<std::size_t>(a)].start < t.ops[static_cast<std::size_t>(b)].start;
    });
    TimeNs m = 0;
    for (int i : ops) {
      m = std::max(m, t.ops[static_cast<std::size_t>(i)].end);
      max_end_[l].push_back(m);
    }
  }
}

std::vector<DrawItem> LaneLayout::visible(int lane, const TimeAxis& axis, double min_px) const {
  std::vector<DrawItem> out;
  const auto& ops = lanes_[static_cast<std::size_t>(lane)];
  const auto& ends = max_end_[static_cast<std::size_t>(lane)];
  const auto& all = timeline_->ops;
  // First op that may reach into the range: running max of ends ≥ range start.
  auto first = static_cast<std::size_t>(std::lower_bound(ends.begin(), ends.end(), axis.start()) -
                                        ends.begin());
  for (std::size_t k = first; k < ops.size(); ++k) {
    const auto& op = all[static_cast<std::size_t>(ops[k])];
    if (op.start >= axis.end()) break;
    if (op.end <= op.start || op.end <= axis.start()) continue;
    const double x0 = std::max(0.0, axis.to_px(op.start));
    const double x1 = std::min(axis.width(), axis.to_px(op.end));
    const bool narrow = x1 - x0 < min_px;
    if (narrow && !out.empty() && out.back().x1 + min_px > x0 &&
        (out.back().op < 0 || out.back().x1 - out.back().x0 < min_px)) {
      // Fold into the previous narrow item or block.
      DrawItem& prev = out.back();
      prev.mixed |= prev.kind != op.kind;
      prev.count += 1;
      prev.op = -1;
      prev.x1 = std::max(prev.x1, x1);
      continue;
    }
    out.push_back({x0, x1, ops[k], 1, op.kind});
  }
  return out;
}

int LaneLayout::op_at(int lane, TimeNs t) const {
  const auto& ops = lanes_[static_cast<std::size_t>(lane)];
  const auto& all = timeline_->ops;
  auto it = std::upper_bound(ops.begin(), ops.end(), t, [&](TimeNs v, int i) {
    return v < all[static_cast<std::size_t>(i)].start;
  });
  while (it != ops.begin()) {
    --it;
    const auto& op = all[static_cast<std::size_t>(*it)];
    if (op.start <= t && t < op.end) return *it;
    if (op.end <= t) break;
  }
  return -1;
}

}  // namespace shardscope::gui
