// The planner's measured cost of each kind of search step (plan_progress.hpp, StepCosts), which
// prices the work ahead for the progress's time left: closed-form cases.
#include <gtest/gtest.h>

#include "plan_progress.hpp"

namespace shardscope::sim::planning {
namespace {

TEST(StepCosts, PricesAStepAtItsOwnPartsRatePerOp) {
  StepCosts costs(1e-6);
  costs.add(Step::replayed, 0, 2.0, 1000);  // part 0: 2 ms per op
  costs.add(Step::replayed, 1, 6.0, 1000);  // part 1: 6 ms per op
  EXPECT_DOUBLE_EQ(costs.seconds(Step::replayed, 0, 10), 0.02);
  EXPECT_DOUBLE_EQ(costs.seconds(Step::replayed, 1, 10), 0.06);
  // A read is priced by the configuration, whatever its schedule's size.
  costs.add(Step::read, 1, 0.5, 1000);
  costs.add(Step::read, 1, 0.3, 2000);
  EXPECT_DOUBLE_EQ(costs.seconds(Step::read, 1, 5), 0.4);
}

TEST(StepCosts, APartNotYetMeasuredTakesEveryPartsRate) {
  StepCosts costs(1e-6);
  costs.add(Step::replayed, 0, 2.0, 1000);
  costs.add(Step::replayed, 1, 6.0, 1000);
  // Part 2 has not replayed anything: (2 + 6) s over 2000 ops.
  EXPECT_DOUBLE_EQ(costs.seconds(Step::replayed, 2, 100), 0.4);
  // Part 0 has replayed but not yet timed: all parts' timings.
  costs.add(Step::timed, 1, 3.0, 100);
  EXPECT_DOUBLE_EQ(costs.seconds(Step::timed, 0, 100), 3.0);
}

TEST(StepCosts, AStepNotYetRunAnywhereIsItsPriorTimesAReplay) {
  StepCosts lowering_only(1e-3);
  // Nothing replayed yet: the prior times the lowering's cost per op (timing: 3 × replay).
  EXPECT_DOUBLE_EQ(lowering_only.seconds(Step::timed, 0, 100), 3 * 1e-3 * 100);
  StepCosts costs(1e-3);
  costs.add(Step::replayed, 1, 2.0, 1000);  // 2 ms per op, measured in every part's rate
  EXPECT_DOUBLE_EQ(costs.seconds(Step::timed, 0, 100), 3 * 2e-3 * 100);
}

}  // namespace
}  // namespace shardscope::sim::planning
