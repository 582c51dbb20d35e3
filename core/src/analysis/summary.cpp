#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/intervals.hpp"

namespace shardscope::analysis {
namespace {

constexpr std::size_t kPhases = kPhaseCount;

// Time per phase within the step window, each instant counted once: where spans overlap (the next
// micro-batch's forward starting while a backward drains, an optimizer overlapping the last
// reduce-scatter) the instant belongs to the span that started last, the work the GPU moved on to.
// So the phases never sum past the step. `spans` is indexed by micro-batch · phases + phase.
std::array<TimeNs, kPhases> disjoint_phase_times(const std::map<std::size_t, Interval>& spans,
                                                 TimeNs window_start, TimeNs window_end) {
  struct Edge {
    TimeNs at;
    bool opens;
    TimeNs start;  // of the span, to rank open spans
    std::size_t phase;
  };
  std::vector<Edge> edges;
  for (const auto& [key, span] : spans) {
    const TimeNs begin = std::max(span.first, window_start),
                 end = std::min(span.second, window_end);
    if (end <= begin) continue;
    edges.push_back({begin, true, begin, key % kPhases});
    edges.push_back({end, false, begin, key % kPhases});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::array<TimeNs, kPhases> out{};
  std::multiset<std::pair<TimeNs, std::size_t>>
      open;  // (start, phase); the last is the latest start
  TimeNs previous = 0;
  for (const Edge& e : edges) {
    if (!open.empty()) out[open.rbegin()->second] += e.at - previous;
    if (e.opens) {
      open.emplace(e.start, e.phase);
    } else {
      open.erase(open.find({e.start, e.phase}));
    }
    previous = e.at;
  }
  return out;
}

// The steady-state window: [end of the iteration before the last, end of the last].
struct Window {
  int last = 0;
  TimeNs start = 0;
  TimeNs end = 0;
};

Window steady_state(const Timeline& t) {
  Window w;
  w.last = t.last_iteration();
  for (const auto& op : t.ops) {
    if (op.iteration == w.last) w.end = std::max(w.end, op.end);
    if (op.iteration == w.last - 1) w.start = std::max(w.start, op.end);
  }
  return w;
}

bool is_wait(OpKind kind) {
  return kind == OpKind::stream_wait || kind == OpKind::cpu_wait;
}

// Phases, busy time, communication and FLOPs of the last iteration's ops.
void summarize_step(const Timeline& t, const Window& w, Summary& out) {
  std::map<std::size_t, Interval> phase_span;  // by microbatch · kPhases + phase
  auto span = phase_span.end();
  std::vector<Interval> comm, compute;
  std::vector<TimeNs> busy(t.streams.size(), 0);
  std::array<int, kOpKindCount> collectives{};
  double flops = 0, recompute_flops = 0;
  for (const auto& op : t.ops) {
    if (op.iteration != w.last) continue;
    const TimeNs d = op.duration();
    busy[static_cast<std::size_t>(op.stream)] += d;
    flops += op.flops;
    if (op.kind == OpKind::recompute) recompute_flops += op.flops;
    if (!is_wait(op.kind) && d > 0) {
      const auto mb = static_cast<std::size_t>(op.phase == Phase::optimizer ? 0 : op.microbatch);
      const auto key = mb * kPhases + static_cast<std::size_t>(op.phase);
      // Consecutive ops mostly share a phase and micro-batch: look the map up only on a change.
      if (span == phase_span.end() || span->first != key) {
        bool added = false;
        std::tie(span, added) = phase_span.try_emplace(key, op.start, op.end);
      }
      span->second = {std::min(span->second.first, op.start),
                      std::max(span->second.second, op.end)};
    }
    if (is_collective(op.kind)) {
      if (op.phase != Phase::checkpoint) ++collectives[static_cast<std::size_t>(op.kind)];
      comm.emplace_back(op.start, op.end);
    } else if (t.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::compute &&
               d > 0) {
      compute.emplace_back(op.start, op.end);
    }
  }
  for (auto kind : all_op_kinds()) {
    if (collectives[static_cast<std::size_t>(kind)] > 0)
      out.collectives[std::string(to_string(kind))] = collectives[static_cast<std::size_t>(kind)];
  }
  for (const char* k : {"all_gather", "reduce_scatter", "all_reduce"})
    out.collectives.try_emplace(k, 0);
  // HFU counts the FLOPs MFU counts plus those the hardware repeats (activation recompute), under
  // MFU's convention (PaLM's 6N + 12·L·H·Q·T): MFU scaled by executed / model FLOPs of the ops.
  // The ratio first: it is exactly 1 without recompute, so HFU is then MFU to the last bit (and
  // never below it).
  const double model_op_flops = flops - recompute_flops;
  if (out.mfu) out.hfu = model_op_flops > 0 ? *out.mfu * (flops / model_op_flops) : *out.mfu;
  const auto phase_times = disjoint_phase_times(phase_span, w.start, w.end);
  out.forward_time = phase_times[static_cast<std::size_t>(Phase::forward)];
  out.backward_time = phase_times[static_cast<std::size_t>(Phase::backward)];
  out.optimizer_time = phase_times[static_cast<std::size_t>(Phase::optimizer)];
  out.generation_time = phase_times[static_cast<std::size_t>(Phase::generation)];
  const auto comm_union = merge_intervals(std::move(comm));
  out.comm_total = total_length(comm_union);
  out.comm_exposed = uncovered_length(comm_union, merge_intervals(std::move(compute)));
  if (out.comm_total > 0) {
    out.overlap_fraction =
        1.0 - static_cast<double>(out.comm_exposed) / static_cast<double>(out.comm_total);
  }
  const auto last = static_cast<std::size_t>(w.last);
  for (std::size_t st = 0; st < t.streams.size(); ++st) {
    std::optional<TimeNs> b = busy[st];
    // The CPU lane is the thread issuing every op (launch and hook overheads), not only its ops.
    if (t.streams[st].kind == StreamKind::cpu)
      b = last < t.cpu_busy_by_iteration.size() ? std::optional(t.cpu_busy_by_iteration[last])
                                                : std::nullopt;
    out.stream_busy.emplace_back(t.streams[st].name, b);
  }
}

const TimelineOp* find_op(const Timeline& t, OpId id) {
  const auto it =
      std::find_if(t.ops.begin(), t.ops.end(), [&](const TimelineOp& op) { return op.op == id; });
  return it == t.ops.end() ? nullptr : &*it;
}

std::string out_of_memory_text(const Timeline& t, const OutOfMemoryEvent& oom) {
  const TimelineOp* op = oom.op == kNone ? nullptr : find_op(t, oom.op);
  return fmt::format("{} ({}, {}) does not fit at {}: {} reserved of {}", oom.buffer,
                     to_string(oom.category), format_bytes(oom.size),
                     op ? op_description(t, *op) : std::string("start"), format_bytes(oom.reserved),
                     format_bytes(t.memory_capacity));
}

void summarize_memory(const Timeline& t, Summary& out) {
  // A producer that recorded memory has samples or peaks. A caching allocator reserves at least
  // what it hands out, so no reserved bytes beside allocated ones means reserved was not recorded.
  const bool recorded = !t.memory.empty() || t.peaks.allocated.bytes > 0;
  if (recorded) out.peak_allocated = t.peaks.allocated.bytes;
  if (recorded && (t.peaks.reserved.bytes > 0 || t.peaks.allocated.bytes == 0))
    out.peak_reserved = t.peaks.reserved.bytes;
  if (t.memory_capacity > 0) out.capacity = t.memory_capacity;
  if (t.out_of_memory)
    out.fit = Fit::does_not_fit;
  else if (out.peak_reserved && out.capacity)
    out.fit = *out.peak_reserved <= *out.capacity ? Fit::fits : Fit::does_not_fit;
  out.tight_margin = t.memory_tight_margin;
  if (out.peak_reserved && out.capacity) {
    out.headroom = *out.capacity - *out.peak_reserved;
    out.tight =
        out.fit == Fit::fits && static_cast<double>(*out.headroom) <
                                    t.memory_tight_margin * static_cast<double>(*out.capacity);
  }
  if (t.out_of_memory) out.out_of_memory = out_of_memory_text(t, *t.out_of_memory);
  out.allocator_retries = t.allocator_retries;
  const auto last = static_cast<std::size_t>(t.last_iteration());
  // A run of one iteration cannot tell the steady state's retries from the warm-up's.
  if (last >= 1 && last < t.allocator_retries_by_iteration.size())
    out.allocator_retries_per_step = t.allocator_retries_by_iteration[last];
  if (last < t.contention_by_iteration.size()) out.contention = t.contention_by_iteration[last];
  out.peak_by_category = t.peaks.allocated.by_category;
  out.peak_by_category.resize(all_buffer_categories().size(), 0);
  out.peak_allocated_by_phase = t.peaks.allocated_by_phase;
  out.peak_allocated_by_phase.resize(kPhases, 0);
  out.peak_op = "start";
  if (t.peaks.allocated.op != kNone) {
    if (const TimelineOp* op = find_op(t, t.peaks.allocated.op))
      out.peak_op = op_description(t, *op);
  }
}

}  // namespace

std::string op_description(OpKind kind, std::string_view group, Phase phase, int iteration) {
  return fmt::format("{} {} ({}, iteration {})", to_string(kind), group, to_string(phase),
                     iteration);
}

std::string op_description(const Timeline& t, const TimelineOp& op) {
  return op_description(op.kind, group_name(t, op), op.phase, op.iteration);
}

Summary summarize(const Timeline& t, bool with_critical_path) {
  Summary out;
  out.name = t.name;
  out.source = t.source;
  out.world_size = t.facts.world_size;
  const Window w = steady_state(t);
  out.step_time = w.end - w.start;
  const double step_s = ns_to_s(std::max<TimeNs>(1, out.step_time));
  if (t.facts.tokens_per_iteration > 0)
    out.tokens_per_s_per_gpu = static_cast<double>(t.facts.tokens_per_iteration) / step_s;
  out.model_flops_per_token = t.facts.model_flops_per_token;
  if (out.tokens_per_s_per_gpu && out.model_flops_per_token > 0 && t.facts.peak_flops > 0)
    out.mfu = *out.tokens_per_s_per_gpu * out.model_flops_per_token / t.facts.peak_flops;
  summarize_step(t, w, out);
  summarize_memory(t, out);
  if (with_critical_path) out.critical_path = critical_path(t);
  return out;
}

RangeSummary summarize_range(const Timeline& t, TimeNs start, TimeNs end) {
  RangeSummary r;
  r.start = std::min(start, end);
  r.end = std::max(start, end);
  std::vector<Interval> compute, comm;
  for (const auto& op : t.ops) {
    const TimeNs a = std::max(op.start, r.start), b = std::min(op.end, r.end);
    if (b <= a) continue;
    ++r.ops;
    if (is_collective(op.kind)) {
      comm.emplace_back(a, b);
    } else if (t.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::compute) {
      compute.emplace_back(a, b);
    }
  }
  const auto c = merge_intervals(std::move(compute)), m = merge_intervals(std::move(comm));
  r.compute = total_length(c);
  r.communication = total_length(m);
  r.exposed_communication = uncovered_length(m, c);
  const TimeNs hidden = r.communication - r.exposed_communication;
  r.overlap = r.communication > 0
                  ? static_cast<double>(hidden) / static_cast<double>(r.communication)
                  : 1.0;
  // Memory: the sample in force at the range start, and every sample inside it.
  const auto first = std::upper_bound(t.memory.begin(), t.memory.end(), r.start,
                                      [](TimeNs v, const MemorySample& s) { return v < s.time; });
  auto it = first == t.memory.begin() ? first : first - 1;
  for (; it != t.memory.end() && it->time < r.end; ++it) {
    r.peak_allocated = std::max(r.peak_allocated, it->allocated);
    r.peak_reserved = std::max(r.peak_reserved, it->reserved);
  }
  return r;
}

}  // namespace shardscope::analysis
