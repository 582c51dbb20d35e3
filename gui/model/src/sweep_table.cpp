#include "shardscope/gui/sweep_table.hpp"

#include <nlohmann/json.hpp>

#include "shardscope/core/error.hpp"

namespace shardscope::gui {

std::string SweepRow::label() const {
  std::string out;
  for (const auto& [k, v] : settings) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out;
}

std::vector<SweepRow> sweep_rows(const std::vector<sim::SweepAxis>& axes, const std::vector<sim::SweepPoint>& points) {
  std::vector<SweepRow> rows;
  for (const auto& p : points) {
    SweepRow r;
    for (std::size_t a = 0; a < axes.size() && a < p.values.size(); ++a) r.settings.emplace_back(axes[a].key, p.values[a]);
    r.step_time_s = ns_to_s(p.summary.step_time);
    r.tokens_per_s_per_gpu = p.summary.tokens_per_s_per_gpu;
    r.peak_reserved = p.summary.peak_reserved;
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
    if (j.value("schema", "") != "shardscope.sweep/1") {
      throw ValidationError({Problem{origin, "schema", "not a shardscope sweep", "shardscope.sweep/1"}});
    }
    for (const auto& p : j.at("points")) {
      SweepRow r;
      for (const auto& [k, v] : p.at("settings").items()) r.settings.emplace_back(k, v.get<std::string>());
      r.step_time_s = p.at("step_time_s").get<double>();
      r.tokens_per_s_per_gpu = p.at("tokens_per_s_per_gpu").get<double>();
      r.peak_reserved = p.at("peak_reserved_bytes").get<Bytes>();
      r.fits = p.at("fits").get<bool>();
      r.pareto = p.at("pareto").get<bool>();
      if (p.contains("error") && p["error"].is_string()) r.error = p["error"].get<std::string>();
      rows.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ValidationError({Problem{origin, "", std::string("malformed sweep JSON: ") + e.what(), "the output of shardscope sweep --json"}});
  }
  return rows;
}

}  // namespace shardscope::gui
