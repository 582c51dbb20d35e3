// The sweep: results independent of the thread count, and each point the same numbers that
// simulating its configuration alone gives (a sweep only leaves out the critical path).
#include "shardscope/sim/sweep.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope::sim {
namespace {

const std::string kDefaultScenario =
    std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";

TEST(Sweep, SameResultsOnOneAndManyThreads) {
  const auto tree = load_config_file(kDefaultScenario);
  const std::vector<SweepAxis> axes{{"fsdp.reshard_after_forward", {"true", "false"}},
                                    {"training.micro_batch", {"1", "2", "3"}}};
  SweepOptions one;
  one.threads = 1;
  SweepOptions many;
  many.threads = 4;
  const auto a = sweep(tree, "default", axes, one);
  const auto b = sweep(tree, "default", axes, many);
  EXPECT_EQ(sweep_csv(axes, a), sweep_csv(axes, b));
  EXPECT_EQ(sweep_json(axes, a), sweep_json(axes, b));
  ASSERT_EQ(a.size(), 6U);
}

// Each point says why it does not fit, or that it fits tightly, against the budget.
TEST(Sweep, APointSaysWhyItDoesNotFitOrThatItFitsTightly) {
  const auto tree = load_config_file(kDefaultScenario);
  const std::vector<SweepAxis> axes{{"training.activation_checkpointing", {"full"}}};
  const Bytes reserved = sweep(tree, "default", axes, {}).front().summary.peak_reserved.value();
  SweepOptions options;
  options.memory_budget = reserved + reserved / 200;  // 0.5 % free: under the 2 % margin
  auto p = sweep(tree, "default", axes, options).front();
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.fit_note, fmt::format("tight: {} free", format_bytes(reserved / 200)));
  options.memory_budget = reserved * 2;
  EXPECT_EQ(sweep(tree, "default", axes, options).front().fit_note, "");
  options.memory_budget = reserved - kGiB;
  p = sweep(tree, "default", axes, options).front();
  EXPECT_FALSE(p.fits);
  EXPECT_TRUE(p.fit_note.starts_with(
      fmt::format("1.00 GiB over the {} budget at ", format_bytes(reserved - kGiB))))
      << p.fit_note;
  EXPECT_NE(sweep_json(axes, {p}).find("\"fit_note\": \"1.00 GiB over"), std::string::npos);
}

// Not recording what bound each start changes no time: every op issues, starts and ends when it
// does with the record on.
TEST(Sweep, SkippingTheCriticalPathChangesNoOpTime) {
  const Scenario scenario =
      load_scenario(kDefaultScenario, {"training.activation_checkpointing=full"});
  const Schedule schedule = lower(scenario);
  const CostModel costs(scenario);
  SimOptions lean;
  lean.record_critical_path = false;
  const auto full = simulate(schedule, costs);
  const auto fast = simulate(schedule, costs, lean);
  ASSERT_FALSE(full.timeline.critical_path.empty());
  ASSERT_TRUE(fast.timeline.critical_path.empty());
  ASSERT_EQ(full.ops.size(), fast.ops.size());
  for (std::size_t i = 0; i < full.ops.size(); ++i) {
    ASSERT_EQ(full.ops[i].issue, fast.ops[i].issue) << "op " << i;
    ASSERT_EQ(full.ops[i].start, fast.ops[i].start) << "op " << i;
    ASSERT_EQ(full.ops[i].end, fast.ops[i].end) << "op " << i;
  }
  const analysis::Summary with_path = analysis::summarize(full.timeline);
  const analysis::Summary without = analysis::summarize(fast.timeline, false);
  EXPECT_FALSE(with_path.critical_path.ops.empty());
  EXPECT_TRUE(without.critical_path.ops.empty());
  EXPECT_TRUE(without.critical_path.by_kind.empty());
}

// A sweep point carries the numbers `simulate` gives for its configuration alone.
TEST(Sweep, EachPointMatchesSimulatingItsConfigurationAlone) {
  const auto tree = load_config_file(kDefaultScenario);
  const std::vector<SweepAxis> axes{{"training.activation_checkpointing", {"none", "full"}}};
  SweepOptions options;
  options.threads = 1;
  const auto points = sweep(tree, "default", axes, options);
  ASSERT_EQ(points.size(), 2U);
  for (const auto& p : points) {
    const Scenario scenario =
        load_scenario(kDefaultScenario, {"training.activation_checkpointing=" + p.values[0]});
    const Schedule schedule = lower(scenario);
    SimOptions sim_options;
    sim_options.allocator = scenario.allocator;  // the example runs with expandable segments
    const analysis::Summary alone =
        analysis::summarize(simulate(schedule, CostModel(scenario), sim_options).timeline);
    const analysis::Summary& s = p.summary;
    SCOPED_TRACE(p.values[0]);
    EXPECT_EQ(s.step_time, alone.step_time);
    EXPECT_EQ(s.tokens_per_s_per_gpu, alone.tokens_per_s_per_gpu);
    EXPECT_EQ(s.mfu, alone.mfu);
    EXPECT_EQ(s.forward_time, alone.forward_time);
    EXPECT_EQ(s.backward_time, alone.backward_time);
    EXPECT_EQ(s.comm_exposed, alone.comm_exposed);
    EXPECT_EQ(s.peak_allocated, alone.peak_allocated);
    EXPECT_EQ(s.peak_reserved, alone.peak_reserved);
    EXPECT_EQ(s.peak_by_category, alone.peak_by_category);
    EXPECT_EQ(s.peak_op, alone.peak_op);
    EXPECT_EQ(s.collectives, alone.collectives);
    EXPECT_EQ(s.stream_busy, alone.stream_busy);
    EXPECT_EQ(s.allocator_retries, alone.allocator_retries);
    EXPECT_EQ(s.out_of_memory, alone.out_of_memory);
    EXPECT_TRUE(s.critical_path.by_kind.empty());
    EXPECT_FALSE(alone.critical_path.by_kind.empty());
  }
}

// A worker reuses its copy of the configuration from point to point. A point's result must not
// depend on the points before it, overlapping keys included: here the second axis replaces the
// mapping the first sets a key in, and in the first point with a plain value.
TEST(Sweep, APointDoesNotDependOnThePointsBeforeIt) {
  const auto tree = load_config_file(kDefaultScenario);
  const std::vector<std::vector<SweepAxis>> grids{
      {{"training.micro_batch", {"1", "2"}}, {"fsdp.reshard_after_forward", {"false", "true"}}},
      {{"fsdp.mixed_precision.param_dtype", {"fp32"}},
       {"fsdp.mixed_precision",
        {"{param_dtype: bf16}", "{param_dtype: bf16, reduce_dtype: fp32}"}}}};
  SweepOptions options;
  options.threads = 1;  // one worker takes every point in order
  for (const auto& axes : grids) {
    for (const auto& p : sweep(tree, "default", axes, options)) {
      std::vector<SweepAxis> alone_axes;
      for (std::size_t a = 0; a < axes.size(); ++a)
        alone_axes.push_back({axes[a].key, {p.values[a]}});
      const auto alone = sweep(tree, "default", alone_axes, options);
      ASSERT_EQ(alone.size(), 1U);
      SCOPED_TRACE(axes.back().key + "=" + p.values.back());
      EXPECT_EQ(p.error, alone[0].error);
      EXPECT_EQ(p.summary.step_time, alone[0].summary.step_time);
      EXPECT_EQ(p.summary.peak_reserved, alone[0].summary.peak_reserved);
    }
  }
  // Both points of the overlapping grid are valid configurations: carrying the first point's
  // section over would give the second one the first one's keys.
  for (const auto& p : sweep(tree, "default", grids[1], options))
    EXPECT_EQ(p.error, "") << p.values.back();
}

// A relative model.hf_config resolves against the scenario's own directory, as in `simulate`.
TEST(Sweep, ARelativeHfConfigResolvesAgainstTheScenariosDirectory) {
  const std::string file = std::string(SHARDSCOPE_TEST_DATA_DIR) + "/scenarios/hf_import.yaml";
  const auto tree = load_config_file(file);
  const std::vector<SweepAxis> axes{{"training.micro_batch", {"1", "2"}}};
  SweepOptions options;
  options.threads = 1;
  const auto points = sweep(tree, file, axes, options);
  ASSERT_EQ(points.size(), 2U);
  for (const auto& p : points) {
    EXPECT_EQ(p.error, "");
    EXPECT_EQ(p.summary.step_time,
              simulate_scenario(load_scenario(file, {"training.micro_batch=" + p.values[0]}))
                  .summary.step_time);
  }
}

}  // namespace
}  // namespace shardscope::sim
