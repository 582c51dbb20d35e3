#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/scenario_keys.hpp"

namespace shardscope::cli {

std::vector<std::filesystem::path> scenario_inputs(const ScenarioArgs& input) {
  std::vector<std::filesystem::path> inputs{input.path};
  for (const auto& flag : {input.device_profile, input.calibration}) {
    if (!flag.empty()) inputs.emplace_back(flag);
  }
  if (is_schedule_file(input.path)) return inputs;
  ConfigTree tree;
  try {
    tree = load_scenario_tree(input);
  } catch (const Error&) {
    return inputs;  // reported when the command loads it
  }
  const auto folder = std::filesystem::path(input.path).parent_path();
  for (const ScenarioKey& key : scenario_keys()) {
    if (!key.names_a_file) continue;
    const auto at = key_pointer(key.path);
    if (!tree.contains(at) || !tree[at].is_string()) continue;
    const std::filesystem::path file(tree[at].get<std::string>());
    inputs.push_back(file.is_relative() ? folder / file : file);
  }
  return inputs;
}

void check_outputs(const ScenarioArgs& input,
                   std::initializer_list<std::pair<std::string, std::string>> outputs) {
  const std::vector<std::pair<std::string, std::string>> list(outputs);
  check_output_paths(list, scenario_inputs(input));
}

void write_output(const std::string& path, std::string_view text, std::string_view note) {
  write_text_file_atomic(path, text);
  fmt::print("wrote {}{}\n", path, note);
}

}  // namespace shardscope::cli
