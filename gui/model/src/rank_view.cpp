#include "shardscope/gui/rank_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace shardscope::gui {

Timeline rank_lanes(const sim::RankSimulation& ranks, std::size_t max_classes) {
  Timeline out;
  if (ranks.classes.empty()) return out;
  const Timeline& first = ranks.classes.front().result.timeline;
  out.source = first.source;
  out.provenance = first.provenance;
  out.facts = first.facts;
  out.groups = first.groups;  // one schedule: the classes share groups and communicators
  out.communicators = first.communicators;
  for (std::size_t c : sim::most_waited_for(ranks, max_classes)) {
    const sim::RankClass& rc = ranks.classes[c];
    const Timeline& t = rc.result.timeline;
    const std::string who =
        fmt::format("ranks {} ({})", sim::rank_ranges(rc.ranks), rc.ranks.size());
    const auto last_label = static_cast<std::int32_t>(out.op_labels.size());
    out.op_labels.push_back(fmt::format("last to be ready: ranks {}", sim::rank_ranges(rc.ranks)));
    // This class's compute stream and the streams its collectives run on become lanes.
    std::vector<char> shown(t.streams.size(), 0);
    for (const TimelineOp& op : t.ops) {
      if (op.stream >= 0 && is_collective(op.kind)) shown[static_cast<std::size_t>(op.stream)] = 1;
    }
    for (std::size_t s = 0; s < t.streams.size(); ++s) {
      if (t.streams[s].kind == StreamKind::compute) {
        shown[s] = 1;  // the first compute stream: the default stream the kernels run on
        break;
      }
    }
    std::vector<StreamId> lane(t.streams.size(), kNone);
    for (std::size_t s = 0; s < t.streams.size(); ++s) {
      if (!shown[s]) continue;
      lane[s] = static_cast<StreamId>(out.streams.size());
      out.streams.push_back({fmt::format("{} · {}", who, t.streams[s].name), t.streams[s].kind});
    }
    const std::set<OpId> last(rc.last_ready.begin(), rc.last_ready.end());
    for (const TimelineOp& op : t.ops) {
      if (op.stream < 0 || lane[static_cast<std::size_t>(op.stream)] == kNone) continue;
      TimelineOp copy = op;
      copy.stream = lane[static_cast<std::size_t>(op.stream)];
      copy.label = last.contains(op.op) ? last_label : kNone;
      out.ops.push_back(std::move(copy));
    }
  }
  std::stable_sort(out.ops.begin(), out.ops.end(), [](const TimelineOp& a, const TimelineOp& b) {
    return a.start != b.start ? a.start < b.start : a.stream < b.stream;
  });
  return out;
}

std::vector<HistogramBin> histogram(const std::vector<TimeNs>& times, int bins) {
  if (times.empty() || bins < 1) return {};
  const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
  if (*lo == *hi) return {{*lo, *hi, static_cast<int>(times.size())}};
  std::vector<HistogramBin> out(static_cast<std::size_t>(bins));
  const double width = static_cast<double>(*hi - *lo) / bins;
  for (int b = 0; b < bins; ++b) {
    out[static_cast<std::size_t>(b)].from = *lo + static_cast<TimeNs>(std::llround(width * b));
    out[static_cast<std::size_t>(b)].to = *lo + static_cast<TimeNs>(std::llround(width * (b + 1)));
  }
  out.back().to = *hi;
  for (TimeNs t : times) {
    const auto b = std::min<std::size_t>(
        static_cast<std::size_t>(static_cast<double>(t - *lo) / width), out.size() - 1);
    ++out[b].count;
  }
  return out;
}

}  // namespace shardscope::gui
