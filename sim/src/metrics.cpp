#include "shardscope/sim/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>

#include "shardscope/core/intervals.hpp"

namespace shardscope::sim {
namespace {

std::string op_name(const Schedule& s, OpId id) {
  const Op& op = s.ops[static_cast<std::size_t>(id)];
  return fmt::format("{} {} ({}, iteration {})", to_string(op.kind),
                     op.group == kNone ? "-" : s.groups[static_cast<std::size_t>(op.group)].name,
                     to_string(op.phase), op.iteration);
}

// Time per phase within the step window, each instant counted once: where spans overlap (the next
// micro-batch's forward starting while a backward drains, an optimizer overlapping the last
// reduce-scatter) the instant belongs to the span that started last, the work the GPU moved on to.
// So the phases never sum past the step. `spans` is indexed by micro-batch · phases + phase.
std::array<TimeNs, 4> disjoint_phase_times(const std::vector<Interval>& spans, std::size_t phases,
                                           TimeNs window_start, TimeNs window_end) {
  struct Edge {
    TimeNs at;
    bool opens;
    TimeNs start;  // of the span, to rank open spans
    std::size_t phase;
  };
  std::vector<Edge> edges;
  for (std::size_t key = 0; key < spans.size(); ++key) {
    const TimeNs begin = std::max(spans[key].first, window_start),
                 end = std::min(spans[key].second, window_end);
    if (end <= begin) continue;
    edges.push_back({begin, true, begin, key % phases});
    edges.push_back({end, false, begin, key % phases});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
  std::array<TimeNs, 4> out{};
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

// From the op that ended last, follow what bound each start back through the last iteration.
CriticalPath critical_path(const Schedule& s, const SimulationResult& r) {
  CriticalPath path;
  const int last = s.iterations - 1;
  OpId cur = kNone;
  TimeNs latest = -1;
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    if (r.ops[i].end > latest) {
      latest = r.ops[i].end;
      cur = static_cast<OpId>(i);
    }
  }
  std::array<TimeNs, kOpKindCount> path_by_kind{};
  std::array<bool, kOpKindCount> on_path{};
  TimeNs path_cpu = 0;
  bool cpu_on_path = false;
  while (cur != kNone && s.ops[static_cast<std::size_t>(cur)].iteration == last) {
    const auto& rec = r.ops[static_cast<std::size_t>(cur)];
    const auto kind = static_cast<std::size_t>(s.ops[static_cast<std::size_t>(cur)].kind);
    path.ops.push_back(cur);
    path_by_kind[kind] += rec.end - rec.start;
    on_path[kind] = true;
    const OpId pred = rec.predecessor;
    if (pred != kNone && rec.binding == Binding::issue) {
      path_cpu += rec.start - r.ops[static_cast<std::size_t>(pred)].start;
      cpu_on_path = true;
    }
    cur = pred;
  }
  for (auto kind : all_op_kinds()) {
    if (on_path[static_cast<std::size_t>(kind)])
      path.by_kind[std::string(to_string(kind))] = path_by_kind[static_cast<std::size_t>(kind)];
  }
  if (cpu_on_path) path.by_kind["cpu"] = path_cpu;
  return path;
}

}  // namespace

double model_flops_per_token(const Scenario& sc) {
  if (sc.model.family == ModelFamily::transformer) {
    const auto& c = sc.model.transformer;
    const auto p = count_params(c);
    const double n = static_cast<double>(sc.model.total_params() - p.token_embedding);
    return 6.0 * n +
           12.0 * static_cast<double>(c.layers * c.heads * c.head_dim() * sc.training.seq_len);
  }
  double flops = 0;
  for (const auto& g : sc.model.groups) {
    const double fwd = g.forward_flops.value_or(0);
    flops += fwd + g.backward_flops.value_or(2 * fwd);
  }
  return flops /
         static_cast<double>(std::max<std::int64_t>(1, sc.training.tokens_per_microbatch()));
}

Summary summarize(const Scenario& sc, const Schedule& s, const SimulationResult& r) {
  Summary out;
  out.name = s.name;
  out.world_size = s.world_size;
  const int last = s.iterations - 1;
  std::vector<TimeNs> iteration_end(static_cast<std::size_t>(s.iterations), 0);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    auto& e = iteration_end[static_cast<std::size_t>(s.ops[i].iteration)];
    e = std::max(e, r.ops[i].end);
  }
  const TimeNs window_start = last > 0 ? iteration_end[static_cast<std::size_t>(last - 1)] : 0;
  const TimeNs window_end = iteration_end[static_cast<std::size_t>(last)];
  out.step_time = window_end - window_start;
  const double step_s = ns_to_s(std::max<TimeNs>(1, out.step_time));
  out.tokens_per_s_per_gpu = static_cast<double>(s.tokens_per_iteration) / step_s;
  out.model_flops_per_token = model_flops_per_token(sc);
  const double peak = sc.cluster.gpu.peak_flops.for_dtype(
      sc.fsdp.mixed_precision.param_dtype.value_or(DType::fp32));
  out.mfu = out.tokens_per_s_per_gpu * out.model_flops_per_token / peak;

  // Phases, busy time, communication: ops of the last iteration. Flat tables, not maps: a sweep
  // summarizes thousands of runs.
  constexpr std::size_t kPhases = 4;
  const auto first_of_last = static_cast<std::size_t>(
      std::find_if(s.ops.begin(), s.ops.end(), [&](const Op& op) { return op.iteration == last; }) -
      s.ops.begin());
  std::vector<Interval> phase_span;  // by microbatch · kPhases + phase; empty interval: no op
  std::vector<Interval> comm, compute;
  comm.reserve(s.ops.size() - first_of_last);
  compute.reserve(s.ops.size() - first_of_last);
  std::vector<TimeNs> busy(s.streams.size(), 0);
  std::array<int, kOpKindCount> collectives{};
  double flops = 0, recompute_flops = 0;
  for (std::size_t i = first_of_last; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.iteration != last) continue;
    const auto& rec = r.ops[i];
    const TimeNs d = rec.end - rec.start;
    busy[static_cast<std::size_t>(op.stream)] += d;
    flops += op.flops;
    if (op.kind == OpKind::recompute) recompute_flops += op.flops;
    if (op.kind != OpKind::stream_wait && op.kind != OpKind::cpu_wait && d > 0) {
      const auto mb = static_cast<std::size_t>(op.phase == Phase::optimizer ? 0 : op.microbatch);
      const auto key = mb * kPhases + static_cast<std::size_t>(op.phase);
      if (key >= phase_span.size()) phase_span.resize(key + 1, Interval{0, -1});
      auto& span = phase_span[key];
      span = span.second < span.first
                 ? Interval{rec.start, rec.end}
                 : Interval{std::min(span.first, rec.start), std::max(span.second, rec.end)};
    }
    if (is_collective(op.kind)) {
      if (op.phase != Phase::checkpoint) ++collectives[static_cast<std::size_t>(op.kind)];
      comm.emplace_back(rec.start, rec.end);
    } else if (s.streams[static_cast<std::size_t>(op.stream)].kind == StreamKind::compute &&
               d > 0) {
      compute.emplace_back(rec.start, rec.end);
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
  // So HFU ≥ MFU always, equal without checkpointing.
  const double model_op_flops = flops - recompute_flops;
  out.hfu = model_op_flops > 0 ? out.mfu * flops / model_op_flops : out.mfu;
  const auto phase_times = disjoint_phase_times(phase_span, kPhases, window_start, window_end);
  out.forward_time = phase_times[static_cast<std::size_t>(Phase::forward)];
  out.backward_time = phase_times[static_cast<std::size_t>(Phase::backward)];
  out.optimizer_time = phase_times[static_cast<std::size_t>(Phase::optimizer)];
  const auto comm_union = merge_intervals(comm);
  out.comm_total = total_length(comm_union);
  out.comm_exposed = uncovered_length(comm_union, merge_intervals(compute));
  out.overlap_fraction = out.comm_total > 0 ? 1.0 - static_cast<double>(out.comm_exposed) /
                                                        static_cast<double>(out.comm_total)
                                            : 1.0;
  for (std::size_t st = 0; st < s.streams.size(); ++st) {
    // The CPU lane is busy issuing ops (launch and hook overheads), not only running CPU ops.
    const bool cpu = s.streams[st].kind == StreamKind::cpu &&
                     static_cast<std::size_t>(last) < r.cpu_busy_by_iteration.size();
    out.stream_busy.emplace_back(
        s.streams[st].name,
        cpu ? r.cpu_busy_by_iteration[static_cast<std::size_t>(last)] : busy[st]);
  }
  out.allocator_retries = r.allocator_retries;

  if (r.critical_path_recorded) out.critical_path = critical_path(s, r);

  out.peak_allocated = r.peak_allocated.bytes;
  out.peak_reserved = r.peak_reserved.bytes;
  out.capacity = r.capacity;
  out.fits = !r.out_of_memory && out.peak_reserved <= out.capacity;
  out.peak_by_category = r.peak_allocated.by_category;
  out.peak_op = r.peak_allocated.op == kNone ? "start" : op_name(s, r.peak_allocated.op);
  out.peak_allocated_by_phase = r.peak_allocated_by_phase;
  if (r.out_of_memory) {
    const auto& oom = *r.out_of_memory;
    const Buffer& buf = s.buffers[static_cast<std::size_t>(oom.buffer)];
    out.out_of_memory =
        fmt::format("{} ({}, {}) does not fit at {}: {} reserved of {}", buffer_name(s, oom.buffer),
                    to_string(buf.category), format_bytes(buf.size),
                    oom.op == kNone ? "start" : op_name(s, oom.op), format_bytes(oom.reserved),
                    format_bytes(r.capacity));
  }
  return out;
}

std::string summary_to_json(const Summary& m) {
  nlohmann::ordered_json j;
  j["schema"] = "shardscope.summary/1";
  j["name"] = m.name;
  j["world_size"] = m.world_size;
  j["step_time_s"] = ns_to_s(m.step_time);
  j["tokens_per_s_per_gpu"] = m.tokens_per_s_per_gpu;
  j["model_flops_per_token"] = m.model_flops_per_token;
  j["mfu"] = m.mfu;
  j["hfu"] = m.hfu;
  j["phase_time_s"] = {{"forward", ns_to_s(m.forward_time)},
                       {"backward", ns_to_s(m.backward_time)},
                       {"optimizer", ns_to_s(m.optimizer_time)}};
  nlohmann::ordered_json cats = nlohmann::ordered_json::object();
  for (auto c : all_buffer_categories())
    cats[std::string(to_string(c))] = m.peak_by_category[static_cast<std::size_t>(c)];
  j["peak_memory"] = {{"allocated_bytes", m.peak_allocated},
                      {"reserved_bytes", m.peak_reserved},
                      {"capacity_bytes", m.capacity},
                      {"fits", m.fits},
                      {"at", m.peak_op},
                      {"by_category", cats}};
  j["peak_allocated_by_phase_bytes"] = {{"forward", m.peak_allocated_by_phase[0]},
                                        {"backward", m.peak_allocated_by_phase[1]},
                                        {"optimizer", m.peak_allocated_by_phase[2]}};
  j["comm"] = {{"total_s", ns_to_s(m.comm_total)},
               {"exposed_s", ns_to_s(m.comm_exposed)},
               {"overlap_fraction", m.overlap_fraction}};
  nlohmann::ordered_json coll = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.collectives) coll[k] = v;
  j["collectives"] = coll;
  nlohmann::ordered_json busy = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.stream_busy) busy[k] = ns_to_s(v);
  j["stream_busy_s"] = busy;
  nlohmann::ordered_json path = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.critical_path.by_kind) path[k] = ns_to_s(v);
  j["critical_path_s"] = path;
  j["allocator_retries"] = m.allocator_retries;
  j["out_of_memory"] = m.out_of_memory.empty() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(m.out_of_memory);
  return j.dump(2) + "\n";
}

std::string summary_table(const Summary& m) {
  std::string out;
  auto row = [&](std::string_view k, const std::string& v) {
    out += fmt::format("  {:<28}{}\n", k, v);
  };
  out += fmt::format("{} ({} GPUs), steady state = last iteration\n", m.name, m.world_size);
  row("step time", format_duration(m.step_time));
  row("throughput", fmt::format("{:.0f} tokens/s per GPU", m.tokens_per_s_per_gpu));
  row("MFU / HFU", fmt::format("{:.1f} % / {:.1f} %", 100 * m.mfu, 100 * m.hfu));
  row("forward / backward / optim",
      fmt::format("{} / {} / {}", format_duration(m.forward_time), format_duration(m.backward_time),
                  format_duration(m.optimizer_time)));
  row("communication",
      fmt::format("{} total, {} exposed, {:.1f} % overlapped", format_duration(m.comm_total),
                  format_duration(m.comm_exposed), 100 * m.overlap_fraction));
  row("collectives per iteration",
      fmt::format("{} all-gather, {} reduce-scatter, {} all-reduce", m.collectives.at("all_gather"),
                  m.collectives.at("reduce_scatter"), m.collectives.at("all_reduce")));
  row("peak allocated", fmt::format("{} at {}", format_bytes(m.peak_allocated), m.peak_op));
  std::vector<std::pair<Bytes, std::string>> cats;
  for (auto c : all_buffer_categories()) {
    const Bytes b = m.peak_by_category[static_cast<std::size_t>(c)];
    if (b > 0) cats.emplace_back(b, std::string(to_string(c)));
  }
  std::sort(cats.rbegin(), cats.rend());
  for (const auto& [b, name] : cats) row(fmt::format("  {}", name), format_bytes(b));
  row("peak reserved", fmt::format("{} of {} ({})", format_bytes(m.peak_reserved),
                                   format_bytes(m.capacity), m.fits ? "fits" : "DOES NOT FIT"));
  if (m.allocator_retries > 0) {
    row("allocator retries",
        fmt::format("{} (cached blocks released to make room: each is a cudaFree stall)",
                    m.allocator_retries));
  }
  row("peak allocated by phase", fmt::format("forward {}, backward {}, optimizer {}",
                                             format_bytes(m.peak_allocated_by_phase[0]),
                                             format_bytes(m.peak_allocated_by_phase[1]),
                                             format_bytes(m.peak_allocated_by_phase[2])));
  std::string busy;
  for (const auto& [name, t] : m.stream_busy)
    busy += fmt::format("{}{} {}", busy.empty() ? "" : ", ", name, format_duration(t));
  row("stream busy", busy);
  std::vector<std::pair<TimeNs, std::string>> path;
  for (const auto& [k, v] : m.critical_path.by_kind) path.emplace_back(v, k);
  std::sort(path.rbegin(), path.rend());
  std::string cp;
  for (std::size_t i = 0; i < std::min<std::size_t>(4, path.size()); ++i) {
    cp += fmt::format("{}{} {}", cp.empty() ? "" : ", ", path[i].second,
                      format_duration(path[i].first));
  }
  row("critical path", cp);
  if (!m.out_of_memory.empty()) row("OUT OF MEMORY", m.out_of_memory);
  return out;
}

}  // namespace shardscope::sim
