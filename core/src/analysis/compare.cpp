#include "shardscope/core/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

namespace shardscope::analysis {
namespace {

using Key = std::tuple<int, Phase, std::string, OpKind>;

// Ops by match key, each list in start order (timelines keep ops sorted by start).
std::map<Key, std::vector<const TimelineOp*>> by_key(const Timeline& t) {
  std::map<Key, std::vector<const TimelineOp*>> out;
  for (const auto& op : t.ops)
    out[{op.iteration, op.phase, std::string(group_name(t, op)), op.kind}].push_back(&op);
  return out;
}

std::vector<KindTimes> kind_times(const Timeline& a, const Timeline& b) {
  std::vector<KindTimes> kinds(kOpKindCount);
  for (std::size_t k = 0; k < kOpKindCount; ++k) kinds[k].kind = static_cast<OpKind>(k);
  const auto add = [&](const Timeline& t, bool first) {
    const int last = t.last_iteration();
    for (const auto& op : t.ops) {
      if (op.iteration != last) continue;
      auto& k = kinds[static_cast<std::size_t>(op.kind)];
      (first ? k.a : k.b) += op.duration();
      ++(first ? k.a_ops : k.b_ops);
    }
  };
  add(a, true);
  add(b, false);
  std::erase_if(kinds, [](const KindTimes& k) { return k.a_ops == 0 && k.b_ops == 0; });
  return kinds;
}

std::string key_text(const Key& key, std::size_t order) {
  return fmt::format("{} {} it {} #{}", std::get<2>(key), to_string(std::get<1>(key)),
                     std::get<0>(key), order);
}

StreamKind stream_kind(const Timeline& t, const TimelineOp& op) {
  const auto i = static_cast<std::size_t>(op.stream);
  return i < t.streams.size() ? t.streams[i].kind : StreamKind::compute;
}

// The collectives and host copies of `mine` past what `theirs` has for each key, per kind.
// Compute is left out: a profiler trace has one op per kernel where a plan has one per group and
// pass, so its count says nothing (busy time by kind compares it).
std::vector<UnmatchedOps> unmatched(const std::map<Key, std::vector<const TimelineOp*>>& mine,
                                    const std::map<Key, std::vector<const TimelineOp*>>& theirs) {
  std::vector<UnmatchedOps> by_kind(kOpKindCount);
  for (const auto& [key, ops] : mine) {
    const auto it = theirs.find(key);
    const std::size_t matched = it == theirs.end() ? 0 : std::min(ops.size(), it->second.size());
    const OpKind kind = std::get<3>(key);
    if (!is_collective(kind) && kind != OpKind::h2d && kind != OpKind::d2h) continue;
    auto& u = by_kind[static_cast<std::size_t>(kind)];
    for (std::size_t k = matched; k < ops.size(); ++k) {
      u.kind = std::get<3>(key);
      ++u.count;
      u.time += ops[k]->duration();
      if (u.examples.size() < 3) u.examples.push_back(key_text(key, k));
    }
  }
  std::erase_if(by_kind, [](const UnmatchedOps& u) { return u.count == 0; });
  return by_kind;
}

// How many streams each side runs each collective kind on, where the two differ.
std::vector<std::tuple<OpKind, int, int>> collective_stream_counts(const Timeline& a,
                                                                   const Timeline& b) {
  std::vector<std::tuple<OpKind, int, int>> out;
  for (OpKind kind : {OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_reduce}) {
    const auto count = [kind](const Timeline& t) {
      std::set<StreamId> streams;
      for (const auto& op : t.ops) {
        if (op.kind == kind) streams.insert(op.stream);
      }
      return static_cast<int>(streams.size());
    };
    const int na = count(a), nb = count(b);
    if (na != nb && na > 0 && nb > 0) out.emplace_back(kind, na, nb);
  }
  return out;
}

}  // namespace

double pct(double a, double b) {
  return a != 0 ? 100.0 * (b - a) / std::fabs(a) : (b == 0 ? 0.0 : INFINITY);
}

std::string format_metric(const std::optional<double>& value, const std::string& unit) {
  return value ? format_metric(*value, unit) : std::string("unknown");
}

std::string format_metric(double value, const std::string& unit) {
  if (unit == "s") return format_duration(static_cast<TimeNs>(std::llround(value * 1e9)));
  if (unit == "B") return format_bytes(static_cast<Bytes>(std::llround(value)));
  if (unit == "%") return fmt::format("{:.1f} %", value);
  return fmt::format("{:.0f} {}", value, unit);
}

std::string format_metric_delta(double delta, const std::string& unit) {
  const std::string text = format_metric(std::fabs(delta), unit);
  return delta < 0 ? "−" + text : "+" + text;
}

namespace {

std::string examples_text(const std::vector<std::string>& examples, int count) {
  std::string out;
  for (const auto& e : examples) out += (out.empty() ? "" : ", ") + e;
  if (count > static_cast<int>(examples.size())) out += ", …";
  return out;
}

// What one run did that the other did not, for the reader who asks "why is B different".
std::string unexpected_text(const Comparison& c) {
  std::string out;
  for (const auto* side : {&c.extra_in_b, &c.extra_in_a}) {
    for (const auto& u : *side) {
      out += fmt::format("  {} {} op{} only in {} ({}): {}\n", u.count, to_string(u.kind),
                         u.count == 1 ? "" : "s", side == &c.extra_in_b ? "B" : "A",
                         format_duration(u.time), examples_text(u.examples, u.count));
    }
  }
  for (const auto& m : c.stream_mismatches) {
    out += fmt::format("  {} {} op{} on a {} stream in B, a {} stream in A (first: {})\n", m.count,
                       to_string(m.kind), m.count == 1 ? "" : "s", to_string(m.b_stream),
                       to_string(m.a_stream), m.example);
  }
  for (const auto& [kind, na, nb] : c.collective_streams) {
    out += fmt::format("  {} ran on {} stream{} in B, {} in A\n", to_string(kind), nb,
                       nb == 1 ? "" : "s", na);
  }
  return out.empty() ? out : "\n  what one run did and the other did not\n" + out;
}

}  // namespace

Comparison compare(const Timeline& a, const Timeline& b) {
  Comparison c;
  c.a = summarize(a);
  c.b = summarize(b);
  const auto s = [](TimeNs t) { return std::optional(ns_to_s(t)); };
  const auto percent = [](std::optional<double> v) {
    return v ? std::optional(100 * *v) : std::nullopt;
  };
  const auto bytes = [](std::optional<Bytes> v) {
    return v ? std::optional(static_cast<double>(*v)) : std::nullopt;
  };
  c.metrics = {
      {"step time", "s", s(c.a.step_time), s(c.b.step_time)},
      {"throughput", "tokens/s/GPU", c.a.tokens_per_s_per_gpu, c.b.tokens_per_s_per_gpu},
      {"MFU", "%", percent(c.a.mfu), percent(c.b.mfu)},
      {"forward", "s", s(c.a.forward_time), s(c.b.forward_time)},
      {"backward", "s", s(c.a.backward_time), s(c.b.backward_time)},
      {"optimizer", "s", s(c.a.optimizer_time), s(c.b.optimizer_time)},
      {"generation", "s", s(c.a.generation_time), s(c.b.generation_time)},
      {"communication", "s", s(c.a.comm_total), s(c.b.comm_total)},
      {"exposed communication", "s", s(c.a.comm_exposed), s(c.b.comm_exposed)},
      {"overlap", "%", percent(c.a.overlap_fraction), percent(c.b.overlap_fraction)},
      {"compute beside it", "s", c.a.contention ? s(*c.a.contention) : std::nullopt,
       c.b.contention ? s(*c.b.contention) : std::nullopt},
      {"peak allocated", "B", bytes(c.a.peak_allocated), bytes(c.b.peak_allocated)},
      {"peak reserved", "B", bytes(c.a.peak_reserved), bytes(c.b.peak_reserved)},
  };
  c.kinds = kind_times(a, b);
  const auto left = by_key(a), right = by_key(b);
  for (const auto& [key, ops] : left) {
    const auto it = right.find(key);
    const std::size_t theirs = it == right.end() ? 0 : it->second.size();
    const std::size_t both = std::min(ops.size(), theirs);
    c.only_in_a += static_cast<int>(ops.size() - both);
    for (std::size_t k = 0; k < both; ++k) {
      const TimelineOp& x = *ops[k];
      const TimelineOp& y = *it->second[k];
      if (is_collective(x.kind) && stream_kind(a, x) != stream_kind(b, y)) {
        auto m = std::find_if(c.stream_mismatches.begin(), c.stream_mismatches.end(),
                              [&](const StreamMismatch& seen) {
                                return seen.kind == x.kind && seen.a_stream == stream_kind(a, x) &&
                                       seen.b_stream == stream_kind(b, y);
                              });
        if (m == c.stream_mismatches.end()) {
          c.stream_mismatches.push_back(
              {x.kind, stream_kind(a, x), stream_kind(b, y), 0, key_text(key, k)});
          m = c.stream_mismatches.end() - 1;
        }
        ++m->count;
      }
      c.ops.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key),
                       static_cast<int>(k), x.op, y.op, y.start - x.start,
                       y.duration() - x.duration(), x.duration()});
    }
  }
  for (const auto& [key, ops] : right) {
    const auto it = left.find(key);
    const std::size_t mine = it == left.end() ? 0 : it->second.size();
    c.only_in_b += static_cast<int>(ops.size() - std::min(ops.size(), mine));
  }
  c.extra_in_a = unmatched(left, right);
  c.extra_in_b = unmatched(right, left);
  c.collective_streams = collective_stream_counts(a, b);
  std::stable_sort(c.ops.begin(), c.ops.end(), [](const MatchedOp& x, const MatchedOp& y) {
    const auto dx = std::llabs(x.duration_delta), dy = std::llabs(y.duration_delta);
    if (dx != dy) return dx > dy;
    return std::llabs(x.start_delta) > std::llabs(y.start_delta);
  });
  return c;
}

std::vector<std::string> job_differences(const Timeline& a, const Timeline& b) {
  std::vector<std::string> out;
  const auto& fa = a.facts;
  const auto& fb = b.facts;
  if (fa.world_size != fb.world_size)
    out.push_back(fmt::format("world size: {} GPUs in A, {} in B", fa.world_size, fb.world_size));
  if (fa.tokens_per_iteration > 0 && fb.tokens_per_iteration > 0 &&
      fa.tokens_per_iteration != fb.tokens_per_iteration) {
    out.push_back(fmt::format("tokens per iteration per GPU: {} in A, {} in B",
                              fa.tokens_per_iteration, fb.tokens_per_iteration));
  }
  // Relative: the same model's FLOPs agree to rounding whoever computed them.
  const auto differ = [](double x, double y) {
    return x > 0 && y > 0 && std::fabs(x - y) > 1e-6 * std::max(x, y);
  };
  if (differ(fa.model_flops_per_token, fb.model_flops_per_token)) {
    out.push_back(fmt::format("model FLOPs per token: {:.4g} in A, {:.4g} in B",
                              fa.model_flops_per_token, fb.model_flops_per_token));
  }
  if (differ(fa.peak_flops, fb.peak_flops)) {
    out.push_back(fmt::format("GPU peak: {} in A, {} in B", format_flops_rate(fa.peak_flops),
                              format_flops_rate(fb.peak_flops)));
  }
  for (const auto& [key, value] : a.provenance.job) {
    for (const auto& [other_key, other] : b.provenance.job) {
      if (key == other_key && value != other)
        out.push_back(fmt::format("{}: {} in A, {} in B", key, value, other));
    }
  }
  return out;
}

std::string comparison_table(const Comparison& c, bool per_op, std::size_t top) {
  std::string out =
      fmt::format("A: {} ({})\nB: {} ({})\n\n", c.a.name, c.a.source, c.b.name, c.b.source);
  out += fmt::format("  {:<24}{:>20}{:>20}{:>20}{:>10}\n", "steady state", "A", "B", "B − A", "Δ");
  const auto value = [](const std::optional<double>& v, const std::string& unit) {
    return format_metric(v, unit);
  };
  const auto& delta = format_metric_delta;
  for (const auto& m : c.metrics) {
    if (!m.known()) {
      out += fmt::format("  {:<24}{:>20}{:>20}{:>20}{:>11}\n", m.name, value(m.a, m.unit),
                         value(m.b, m.unit), "unknown", "—");
      continue;
    }
    out += fmt::format("  {:<24}{:>20}{:>20}{:>20}{:>9.1f} %\n", m.name, value(*m.a, m.unit),
                       value(*m.b, m.unit), delta(*m.b - *m.a, m.unit), pct(*m.a, *m.b));
  }
  out += fmt::format("\n  {:<24}{:>20}{:>20}{:>20}{:>12}\n", "busy time by kind", "A", "B", "B − A",
                     "ops A / B");
  for (const auto& k : c.kinds) {
    out += fmt::format("  {:<24}{:>20}{:>20}{:>20}{:>12}\n", to_string(k.kind),
                       format_duration(k.a), format_duration(k.b), delta(ns_to_s(k.b - k.a), "s"),
                       fmt::format("{} / {}", k.a_ops, k.b_ops));
  }
  out += fmt::format("\n  matched ops: {}; only in A: {}; only in B: {}\n", c.ops.size(),
                     c.only_in_a, c.only_in_b);
  out += unexpected_text(c);
  if (per_op) {
    const std::size_t n = top == 0 ? c.ops.size() : std::min(top, c.ops.size());
    out += fmt::format("\n  largest op deltas ({} of {})\n", n, c.ops.size());
    out += fmt::format("  {:<40}{:>16}{:>16}{:>16}\n", "op", "duration A", "duration Δ", "start Δ");
    for (std::size_t i = 0; i < n; ++i) {
      const auto& m = c.ops[i];
      const std::string name = fmt::format("{} {} ({}, it {}, #{})", to_string(m.kind), m.group,
                                           to_string(m.phase), m.iteration, m.order);
      out += fmt::format("  {:<40}{:>16}{:>16}{:>16}\n", name, format_duration(m.a_duration),
                         delta(ns_to_s(m.duration_delta), "s"), delta(ns_to_s(m.start_delta), "s"));
    }
  }
  return out;
}

std::string comparison_json(const Comparison& c, bool per_op) {
  nlohmann::ordered_json j;
  j["schema"] = "shardscope.compare/1";
  j["a"] = {{"name", c.a.name}, {"source", c.a.source}};
  j["b"] = {{"name", c.b.name}, {"source", c.b.source}};
  nlohmann::ordered_json metrics = nlohmann::ordered_json::array();
  for (const auto& m : c.metrics)
    metrics.push_back(
        {{"name", m.name},
         {"unit", m.unit},
         {"a", m.a ? nlohmann::ordered_json(*m.a) : nlohmann::ordered_json(nullptr)},
         {"b", m.b ? nlohmann::ordered_json(*m.b) : nlohmann::ordered_json(nullptr)}});
  j["metrics"] = metrics;
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (const auto& k : c.kinds) {
    kinds.push_back({{"kind", to_string(k.kind)},
                     {"a_s", ns_to_s(k.a)},
                     {"b_s", ns_to_s(k.b)},
                     {"a_ops", k.a_ops},
                     {"b_ops", k.b_ops}});
  }
  j["busy_by_kind"] = kinds;
  j["matched_ops"] = c.ops.size();
  j["only_in_a"] = c.only_in_a;
  j["only_in_b"] = c.only_in_b;
  const auto unmatched_json = [](const std::vector<UnmatchedOps>& list) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& u : list) {
      out.push_back({{"kind", to_string(u.kind)},
                     {"count", u.count},
                     {"time_s", ns_to_s(u.time)},
                     {"examples", u.examples}});
    }
    return out;
  };
  j["extra_in_a"] = unmatched_json(c.extra_in_a);
  j["extra_in_b"] = unmatched_json(c.extra_in_b);
  nlohmann::ordered_json mismatches = nlohmann::ordered_json::array();
  for (const auto& m : c.stream_mismatches) {
    mismatches.push_back({{"kind", to_string(m.kind)},
                          {"a_stream", to_string(m.a_stream)},
                          {"b_stream", to_string(m.b_stream)},
                          {"count", m.count},
                          {"example", m.example}});
  }
  j["stream_mismatches"] = mismatches;
  nlohmann::ordered_json streams = nlohmann::ordered_json::array();
  for (const auto& [kind, na, nb] : c.collective_streams)
    streams.push_back({{"kind", to_string(kind)}, {"a_streams", na}, {"b_streams", nb}});
  j["collective_streams"] = streams;
  if (per_op) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const auto& m : c.ops) {
      ops.push_back({{"iteration", m.iteration},
                     {"phase", to_string(m.phase)},
                     {"group", m.group},
                     {"kind", to_string(m.kind)},
                     {"order", m.order},
                     {"a_op", m.a_op},
                     {"b_op", m.b_op},
                     {"a_duration_ns", m.a_duration},
                     {"duration_delta_ns", m.duration_delta},
                     {"start_delta_ns", m.start_delta}});
    }
    j["ops"] = ops;
  }
  return j.dump(2) + "\n";
}

}  // namespace shardscope::analysis
