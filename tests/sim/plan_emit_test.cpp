// Every knob the planner searches reaches the code `plan --emit` writes: for each target, two
// values of a searched key the target can express give two different files. A knob added to the
// key table's search that an emitter does not spell fails here. And an emitted scenario simulates
// to the plan's own prediction.
#include "shardscope/sim/plan_emit.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/scenario_keys.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/plan_space.hpp"

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

// training.generation is written where PyTorch can say it: the fsdp2 module registers generate
// and gives a rollout() of the plan's shapes (the emitted-plan oracle runs it); torchtitan's
// trainer has no generation step, so that target refuses it.
TEST(PlanEmit, GenerationIsEmittedForFsdp2AndRefusedByTorchtitan) {
  const std::string generating =
      "training.generation.calls=3,training.generation.batch=4,"
      "training.generation.prompt_tokens=16,training.generation.new_tokens=8,"
      "training.generation.keep_unsharded=true,training.generation.kv_cache=preallocated";
  std::vector<std::string> overrides;
  for (std::string_view rest = generating; !rest.empty();) {
    const auto comma = rest.find(',');
    overrides.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  const Scenario s =
      scenario_from_text("model: {preset: tiny}\ntraining: {seq_len: 256}\n", overrides);
  const std::string code = emit_plan(EmitTarget::fsdp2, s, {});
  for (const char* line : {"GENERATION_CALLS = 3", "GENERATION_BATCH = 4", "PROMPT_TOKENS = 16",
                           "NEW_TOKENS = 8", "register_fsdp_forward_method(model, \"generate\")",
                           "def rollout(model, prompts):", "model.set_reshard_after_forward(False)",
                           "cache_implementation=\"static\"", "module.reshard()"})
    EXPECT_NE(code.find(line), std::string::npos) << line;
  const std::string plain =
      emit_plan(EmitTarget::fsdp2, scenario_from_text("model: {preset: tiny}\n"), {});
  EXPECT_EQ(plain.find("rollout"), std::string::npos);
  EXPECT_EQ(plain.find("register_fsdp_forward_method"), std::string::npos);
  try {
    (void)emit_plan(EmitTarget::torchtitan, s, {});
    ADD_FAILURE() << "torchtitan emitted a generation step";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("training.generation.calls"), std::string::npos);
  }
}

// `plan --emit scenario`: the chosen configuration as a scenario file that simulates to exactly
// the plan's prediction.
TEST(PlanEmit, AnEmittedScenarioSimulatesToThePlansPrediction) {
  const std::string file = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";
  const ConfigTree tree = load_config_file(file);
  const Scenario base = load_scenario(file);
  PlanInputs inputs;
  inputs.api = "either";
  inputs.fixed = {{"training.loss", "fused"},
                  {"fsdp.forward_prefetch_modules", "0"},
                  {"fsdp.backward_prefetch_modules", "1"},
                  {"fsdp.separate_reduce_scatter_group", "false"},
                  {"fsdp.wrap.blocks_per_group", "1"},
                  {"fsdp.mixed_precision.param_dtype", "bf16"},
                  {"fsdp.mixed_precision.reduce_dtype", "fp32"},
                  {"allocator.expandable_segments", "true"}};
  const PlanSpace space = default_plan_space(base, inputs);
  PlanOptions options;
  options.top = 2;
  options.memory_budget = plan_capacity(base);
  const PlanResult result = plan(tree, file, space, options);
  ASSERT_EQ(result.ranked.size(), 2U);

  const auto dir = std::filesystem::temp_directory_path() / "shardscope-emit-scenario";
  std::filesystem::create_directories(dir);
  for (std::size_t rank : {1U, 2U}) {
    const auto out = dir / fmt::format("plan{}.yaml", rank);
    const std::string text =
        emit_ranked(EmitTarget::scenario, tree, file, space, result, rank, "test", out.string());
    EXPECT_TRUE(text.starts_with(fmt::format("# The scenario of plan #{} of `test`", rank)));
    write_text_file_atomic(out.string(), text);
    const auto again = simulate_scenario(load_scenario(out));
    const auto& planned = result.ranked[rank - 1].summary;
    EXPECT_EQ(again.summary.step_time, planned.step_time) << text;
    EXPECT_EQ(again.summary.peak_reserved, planned.peak_reserved);
    EXPECT_EQ(again.scenario.fsdp.api,
              configuration_scenario(tree, file, space, result.ranked[rank - 1].index).fsdp.api);
  }
  std::filesystem::remove_all(dir);
}

// A key naming a file relative to the scenario names the same file from where the emitted
// scenario is written; absolute paths stay.
TEST(PlanEmit, AnEmittedScenarioFindsItsFilesFromWhereItIsWritten) {
  const ConfigTree tree = parse_config_text(
      "cluster: {calibration: cal/c.json, gpu: {device_profile: /abs/p.json}}\n"
      "model: {hf_config: ../hf/config.json}\n",
      "t");
  const std::string text = emit_scenario(tree, "/w/a/b/s.yaml", "/w/a/out/plan.yaml", "x", {});
  const ConfigTree back = parse_config_text(text, "emitted");
  EXPECT_EQ(back["cluster"]["calibration"], "../b/cal/c.json");
  EXPECT_EQ(back["cluster"]["gpu"]["device_profile"], "/abs/p.json");
  EXPECT_EQ(back["model"]["hf_config"], "../hf/config.json");
}

}  // namespace
}  // namespace shardscope::sim
