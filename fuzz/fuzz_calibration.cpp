// A calibration (shardscope.calibration/1), as `simulate --calibration` reads it: parsed and, when
// valid, written back and read again, and used to price a small schedule's every op.
#include "fuzz_target.hpp"
#include "shardscope/core/calibration.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardscope;
  static const Scenario kScenario = scenario_from_text(
      "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 2}\ntraining: {iterations: 1}\n",
      {});
  static const Schedule kSchedule = lower(kScenario);
  fuzz::expect_clean_errors([&] {
    const Calibration calibration = calibration_from_json(fuzz::as_text(data, size), "c.json");
    (void)calibration_from_json(calibration_to_json(calibration), "written");
    Scenario scenario = kScenario;
    scenario.cluster.calibration = std::make_shared<Calibration>(calibration);
    const sim::CostModel costs(scenario);
    for (const Op& op : kSchedule.ops) (void)costs.cost(kSchedule, op);
  });
  return 0;
}
