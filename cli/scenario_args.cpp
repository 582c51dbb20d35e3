#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/calibration.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/device_profile.hpp"

namespace shardscope::cli {

ConfigTree load_scenario_tree(const ScenarioArgs& args) {
  ConfigTree tree = shardscope::load_scenario_tree(args.path);
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

std::vector<std::string> override_list(const ScenarioArgs& args) {
  std::vector<std::string> out;
  if (!args.model_preset.empty()) out.push_back("model.preset=" + args.model_preset);
  if (!args.cluster_preset.empty()) out.push_back("cluster.preset=" + args.cluster_preset);
  if (args.nodes > 0) out.push_back(fmt::format("cluster.nodes={}", args.nodes));
  if (args.gpus_per_node > 0)
    out.push_back(fmt::format("cluster.gpus_per_node={}", args.gpus_per_node));
  if (args.expandable_segments) out.emplace_back("allocator.expandable_segments=true");
  out.insert(out.end(), args.overrides.begin(), args.overrides.end());
  return out;
}

Scenario load_scenario_args(const ScenarioArgs& args) {
  Scenario scenario = read_scenario(load_scenario_tree(args), args.path,
                                    std::filesystem::path(args.path).parent_path());
  apply_measured_file_args(scenario, args);
  return scenario;
}

namespace {

// A file given on the command line that another command wrote; its problems name the option.
template <typename T, typename Load>
std::shared_ptr<const T> load_option_file(const char* option, const std::string& path, Load load,
                                          const char* expected) {
  try {
    return load(path);
  } catch (const ValidationError&) {
    throw;  // names the file and its key
  } catch (const Error& e) {
    throw ValidationError({Problem{option, "", e.what(), expected}});
  }
}

}  // namespace

void apply_measured_file_args(Scenario& scenario, const ScenarioArgs& args) {
  if (!args.device_profile.empty()) {
    scenario.cluster.gpu.device_profile = load_option_file<DeviceProfile>(
        "--device-profile", args.device_profile, shared_device_profile,
        "a profile written by shardscope profile-device");
  }
  if (!args.calibration.empty()) {
    scenario.cluster.calibration =
        load_option_file<Calibration>("--calibration", args.calibration, shared_calibration,
                                      "a calibration written by shardscope calibrate");
  }
}

}  // namespace shardscope::cli
