// A device profile (shardscope.device_profile/2, or /1), as `simulate --device-profile` reads it:
// parsed and, when valid, written back and read again, and used to price a small schedule.
#include "fuzz_target.hpp"
#include "shardscope/core/device_profile.hpp"
#include "tiny_pricing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors([&] {
    const DeviceProfile profile = device_profile_from_json(fuzz::as_text(data, size), "p.json");
    (void)device_profile_from_json(device_profile_to_json(profile), "written");
    (void)profile_coverage(fuzz::tiny_run().schedule, profile);
    Scenario scenario = fuzz::tiny_run().scenario;
    scenario.cluster.gpu.device_profile = std::make_shared<DeviceProfile>(profile);
    fuzz::price_every_op(scenario);
  });
  return 0;
}
