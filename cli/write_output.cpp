#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope::cli {

void write_output(const std::string& path, std::string_view text, std::string_view note) {
  write_text_file_atomic(path, text);
  fmt::print("wrote {}{}\n", path, note);
}

}  // namespace shardscope::cli
