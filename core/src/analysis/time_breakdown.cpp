#include "shardscope/core/time_breakdown.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>

#include "shardscope/core/intervals.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope::analysis {
namespace {

constexpr std::array<std::string_view, 3> kTypeNames{"computation", "communication", "memory"};

std::string type_name(unsigned mask) {
  std::string out;
  for (std::size_t bit = 0; bit < kTypeNames.size(); ++bit) {
    if ((mask & (1U << bit)) == 0) continue;
    out += (out.empty() ? "" : " overlapping ") + std::string(kTypeNames[bit]);
  }
  return out;
}

double share(TimeNs part, TimeNs whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

WorkClass work_class(const Timeline& t, const TimelineOp& op) {
  if (is_collective(op.kind)) return WorkClass::communication;
  if (op.kind == OpKind::h2d || op.kind == OpKind::d2h) return WorkClass::memory;
  // Kernel names, as HTA's regular expressions read them (hta/utils/utils.py): ^nccl.*Kernel,
  // ^Memcpy|^Memset|^dma, then .*Memcpy|^Memset|.*Sync is not computation.
  const std::string_view label = op_label(t, op);
  if (label.starts_with("nccl") && label.find("Kernel") != std::string_view::npos)
    return WorkClass::communication;
  if (label.starts_with("Memcpy") || label.starts_with("Memset") || label.starts_with("dma"))
    return WorkClass::memory;
  if (label.find("Memcpy") != std::string_view::npos ||
      label.find("Sync") != std::string_view::npos)
    return WorkClass::other;
  return WorkClass::computation;
}

TimeBreakdown time_breakdown(const Timeline& t) {
  TimeBreakdown b;
  b.name = t.name;
  b.rank = t.provenance.rank;
  if (t.ops.empty()) return b;
  std::vector<Interval> all;
  std::array<std::vector<Interval>, 3> by_class;  // computation, communication, memory
  TimeNs first = t.ops.front().start, last = t.ops.front().end;
  for (const TimelineOp& op : t.ops) {
    first = std::min(first, op.start);
    last = std::max(last, op.end);
    all.emplace_back(op.start, op.end);
    const WorkClass c = work_class(t, op);
    if (c != WorkClass::other) by_class[static_cast<std::size_t>(c)].emplace_back(op.start, op.end);
  }
  for (auto& intervals : by_class) intervals = merge_intervals(std::move(intervals));
  b.span = last - first;
  b.idle = b.span - total_length(merge_intervals(std::move(all)));
  b.compute = total_length(by_class[0]);
  b.non_compute = b.span - b.idle - b.compute;
  const TimeNs communication = total_length(by_class[1]);
  if (communication > 0) {
    b.comm_comp_overlap =
        static_cast<double>(communication - uncovered_length(by_class[1], by_class[0])) /
        static_cast<double>(communication);
  }
  // A sweep over the classes' edges: how long each set of classes runs.
  std::vector<std::pair<TimeNs, int>> edges;  // (time, +bit or −bit)
  for (std::size_t c = 0; c < by_class.size(); ++c) {
    const int bit = 1 << c;
    for (const Interval& i : by_class[c]) {
      edges.emplace_back(i.first, bit);
      edges.emplace_back(i.second, -bit);
    }
  }
  std::sort(edges.begin(), edges.end());
  std::map<unsigned, TimeNs> time_by_mask;
  int mask = 0;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    mask += edges[i].second;
    if (i + 1 < edges.size() && mask > 0)
      time_by_mask[static_cast<unsigned>(mask)] += edges[i + 1].first - edges[i].first;
  }
  for (const auto& [m, time] : time_by_mask) {
    if (time > 0) b.by_type.emplace_back(type_name(m), time);
  }
  return b;
}

std::string time_breakdown_table(const std::vector<TimeBreakdown>& runs) {
  std::string out;
  for (const TimeBreakdown& b : runs) {
    out += fmt::format("{} (rank {}): device time as HTA breaks it down\n", b.name, b.rank);
    const auto row = [&](std::string_view label, TimeNs time, TimeNs whole) {
      out += fmt::format("  {:<58}{:>14}  {:>6.2f} %\n", label, format_duration(time),
                         share(time, whole));
    };
    out += fmt::format("  {:<58}{:>14}\n", "span (first op's start to last op's end)",
                       format_duration(b.span));
    row("idle", b.idle, b.span);
    row("compute", b.compute, b.span);
    row("non-compute", b.non_compute, b.span);
    out += fmt::format("  {:<58}{:>14}\n", "communication overlapped by computation",
                       b.comm_comp_overlap ? fmt::format("{:.2f} %", 100 * *b.comm_comp_overlap)
                                           : std::string("no communication"));
    TimeNs busy = 0;
    for (const auto& [type, time] : b.by_type) busy += time;
    out += "  time by type (share of the time any runs)\n";
    for (const auto& [type, time] : b.by_type) row("  " + type, time, busy);
  }
  return out;
}

std::string time_breakdown_json(const std::vector<TimeBreakdown>& runs) {
  nlohmann::ordered_json out{{"schema", "shardscope.breakdown/1"},
                             {"runs", nlohmann::ordered_json::array()}};
  for (const TimeBreakdown& b : runs) {
    nlohmann::ordered_json r{{"name", b.name},          {"rank", b.rank},
                             {"span_ns", b.span},       {"idle_ns", b.idle},
                             {"compute_ns", b.compute}, {"non_compute_ns", b.non_compute}};
    r["comm_comp_overlap"] =
        b.comm_comp_overlap ? nlohmann::ordered_json(*b.comm_comp_overlap) : nullptr;
    nlohmann::ordered_json types = nlohmann::ordered_json::object();
    for (const auto& [type, time] : b.by_type) types[type + "_ns"] = time;
    r["by_type"] = std::move(types);
    out["runs"].push_back(std::move(r));
  }
  return out.dump(2) + "\n";
}

}  // namespace shardscope::analysis
