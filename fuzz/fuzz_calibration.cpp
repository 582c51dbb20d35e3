// A calibration (shardscope.calibration/1), as `simulate --calibration` reads it: parsed and, when
// valid, written back and read again, and used to price a small schedule's every op.
#include "fuzz_target.hpp"
#include "shardscope/core/calibration.hpp"
#include "tiny_pricing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  fuzz::expect_clean_errors([&] {
    const Calibration calibration = calibration_from_json(fuzz::as_text(data, size), "c.json");
    (void)calibration_from_json(calibration_to_json(calibration), "written");
    Scenario scenario = fuzz::tiny_run().scenario;
    scenario.cluster.calibration = std::make_shared<Calibration>(calibration);
    fuzz::price_every_op(scenario);
  });
  return 0;
}
