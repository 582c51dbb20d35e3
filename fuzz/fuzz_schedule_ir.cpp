// A schedule IR (shardscope.schedule/3), as `simulate IR.json` reads it: parsed, checked, and when
// it passes the checks and is small, written back (byte-identical) and simulated.
#include "fuzz_target.hpp"
#include "shardscope/core/model_presets.hpp"
#include "shardscope/core/schedule_check.hpp"
#include "shardscope/core/schedule_io.hpp"
#include "shardscope/sim/engine.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors([&] {
    const Schedule schedule = schedule_from_json(fuzz::as_text(data, size), "ir.json");
    if (!check_schedule(schedule, "ir.json").empty() || schedule.ops.size() > 20'000) return;
    const std::string written = schedule_to_json(schedule);
    if (schedule_to_json(schedule_from_json(written)) != written) __builtin_trap();  // round trip
    Scenario scenario;
    scenario.cluster = *find_cluster_preset("h100-sxm-80gb");
    const sim::CostModel costs(scenario);
    (void)sim::simulate(schedule, costs, {});
  });
  return 0;
}
