#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/device_profile.hpp"

namespace shardscope::cli {

ConfigTree load_scenario_tree(const ScenarioArgs& args) {
  ConfigTree tree = load_config_file(args.path);
  // Another of shardscope's files (an IR, a timeline, a summary, a sweep) given as a scenario.
  if (const auto it = tree.find("schema"); it != tree.end() && it->is_string()) {
    const auto schema = it->get<std::string>();
    throw ValidationError(
        {Problem{args.path, "schema", fmt::format("is a {} file, not a scenario", schema),
                 schema.starts_with("shardscope.schedule/")
                     ? "simulate takes a schedule IR; validate, lower and sweep take scenarios"
                     : "a scenario (.yaml, .yml or .json with model, cluster, training, fsdp)"}});
  }
  // Shortcuts replace whole presets before --set overrides refine them.
  if (!args.model_preset.empty()) tree["model"] = ConfigTree{{"preset", args.model_preset}};
  if (!args.cluster_preset.empty()) tree["cluster"]["preset"] = args.cluster_preset;
  if (args.nodes > 0) tree["cluster"]["nodes"] = args.nodes;
  if (args.gpus_per_node > 0) tree["cluster"]["gpus_per_node"] = args.gpus_per_node;
  if (args.expandable_segments) tree["allocator"]["expandable_segments"] = true;
  std::vector<Problem> problems;
  for (const auto& o : args.overrides) apply_override(tree, o, problems);
  throw_if_any(std::move(problems));
  return tree;
}

Scenario load_scenario_args(const ScenarioArgs& args) {
  Scenario scenario = read_scenario(load_scenario_tree(args), args.path,
                                    std::filesystem::path(args.path).parent_path());
  apply_device_profile_arg(scenario, args);
  return scenario;
}

void apply_device_profile_arg(Scenario& scenario, const ScenarioArgs& args) {
  if (args.device_profile.empty()) return;
  try {
    scenario.cluster.gpu.device_profile = shared_device_profile(args.device_profile);
  } catch (const ValidationError&) {
    throw;  // names the profile file and its key
  } catch (const Error& e) {
    throw ValidationError({Problem{"--device-profile", "", e.what(),
                                   "a profile written by shardscope profile-device"}});
  }
}

}  // namespace shardscope::cli
