// What a plan prints: its table, its JSON, the text under an entry, and the error when nothing
// the search tried was valid (sim/…/planner.hpp).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "shardscope/core/error.hpp"
#include "shardscope/core/json_field.hpp"
#include "shardscope/sim/planner.hpp"

namespace shardscope::sim {

void throw_if_none_valid(const PlanSpace& space, const PlanResult& r) {
  if (r.cancelled || r.simulated == 0 || r.invalid < r.simulated || !r.first_invalid) return;
  const auto& first = *r.first_invalid;
  const PlanConfig config = decode(space, first.index);
  std::vector<Problem> problems;
  problems.push_back(
      {"plan", "",
       fmt::format("every one of the {} configurations simulated is invalid; the first ({} {}) "
                   "for the reasons that follow",
                   r.simulated, space.parts[config.part].api, configuration_text(space, config)),
       "change the --fix and --allow values or the scenario"});
  problems.insert(problems.end(), first.problems.begin(), first.problems.end());
  throw ValidationError(std::move(problems));
}

std::string entry_text(const PlanResult& r, const PlannedConfig& p) {
  if (p.members.size() < 2) return "";
  if (r.entries.time == 0 && r.entries.memory == 0) {
    return fmt::format(
        "the same prediction for {} configurations; knobs that do not matter "
        "here: {}",
        p.members.size(), p.no_effect);
  }
  TimeNs slowest = 0;
  Bytes largest = 0;
  for (const PlanMember& m : p.members) {
    slowest = std::max(slowest, m.step_time);
    largest = std::max(largest, m.peak_reserved);
  }
  return fmt::format(
      "{} configurations at most {:.1f} % slower (the slowest {}), up to {} reserved{}; knobs "
      "that do not change its speed here: {}",
      p.members.size(), 100 * r.entries.time, format_duration(slowest), format_bytes(largest),
      p.fastest.empty() ? std::string() : fmt::format("; the fastest {}", p.fastest), p.no_effect);
}

std::string plan_table(const PlanSpace& space, const PlanResult& r) {
  std::string out = fmt::format(
      "{} configurations in {} compute classes: {} simulated ({} fit, {} invalid), {} skipped by "
      "the step-time bound ({} of them lowered: their schedule's floor), {} skipped as above one "
      "that did not fit, {} found not to fit by "
      "their memory alone ({} of them before lowering: their parameters, optimizer states and "
      "saved activations alone)\n"
      "memory budget {} of peak reserved per GPU\n\n",
      r.space, r.classes, r.simulated, r.fitting, r.invalid, r.skipped_by_bound, r.skipped_by_floor,
      r.skipped_by_memory, r.screened_by_memory, r.screened_before_lowering,
      format_bytes(r.memory_budget));
  if (r.ranked.empty()) return out + "no configuration fits the memory budget\n";
  const bool p99 = r.objective == PlanObjective::p99;
  if (p99) {
    out += fmt::format(
        "ranked by the p99 step time with every rank replayed with the scenario's variation "
        "(the {} fastest by step time ranked; {})\n\n",
        r.p99_candidates,
        r.p99_exact ? "no other configuration could rank: the variation only slows ranks"
                    : "one outside them could rank: widen --p99-candidates");
  }
  const auto p99_text = [&](const PlannedConfig& p) {
    return p99 ? fmt::format("  {:>11}", p.percentiles ? format_duration(p.percentiles->p99)
                                                       : std::string("unknown"))
               : std::string();
  };
  out += fmt::format("{:>4}{}  {:>11}  {:>12}  {:>6}  {:>12}  {:>11}  {}\n", "rank",
                     p99 ? fmt::format("  {:>11}", "p99 step") : "", "step", "tokens/s/GPU", "MFU",
                     "reserved", "headroom", "bottleneck");
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& p = r.ranked[i];
    const auto& s = p.summary;
    out += fmt::format("{:>4}{}  {:>11}  {:>12}  {:>6}  {:>12}  {:>11}  {}\n", i + 1, p99_text(p),
                       format_duration(s.step_time),
                       s.tokens_per_s_per_gpu ? fmt::format("{:.0f}", *s.tokens_per_s_per_gpu)
                                              : std::string("unknown"),
                       analysis::percent_text(s.mfu), format_bytes(s.peak_reserved.value()),
                       format_bytes(r.memory_budget - s.peak_reserved.value()), p.bottleneck);
  }
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& p = r.ranked[i];
    out += fmt::format("\n#{} {}: {}\n", i + 1, space.parts[p.config.part].api,
                       configuration_text(space, p.config));
    if (p.members.size() > 1) out += fmt::format("   {}\n", entry_text(r, p));
    if (!p.change.empty()) out += fmt::format("   against #{}: {}\n", i + 2, p.change);
  }
  return out;
}

std::string plan_json(const PlanSpace& space, const PlanResult& r) {
  nlohmann::ordered_json j;
  j["schema"] = "shardscope.plan/1";
  j["space"] = r.space;
  j["compute_classes"] = r.classes;
  j["simulated"] = r.simulated;
  j["fitting"] = r.fitting;
  j["invalid"] = r.invalid;
  j["skipped_by_bound"] = r.skipped_by_bound;
  j["skipped_by_floor"] = r.skipped_by_floor;
  j["skipped_by_memory"] = r.skipped_by_memory;
  j["screened_by_memory"] = r.screened_by_memory;
  j["screened_before_lowering"] = r.screened_before_lowering;
  j["complete"] = !r.cancelled;
  j["memory_budget_bytes"] = r.memory_budget;
  j["entry_step_time_tolerance"] = r.entries.time;
  j["entry_reserved_tolerance_bytes"] = r.entries.memory;
  j["objective"] = r.objective == PlanObjective::p99 ? "p99" : "step_time";
  if (r.objective == PlanObjective::p99) {
    j["p99_candidates"] = r.p99_candidates;
    j["p99_exact"] = r.p99_exact;
  }
  auto& ranked = j["ranked"] = nlohmann::ordered_json::array();
  for (const auto& p : r.ranked) {
    const auto& s = p.summary;
    nlohmann::ordered_json e;
    e["index"] = p.index;
    e["api"] = space.parts[p.config.part].api;
    auto& settings = e["settings"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : p.settings) settings[k] = v;
    e["step_time_s"] = ns_to_s(s.step_time);
    if (p.percentiles) {
      e["p50_step_time_s"] = ns_to_s(p.percentiles->p50);
      e["p99_step_time_s"] = ns_to_s(p.percentiles->p99);
      e["max_step_time_s"] = ns_to_s(p.percentiles->max);
    }
    e["tokens_per_s_per_gpu"] = json_or_null(s.tokens_per_s_per_gpu);
    e["mfu"] = json_or_null(s.mfu);
    e["peak_reserved_bytes"] = s.peak_reserved.value();
    e["headroom_bytes"] = r.memory_budget - s.peak_reserved.value();
    e["bottleneck"] = p.bottleneck;
    e["equivalent_configurations"] = p.members.size();
    e["no_effect"] = p.no_effect;
    // Every configuration of the entry, with its prediction and the settings in which it
    // differs from the entry's first.
    auto& members = e["members"] = nlohmann::ordered_json::array();
    for (const PlanMember& m : p.members) {
      nlohmann::ordered_json member;
      member["index"] = m.index;
      member["step_time_s"] = ns_to_s(m.step_time);
      member["peak_reserved_bytes"] = m.peak_reserved;
      auto& differs = member["differs"] = nlohmann::ordered_json::object();
      for (const Setting& setting : settings_of(space, decode(space, m.index))) {
        const auto same =
            std::find_if(p.settings.begin(), p.settings.end(),
                         [&](const Setting& other) { return other.first == setting.first; });
        if (same == p.settings.end() || same->second != setting.second)
          differs[setting.first] = setting.second;
      }
      members.push_back(std::move(member));
    }
    e["change_to_next"] = p.change;
    ranked.push_back(std::move(e));
  }
  return j.dump(2) + "\n";
}

}  // namespace shardscope::sim
