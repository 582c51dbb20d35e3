// Scenario text (YAML or JSON) with --set overrides: lines "#set key=value" at the top are
// overrides, the rest is the scenario. A scenario that reads and stays small is also lowered,
// checked and simulated, so the fuzzer explores lowering and the engine with odd but valid input.
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"
#include "shardscope/sim/engine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  std::string_view text = fuzz::as_text(data, size);
  std::vector<std::string> overrides;
  while (text.starts_with("#set ")) {
    const auto end = text.find('\n');
    overrides.emplace_back(
        text.substr(5, end == std::string_view::npos ? std::string_view::npos : end - 5));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  fuzz::expect_clean_errors([&] {
    const Scenario scenario = scenario_from_text(text, overrides);
    if (estimated_schedule_ops(scenario) > 20'000) return;  // keeps each run in milliseconds
    const Schedule schedule = lower(scenario);
    if (!check_schedule(schedule).empty()) __builtin_trap();  // lowering must emit a valid IR
    const sim::CostModel costs(scenario);
    (void)sim::simulate(schedule, costs, {});
  });
  return 0;
}
