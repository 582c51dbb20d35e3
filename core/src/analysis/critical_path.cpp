#include <algorithm>
#include <array>
#include <unordered_map>

#include "shardscope/core/analysis.hpp"

namespace shardscope::analysis {
namespace {

constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);

// Per timeline op (by index): what it may have waited for, as timeline indices.
struct Predecessors {
  std::unordered_map<OpId, std::size_t> by_op_id;  // schedule op id → timeline index
  std::vector<std::size_t> previous_stream;        // the op before on its stream
  std::vector<std::size_t> previous_comm;          // the collective before on its communicator
};

Predecessors predecessors(const Timeline& t) {
  Predecessors p;
  p.previous_stream.assign(t.ops.size(), kNoIndex);
  p.previous_comm.assign(t.ops.size(), kNoIndex);
  std::vector<std::size_t> last_on_stream(t.streams.size(), kNoIndex);
  std::vector<std::size_t> last_on_comm(t.communicators.size(), kNoIndex);
  // Ops are sorted by start: the op before on a stream is the last one seen on it.
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const auto& op = t.ops[i];
    if (op.op >= 0) p.by_op_id[op.op] = i;
    auto& stream = last_on_stream[static_cast<std::size_t>(op.stream)];
    p.previous_stream[i] = stream;
    stream = i;
    if (op.comm != kNone) {
      auto& comm = last_on_comm[static_cast<std::size_t>(op.comm)];
      p.previous_comm[i] = comm;
      comm = i;
    }
  }
  return p;
}

// The producer's own path: each op's time from the Timeline, the CPU gaps as recorded.
CriticalPath recorded_critical_path(const Timeline& t) {
  std::unordered_map<OpId, const TimelineOp*> by_id;
  for (const auto& op : t.ops) by_id.emplace(op.op, &op);
  CriticalPathBuilder builder;
  for (const CriticalStep& step : t.critical_path) {
    const auto it = by_id.find(step.op);
    if (it == by_id.end()) continue;  // the reader refuses such a path; built in memory, skip it
    builder.add_op(step.op, it->second->kind, it->second->duration());
    if (step.issue_bound) builder.add_cpu_gap(step.cpu_gap);
  }
  return std::move(builder).finish();
}

}  // namespace

CriticalPath CriticalPathBuilder::finish() && {
  for (auto kind : all_op_kinds()) {
    if (on_path_[static_cast<std::size_t>(kind)])
      path_.by_kind[std::string(to_string(kind))] = by_kind_[static_cast<std::size_t>(kind)];
  }
  if (cpu_on_path_) path_.by_kind["cpu"] = cpu_;
  return std::move(path_);
}

CriticalPath critical_path(const Timeline& t) {
  if (!t.critical_path.empty()) return recorded_critical_path(t);
  const bool has_deps = std::any_of(t.ops.begin(), t.ops.end(),
                                    [](const TimelineOp& op) { return !op.deps.empty(); });
  if (!has_deps || t.ops.empty()) return {};
  const auto p = predecessors(t);
  const int last = t.last_iteration();
  std::size_t cur = kNoIndex;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    if (cur == kNoIndex || t.ops[i].end > t.ops[cur].end) cur = i;
  }
  CriticalPathBuilder builder;
  while (cur != kNoIndex && t.ops[cur].iteration == last) {
    const auto& op = t.ops[cur];
    builder.add_op(op.op, op.kind, op.duration());
    // The candidate that ended last (and no later than this op started) bound it.
    std::size_t best = kNoIndex;
    const auto consider = [&](std::size_t c) {
      if (c == kNoIndex || c == cur || t.ops[c].end > op.start) return;
      if (best == kNoIndex || t.ops[c].end > t.ops[best].end) best = c;
    };
    for (OpId d : op.deps) {
      if (const auto it = p.by_op_id.find(d); it != p.by_op_id.end()) consider(it->second);
    }
    consider(p.previous_stream[cur]);
    consider(p.previous_comm[cur]);
    // Nothing the GPU did held it: the CPU issued it late.
    if (best != kNoIndex && t.ops[best].end < op.start)
      builder.add_cpu_gap(op.start - t.ops[best].end);
    cur = best;
  }
  return std::move(builder).finish();
}

}  // namespace shardscope::analysis
