#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/output_file.hpp"

namespace shardscope::cli {

void check_outputs(const ScenarioArgs& input,
                   std::initializer_list<std::pair<std::string, std::string>> outputs) {
  const std::vector<std::pair<std::string, std::string>> list(outputs);
  const std::filesystem::path inputs[] = {input.path};
  check_output_paths(list, inputs);
}

void write_output(const std::string& path, std::string_view text, std::string_view note) {
  write_text_file_atomic(path, text);
  fmt::print("wrote {}{}\n", path, note);
}

}  // namespace shardscope::cli
