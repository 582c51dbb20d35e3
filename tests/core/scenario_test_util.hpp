#pragma once
// Helpers for scenario tests: the problems a scenario text is refused with.

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/scenario.hpp"

namespace shardscope::testing {

/// The problems `scenario_from_text` refuses the text with; empty when it loads.
inline std::vector<Problem> problems_of(std::string_view text,
                                        const std::vector<std::string>& overrides = {}) {
  try {
    scenario_from_text(text, overrides);
  } catch (const ValidationError& e) {
    return e.problems();
  }
  return {};
}

/// Whether a problem names `key` (and, when given, says `fragment`).
inline bool has_problem(const std::vector<Problem>& problems, std::string_view key,
                        std::string_view fragment = {}) {
  return std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
    return p.key == key && (fragment.empty() || p.to_string().find(fragment) != std::string::npos);
  });
}

}  // namespace shardscope::testing
