// Checks of what the user gave beside the scenario: sizes on the command line, a budget against
// the GPU, and whether two runs are of one job.
#include <fmt/format.h>

#include <algorithm>

#include "commands.hpp"
#include "shardscope/core/compare.hpp"
#include "shardscope/traces/kineto_import.hpp"

namespace shardscope::cli {

std::optional<Bytes> size_flag(std::string_view flag, const std::string& text,
                               std::vector<Problem>& problems) {
  const bool bare_number =
      !text.empty() && text.find_first_not_of("0123456789.") == std::string::npos;
  const auto bytes = bare_number ? std::nullopt : parse_bytes(text);
  if (!bytes || *bytes <= 0) {
    problems.push_back(
        {std::string(flag), text,
         bare_number ? "a size needs a unit (a bare number would be bytes)" : "not a size",
         "e.g. 80GiB, 96GB, 72000MiB"});
    return std::nullopt;
  }
  return bytes;
}

void warn_budget_above_capacity(std::string_view flag, Bytes budget, Bytes capacity) {
  if (budget <= capacity) return;
  fmt::print(stderr,
             "warning: {} {} is above the {} the caching allocator can reserve on this GPU; "
             "\"fits\" then promises memory the GPU does not have\n",
             flag, format_bytes(budget), format_bytes(capacity));
}

void check_same_job(const Timeline& a, const std::string& a_file, const Timeline& b,
                    const std::string& b_file, bool allow) {
  const auto differences = analysis::job_differences(a, b);
  if (differences.empty()) return;
  if (allow) {
    fmt::print(stderr, "warning: {} (A) and {} (B) are not runs of one job:\n", a_file, b_file);
    for (const auto& d : differences) fmt::print(stderr, "  {}\n", d);
    return;
  }
  std::vector<Problem> problems;
  problems.reserve(differences.size());
  for (const auto& d : differences)
    problems.push_back({fmt::format("{} and {}", a_file, b_file), "", "are not one job: " + d,
                        "runs of the same job, or --allow-mismatch to compare them anyway"});
  throw ValidationError(std::move(problems));
}

}  // namespace shardscope::cli
