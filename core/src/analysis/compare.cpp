#include "shardscope/core/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

namespace shardscope::analysis {
namespace {

using Key = std::tuple<int, Phase, std::string, OpKind>;

std::string group_name(const Timeline& t, const TimelineOp& op) {
  return op.group == kNone ? std::string("-") : t.groups[static_cast<std::size_t>(op.group)];
}

// Ops by match key, each list in start order (timelines keep ops sorted by start).
std::map<Key, std::vector<const TimelineOp*>> by_key(const Timeline& t) {
  std::map<Key, std::vector<const TimelineOp*>> out;
  for (const auto& op : t.ops)
    out[{op.iteration, op.phase, group_name(t, op), op.kind}].push_back(&op);
  return out;
}

std::vector<KindTimes> kind_times(const Timeline& a, const Timeline& b) {
  std::vector<KindTimes> kinds(kOpKindCount);
  for (std::size_t k = 0; k < kOpKindCount; ++k) kinds[k].kind = static_cast<OpKind>(k);
  const auto add = [&](const Timeline& t, bool first) {
    int last = 0;
    for (const auto& op : t.ops) last = std::max(last, op.iteration);
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

double pct(double a, double b) {
  return a != 0 ? 100.0 * (b - a) / std::fabs(a) : (b == 0 ? 0.0 : INFINITY);
}

}  // namespace

Comparison compare(const Timeline& a, const Timeline& b) {
  Comparison c;
  c.a = summarize(a);
  c.b = summarize(b);
  const auto s = [](TimeNs t) { return ns_to_s(t); };
  c.metrics = {
      {"step time", "s", s(c.a.step_time), s(c.b.step_time)},
      {"throughput", "tokens/s/GPU", c.a.tokens_per_s_per_gpu, c.b.tokens_per_s_per_gpu},
      {"MFU", "%", 100 * c.a.mfu, 100 * c.b.mfu},
      {"forward", "s", s(c.a.forward_time), s(c.b.forward_time)},
      {"backward", "s", s(c.a.backward_time), s(c.b.backward_time)},
      {"optimizer", "s", s(c.a.optimizer_time), s(c.b.optimizer_time)},
      {"communication", "s", s(c.a.comm_total), s(c.b.comm_total)},
      {"exposed communication", "s", s(c.a.comm_exposed), s(c.b.comm_exposed)},
      {"overlap", "%", 100 * c.a.overlap_fraction, 100 * c.b.overlap_fraction},
      {"peak allocated", "B", static_cast<double>(c.a.peak_allocated),
       static_cast<double>(c.b.peak_allocated)},
      {"peak reserved", "B", static_cast<double>(c.a.peak_reserved),
       static_cast<double>(c.b.peak_reserved)},
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
  std::stable_sort(c.ops.begin(), c.ops.end(), [](const MatchedOp& x, const MatchedOp& y) {
    const auto dx = std::llabs(x.duration_delta), dy = std::llabs(y.duration_delta);
    if (dx != dy) return dx > dy;
    return std::llabs(x.start_delta) > std::llabs(y.start_delta);
  });
  return c;
}

std::string comparison_table(const Comparison& c, bool per_op, std::size_t top) {
  std::string out =
      fmt::format("A: {} ({})\nB: {} ({})\n\n", c.a.name, c.a.source, c.b.name, c.b.source);
  out += fmt::format("  {:<24}{:>20}{:>20}{:>20}{:>10}\n", "steady state", "A", "B", "B − A", "Δ");
  const auto value = [](double v, const std::string& unit) {
    if (unit == "s") return format_duration(static_cast<TimeNs>(std::llround(v * 1e9)));
    if (unit == "B") return format_bytes(static_cast<Bytes>(std::llround(v)));
    if (unit == "%") return fmt::format("{:.1f} %", v);
    return fmt::format("{:.0f} {}", v, unit);
  };
  const auto delta = [&](double v, const std::string& unit) {
    const std::string text = value(std::fabs(v), unit);
    return v < 0 ? "−" + text : "+" + text;
  };
  for (const auto& m : c.metrics) {
    out += fmt::format("  {:<24}{:>20}{:>20}{:>20}{:>9.1f} %\n", m.name, value(m.a, m.unit),
                       value(m.b, m.unit), delta(m.b - m.a, m.unit), pct(m.a, m.b));
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
    metrics.push_back({{"name", m.name}, {"unit", m.unit}, {"a", m.a}, {"b", m.b}});
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
