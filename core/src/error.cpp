#include "shardscope/core/error.hpp"

#include <fmt/format.h>

namespace shardscope {

std::string Problem::to_string() const {
  std::string out;
  if (!file.empty()) out += file + ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  if (!allowed.empty()) out += " (" + allowed + ")";
  return out;
}

namespace {
std::string summarize(const std::vector<Problem>& problems) {
  if (problems.empty()) return "no problems";
  std::string out = fmt::format("{} problem{}:", problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems) out += "\n  " + p.to_string();
  return out;
}
}  // namespace

ValidationError::ValidationError(std::vector<Problem> problems)
    : Error(summarize(problems)), problems_(std::move(problems)) {}

void throw_if_any(std::vector<Problem> problems) {
  if (!problems.empty()) throw ValidationError(std::move(problems));
}

}  // namespace shardscope
