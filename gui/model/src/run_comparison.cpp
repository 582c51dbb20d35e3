#include "shardscope/gui/run_comparison.hpp"

#include <fmt/format.h>

#include <cmath>

namespace shardscope::gui {

Counterparts counterparts(const analysis::Comparison& comparison, Side side) {
  Counterparts out;
  out.reserve(comparison.ops.size());
  for (const auto& m : comparison.ops) {
    if (side == Side::a) {
      out[m.a_op] = {m.start_delta, m.duration_delta, m.a_duration + m.duration_delta};
    } else {
      out[m.b_op] = {-m.start_delta, -m.duration_delta, m.a_duration};
    }
  }
  return out;
}

namespace {

// "+25.0 %", "−20.0 %" (a minus sign, as format_metric_delta writes it); "" when undefined.
std::string signed_percent(double a, double b) {
  const double p = analysis::pct(a, b);
  if (!std::isfinite(p)) return "";
  return fmt::format("{}{:.1f} %", p < 0 ? "−" : "+", std::fabs(p));
}

}  // namespace

std::string counterpart_text(const OpCounterpart& c, std::string_view other_name) {
  const TimeNs own = c.other_duration - c.duration_delta;
  std::string text =
      fmt::format("{}: {} ({}, {})", other_name, format_duration(c.other_duration),
                  analysis::format_metric_delta(ns_to_s(c.duration_delta), "s"),
                  signed_percent(static_cast<double>(own), static_cast<double>(c.other_duration)));
  if (c.start_delta == 0) return text + ", starts at the same time";
  return text + fmt::format(", starts {} {}", format_duration(std::llabs(c.start_delta)),
                            c.start_delta > 0 ? "later" : "earlier");
}

std::vector<std::pair<QString, QString>> comparison_rows(const analysis::Comparison& c,
                                                         std::string_view a_name,
                                                         std::string_view b_name) {
  auto q = [](const std::string& s) { return QString::fromStdString(s); };
  std::vector<std::pair<QString, QString>> rows;
  rows.emplace_back(
      q(fmt::format("{} → {}", a_name, b_name)),
      q(fmt::format("{} ({}) → {} ({})", c.a.name, c.a.source, c.b.name, c.b.source)));
  for (const auto& m : c.metrics) {
    if (!m.known()) {
      rows.emplace_back(q(m.name), q(fmt::format("{} → {}", analysis::format_metric(m.a, m.unit),
                                                 analysis::format_metric(m.b, m.unit))));
      continue;
    }
    const std::string p = signed_percent(*m.a, *m.b);
    rows.emplace_back(q(m.name),
                      q(fmt::format("{} → {} ({}{})", analysis::format_metric(*m.a, m.unit),
                                    analysis::format_metric(*m.b, m.unit),
                                    analysis::format_metric_delta(*m.b - *m.a, m.unit),
                                    p.empty() ? "" : ", " + p)));
  }
  rows.emplace_back("ops matched", q(fmt::format("{} ({} only in {}, {} only in {})", c.ops.size(),
                                                 c.only_in_a, a_name, c.only_in_b, b_name)));
  auto extra = [&](const std::vector<analysis::UnmatchedOps>& ops, std::string_view who,
                   std::string_view other) {
    for (const auto& u : ops) {
      rows.emplace_back(
          q(fmt::format("{} only in {}", to_string(u.kind), who)),
          q(fmt::format("{} ops, {} (not in {})", u.count, format_duration(u.time), other)));
    }
  };
  extra(c.extra_in_a, a_name, b_name);
  extra(c.extra_in_b, b_name, a_name);
  for (const auto& s : c.stream_mismatches) {
    rows.emplace_back(q(fmt::format("{} on another stream", to_string(s.kind))),
                      q(fmt::format("{} ops: {} stream in {}, {} stream in {}", s.count,
                                    to_string(s.a_stream), a_name, to_string(s.b_stream), b_name)));
  }
  return rows;
}

}  // namespace shardscope::gui
