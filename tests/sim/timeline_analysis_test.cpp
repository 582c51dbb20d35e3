// The analysis library reads a simulated Timeline alone (no Schedule, no simulator result) and
// gets the simulator's numbers; the timeline file round trip loses nothing a summary needs.
#include <gtest/gtest.h>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/timeline.hpp"
#include "sim/sim_test_util.hpp"

namespace shardscope::testing {
namespace {

const std::string kDefault = std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml";

TEST(TimelineAnalysis, SimulatedTimelineAloneGivesTheSimulatorsNumbers) {
  const auto run = run_file(kDefault);
  const Timeline back = timeline_from_json(timeline_to_json(run.result.timeline));
  const auto s = analysis::summarize(back);
  const auto& sim = run.summary;
  // Today's numbers (README, docs/validation.md): MFU 37.7 %, HFU 41.4 %, forward 673.050 ms.
  EXPECT_NEAR(100 * s.mfu, 37.7, 0.05);
  EXPECT_NEAR(100 * s.hfu, 41.4, 0.05);
  EXPECT_NEAR(ns_to_ms(s.forward_time), 673.050, 0.0005);
  EXPECT_EQ(s.step_time, sim.step_time);
  EXPECT_DOUBLE_EQ(s.mfu, sim.mfu);
  EXPECT_DOUBLE_EQ(s.hfu, sim.hfu);
  EXPECT_EQ(s.forward_time, sim.forward_time);
  EXPECT_EQ(s.backward_time, sim.backward_time);
  EXPECT_EQ(s.optimizer_time, sim.optimizer_time);
  EXPECT_EQ(s.comm_total, sim.comm_total);
  EXPECT_EQ(s.comm_exposed, sim.comm_exposed);
  EXPECT_EQ(s.collectives, sim.collectives);
  EXPECT_EQ(s.peak_allocated, sim.peak_allocated);
  EXPECT_EQ(s.peak_reserved, sim.peak_reserved);
  EXPECT_EQ(s.peak_by_category, sim.peak_by_category);
  EXPECT_EQ(s.peak_allocated_by_phase, sim.peak_allocated_by_phase);
  EXPECT_EQ(s.peak_op, sim.peak_op);
  // GPU streams agree; the CPU lane is the simulator's own issue time.
  for (std::size_t st = 1; st < s.stream_busy.size(); ++st)
    EXPECT_EQ(s.stream_busy[st], sim.stream_busy[st]) << s.stream_busy[st].first;
}

TEST(TimelineAnalysis, CriticalPathFromDependenciesEndsWhereTheSimulatorsEnds) {
  const auto run = run_file(kDefault);
  const auto generic = analysis::critical_path(run.result.timeline);
  ASSERT_FALSE(generic.ops.empty());
  ASSERT_FALSE(run.summary.critical_path.ops.empty());
  EXPECT_EQ(generic.ops.front(), run.summary.critical_path.ops.front());
  // Both paths lie within the step: their op time never exceeds it.
  TimeNs total = 0;
  for (const auto& [kind, t] : generic.by_kind) total += t;
  EXPECT_LE(total, run.summary.step_time);
  EXPECT_GT(total, run.summary.step_time / 2);
}

TEST(TimelineAnalysis, PeaksFromSamplesMatchTheAllocatorsPeaks) {
  const auto run = run_file(kDefault);
  const auto peaks = peaks_from_samples(run.result.timeline);
  EXPECT_EQ(peaks.allocated.bytes, run.result.timeline.peaks.allocated.bytes);
  EXPECT_EQ(peaks.reserved.bytes, run.result.timeline.peaks.reserved.bytes);
}

}  // namespace
}  // namespace shardscope::testing
