// The planner's two shortcuts to a step time against the full simulation, on a spread sample of
// the plan's own space (both APIs, every searched knob): simulate_step_time gives the simulation's
// step time exactly, and step_time_floor is never above it. A difference here would be a wrong
// plan: the search times configurations with the first and skips them by the second.
#include "shardscope/sim/step_floor.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/plan_space.hpp"

namespace shardscope::sim {
namespace {

const std::string kFloorExample = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";

TEST(StepFloor, TheStepTimeAloneEqualsTheSimulationAndTheFloorIsBelowIt) {
  PlanInputs inputs;
  inputs.global_batch_tokens = 8192 * 8 * 4;  // 4 sequences per rank: micro-batches 1, 2, 4
  inputs.fixed = {{"training.iterations", "2"}};
  const PlanBase base = plan_base(load_config_file(kFloorExample), kFloorExample, inputs);
  std::size_t checked = 0, offloaded = 0;
  std::vector<double> tightness;  // floor / step
  for (std::size_t i = 0; i < base.space.size(); i += 97) {
    Scenario scenario;
    try {
      scenario = read_scenario(configuration_tree(base.tree, base.space, i), kFloorExample);
    } catch (const ValidationError&) {
      continue;  // knobs that do not combine
    }
    const Schedule schedule = lower(scenario);
    const CostModel costs(scenario);
    PipelineOptions options;
    options.sim.record_memory_samples = false;
    options.sim.record_critical_path = false;
    const TimeNs step = simulate_schedule(scenario, schedule, options).summary.step_time;
    const std::string what = configuration_text(base.space, decode(base.space, i));
    EXPECT_EQ(simulate_step_time(schedule, costs), step) << what;
    const TimeNs floor = step_time_floor(schedule, costs);
    EXPECT_GT(floor, 0) << what;
    EXPECT_LE(floor, step) << what;
    tightness.push_back(static_cast<double>(floor) / static_cast<double>(step));
    offloaded += scenario.fsdp.cpu_offload.params;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
  EXPECT_GT(offloaded, 10u);
  // It is a bound worth having: the chain it follows is most of the step.
  std::sort(tightness.begin(), tightness.end());
  EXPECT_GT(tightness[tightness.size() / 2], 0.9);
}

}  // namespace
}  // namespace shardscope::sim
