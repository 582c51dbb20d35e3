// Every knob the planner searches reaches the code `plan --emit` writes: for each target, two
// values of a searched key the target can express give two different files. A knob added to the
// key table's search that an emitter does not spell fails here.
#include "shardscope/sim/plan_emit.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "shardscope/core/scenario_keys.hpp"

namespace shardscope::sim {
namespace {

// The scenario a target can emit: the first value of each of its constraints, then `set`.
Scenario emittable(EmitTarget target, const std::string& set) {
  std::vector<std::string> overrides;
  for (const auto& [key, values] : emit_constraints(target))
    overrides.push_back(fmt::format("{}={}", key, values.front()));
  overrides.push_back(set);
  return scenario_from_text("model: {preset: tiny}\ntraining: {seq_len: 256}\n", overrides);
}

TEST(PlanEmit, EverySearchedKnobChangesTheEmittedCode) {
  for (const EmitTarget target : {EmitTarget::fsdp2, EmitTarget::fsdp1, EmitTarget::torchtitan}) {
    SCOPED_TRACE(std::string(to_string(target)));
    const auto api = emit_api(target) == "fsdp2" ? FsdpApi::fsdp2 : FsdpApi::fsdp1;
    std::map<std::string, std::vector<std::string>> allowed;
    for (const auto& [key, values] : emit_constraints(target)) allowed[key] = values;
    int knobs = 0;
    for (const auto& key : scenario_keys()) {
      if (key.search.values.empty() || !key_applies(key, api)) continue;
      SCOPED_TRACE(std::string(key.path));
      std::vector<std::string> values;
      for (const auto v : split_choices(key.search.values)) {
        const auto it = allowed.find(std::string(key.path));
        if (it == allowed.end() || std::ranges::count(it->second, std::string(v)) > 0)
          values.emplace_back(v);
      }
      if (values.size() < 2) continue;  // the target fixes it (emit_constraints)
      ++knobs;
      std::vector<std::string> files;
      files.reserve(values.size());
      for (const auto& v : values)
        files.push_back(
            emit_plan(target, emittable(target, fmt::format("{}={}", key.path, v)), {}));
      for (std::size_t i = 1; i < files.size(); ++i)
        EXPECT_NE(files[i], files[0]) << values[i] << " and " << values[0] << " emit the same code";
    }
    EXPECT_GT(knobs, 0);
  }
}

}  // namespace
}  // namespace shardscope::sim
