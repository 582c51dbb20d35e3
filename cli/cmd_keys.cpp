#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/scenario_keys.hpp"

namespace shardscope::cli {

int run_keys(const KeysArgs& args) {
  if (args.markdown) {
    fmt::print("{}", scenario_keys_markdown());
    return kExitOk;
  }
  const std::string text = scenario_keys_text(args.prefix);
  if (text.empty()) {
    fmt::print(
        stderr,
        "error: no scenario key starts with '{}' (sections: model, cluster, training, fsdp)\n",
        args.prefix);
    return kExitBadInput;
  }
  fmt::print("{}", text);
  return kExitOk;
}

}  // namespace shardscope::cli
