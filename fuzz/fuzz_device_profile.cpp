// A device profile (shardscope.device_profile/1), as `simulate --device-profile` reads it: parsed
// and, when valid, written back and read again, and used to price a small schedule.
#include "fuzz_target.hpp"
#include "shardscope/core/device_profile.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  static const Scenario kScenario = scenario_from_text(
      "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 2}\ntraining: {iterations: 1}\n",
      {});
  static const Schedule kSchedule = lower(kScenario);
  fuzz::expect_clean_errors([&] {
    const DeviceProfile profile = device_profile_from_json(fuzz::as_text(data, size), "p.json");
    (void)device_profile_from_json(device_profile_to_json(profile), "written");
    (void)profile_coverage(kSchedule, profile);
    Scenario scenario = kScenario;
    scenario.cluster.gpu.device_profile = std::make_shared<DeviceProfile>(profile);
    const sim::CostModel costs(scenario);
    for (const Op& op : kSchedule.ops) (void)costs.cost(kSchedule, op);
  });
  return 0;
}
