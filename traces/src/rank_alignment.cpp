#include "shardscope/traces/rank_alignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/error.hpp"

namespace shardscope::traces {
namespace {

// (kind, communicator name, k-th of that pair in start order) → end time.
using CollectiveKey = std::tuple<OpKind, std::string, int>;

std::map<CollectiveKey, TimeNs> collective_ends(const Timeline& t) {
  std::map<CollectiveKey, TimeNs> out;
  std::map<std::pair<OpKind, std::string>, int> seen;
  for (const auto& op : t.ops) {  // timelines keep ops in start order
    if (!is_collective(op.kind)) continue;
    const std::string comm =
        op.comm == kNone ? std::string() : t.communicators[static_cast<std::size_t>(op.comm)].name;
    const int k = seen[{op.kind, comm}]++;
    out.emplace(CollectiveKey{op.kind, comm, k}, op.end);
  }
  return out;
}

TimeNs median(std::vector<TimeNs> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

void shift(Timeline& t, TimeNs by) {
  for (auto& op : t.ops) {
    op.start += by;
    op.end += by;
  }
  for (auto& m : t.memory) m.time += by;
  t.peaks.allocated.time += by;
  t.peaks.reserved.time += by;
}

}  // namespace

std::vector<RankAlignment> align_ranks(std::vector<Timeline>& ranks,
                                       const std::vector<std::string>& names) {
  std::vector<RankAlignment> out;
  if (ranks.empty()) return out;
  // Traces of one run: the same world. Rank 0 of 8 beside rank 1 of 4 are two jobs.
  for (std::size_t i = 1; i < ranks.size(); ++i) {
    if (ranks[i].facts.world_size != ranks[0].facts.world_size) {
      throw ValidationError(
          {Problem{names[i], "distributedInfo.world_size",
                   fmt::format("is {} ranks, where {} says {}: traces of two different runs",
                               ranks[i].facts.world_size, names[0], ranks[0].facts.world_size),
                   "traces of the ranks of one run"}});
    }
    // One run's ranks ran on one kind of GPU.
    const auto& device = ranks[i].provenance.device;
    const auto& first = ranks[0].provenance.device;
    if (!device.empty() && !first.empty() && device != first) {
      throw ValidationError(
          {Problem{names[i], "deviceProperties[0].name",
                   fmt::format("is '{}', where {} says '{}': traces of two different runs", device,
                               names[0], first),
                   "traces of the ranks of one run"}});
    }
  }
  std::map<int, std::size_t> by_rank;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int rank = ranks[i].provenance.rank;
    if (const auto [it, added] = by_rank.emplace(rank, i); !added) {
      throw ValidationError(
          {Problem{names[i], "distributedInfo.rank",
                   fmt::format("rank {} again ({} has it too)", rank, names[it->second]),
                   "one trace per rank"}});
    }
  }
  const std::size_t reference = by_rank.begin()->second;
  const auto reference_ends = collective_ends(ranks[reference]);
  for (const auto& [rank, i] : by_rank) {
    RankAlignment a;
    a.rank = rank;
    if (i != reference) {
      std::vector<TimeNs> deltas;
      for (const auto& [key, end] : collective_ends(ranks[i])) {
        if (const auto it = reference_ends.find(key); it != reference_ends.end())
          deltas.push_back(it->second - end);
      }
      if (deltas.empty()) {
        throw ValidationError(
            {Problem{names[i], "",
                     fmt::format("shares no collective with rank {} ({}): "
                                 "cannot align it",
                                 ranks[reference].provenance.rank, names[reference]),
                     "traces of the same steps of one run"}});
      }
      a.matched = static_cast<int>(deltas.size());
      a.offset = median(deltas);
      std::vector<TimeNs> residuals;
      residuals.reserve(deltas.size());
      for (TimeNs d : deltas) residuals.push_back(d > a.offset ? d - a.offset : a.offset - d);
      a.residual = median(residuals);
      shift(ranks[i], a.offset);
    } else {
      a.matched = static_cast<int>(reference_ends.size());
    }
    out.push_back(a);
  }
  TimeNs earliest = std::numeric_limits<TimeNs>::max();
  for (const auto& t : ranks) {
    for (const auto& op : t.ops) earliest = std::min(earliest, op.start);
  }
  if (earliest == std::numeric_limits<TimeNs>::max()) earliest = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) shift(ranks[i], -earliest);
  for (auto& a : out) {
    a.offset -= earliest;
    a.step_time = analysis::summarize(ranks[by_rank.at(a.rank)]).step_time;
  }
  return out;
}

std::string alignment_report(const std::vector<RankAlignment>& alignment) {
  TimeNs fastest = std::numeric_limits<TimeNs>::max();
  for (const auto& a : alignment) fastest = std::min(fastest, a.step_time);
  std::string out = fmt::format("  {:<6}{:>16}{:>14}{:>14}{:>16}{:>12}\n", "rank", "offset",
                                "collectives", "residual", "step time", "vs fastest");
  for (const auto& a : alignment) {
    const double over = fastest > 0 ? 100.0 * static_cast<double>(a.step_time - fastest) /
                                          static_cast<double>(fastest)
                                    : 0.0;
    out += fmt::format("  {:<6}{:>16}{:>14}{:>14}{:>16}{:>10.1f} %\n", a.rank,
                       format_duration(a.offset), a.matched, format_duration(a.residual),
                       format_duration(a.step_time), over);
  }
  return out;
}

}  // namespace shardscope::traces
