#include "shardscope/gui/sweep_table.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "shardscope/core/error.hpp"
#include "shardscope/core/json_field.hpp"

namespace shardscope::gui {

std::string SweepRow::label() const {
  std::string out;
  for (const auto& [k, v] : settings) {
    if (!out.empty()) out += ", ";
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

std::vector<SweepRow> sweep_rows(const std::vector<sim::SweepAxis>& axes,
                                 const std::vector<sim::SweepPoint>& points) {
  std::vector<SweepRow> rows;
  for (const auto& p : points) {
    SweepRow r;
    for (std::size_t a = 0; a < axes.size() && a < p.values.size(); ++a)
      r.settings.emplace_back(axes[a].key, p.values[a]);
    r.step_time_s = ns_to_s(p.summary.step_time);
    // A point that could not be simulated has no numbers; the views show its error instead.
    r.tokens_per_s_per_gpu = p.summary.tokens_per_s_per_gpu.value_or(0);
    r.peak_reserved = p.summary.peak_reserved.value_or(0);
    r.fits = p.fits;
    r.pareto = p.pareto;
    r.error = p.error;
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<SweepRow> sweep_rows_from_json(std::string_view text, const std::string& origin) {
  std::vector<SweepRow> rows;
  try {
    const auto j = nlohmann::json::parse(text);
    if (json_schema(j) != "shardscope.sweep/1") {
      throw ValidationError(
          {Problem{origin, "schema", "not a shardscope sweep", "shardscope.sweep/1"}});
    }
    for (const auto& p : j.at("points")) {
      SweepRow r;
      for (const auto& [k, v] : p.at("settings").items())
        r.settings.emplace_back(k, v.get<std::string>());
      r.step_time_s = p.at("step_time_s").get<double>();
      // null for a point that could not be simulated (its error says why)
      const auto& tokens = p.at("tokens_per_s_per_gpu");
      const auto& reserved = p.at("peak_reserved_bytes");
      r.tokens_per_s_per_gpu = tokens.is_null() ? 0 : tokens.get<double>();
      r.peak_reserved = reserved.is_null() ? 0 : json_integer<Bytes>(reserved);
      r.fits = p.at("fits").get<bool>();
      r.pareto = p.at("pareto").get<bool>();
      if (p.contains("error") && p["error"].is_string()) r.error = p["error"].get<std::string>();
      rows.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ValidationError({Problem{origin, "", std::string("malformed sweep JSON: ") + e.what(),
                                   "the output of shardscope sweep --json"}});
  }
  return rows;
}

namespace {

// One CSV record: fields split on commas outside double quotes, "" inside quotes is a quote.
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

std::vector<SweepRow> sweep_rows_from_csv(std::string_view text, const std::string& origin) {
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    const auto end = text.find('\n', start);
    lines.emplace_back(
        text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    start = end == std::string_view::npos ? text.size() : end + 1;
  }
  if (lines.empty())
    throw ValidationError(
        {Problem{origin, "", "empty file", "the output of shardscope sweep --csv"}});
  const auto header = csv_fields(lines[0]);
  const auto metrics = std::find(header.begin(), header.end(), "step_time_s");
  if (metrics == header.end() || header.end() - metrics < 10) {
    throw ValidationError({Problem{origin, "header", "not a shardscope sweep CSV",
                                   "columns ..., step_time_s, tokens_per_s_per_gpu, ..."}});
  }
  const auto axes = static_cast<std::size_t>(metrics - header.begin());
  std::vector<SweepRow> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const auto f = csv_fields(lines[i]);
    if (f.size() != header.size()) {
      throw ValidationError({Problem{origin, "line " + std::to_string(i + 1),
                                     "has " + std::to_string(f.size()) + " fields",
                                     std::to_string(header.size()) + " like the header"}});
    }
    SweepRow r;
    for (std::size_t a = 0; a < axes; ++a) r.settings.emplace_back(header[a], f[a]);
    // Empty fields are unknown numbers: a point that could not be simulated (its error says why).
    const auto number = [](const std::string& field) {
      return field.empty() ? 0 : std::stod(field);
    };
    try {
      r.step_time_s = number(f[axes]);
      r.tokens_per_s_per_gpu = number(f[axes + 1]);
      r.peak_reserved = f[axes + 4].empty() ? 0 : std::stoll(f[axes + 4]);
    } catch (const std::exception&) {
      throw ValidationError(
          {Problem{origin, "line " + std::to_string(i + 1), "a metric is not a number", ""}});
    }
    r.fits = f[axes + 6] == "true";
    r.pareto = f[axes + 7] == "true";
    r.error = f[axes + 9];
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace shardscope::gui
