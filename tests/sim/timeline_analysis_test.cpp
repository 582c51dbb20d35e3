// The analysis library reads a simulated Timeline alone (no Schedule, no simulator result) and
// gets the simulator's numbers; the timeline file round trip loses nothing a summary needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

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
  // Today's numbers (README, docs/validation.md): MFU 39.8 %, HFU 43.7 %, forward 618.734 ms.
  EXPECT_NEAR(100 * s.mfu.value(), 39.8, 0.05);
  EXPECT_NEAR(100 * s.hfu.value(), 43.7, 0.05);
  EXPECT_NEAR(ns_to_ms(s.forward_time), 618.734, 0.0005);
  EXPECT_TRUE(s == sim);
}

// `summarize t.json` says what `simulate` said, field by field (the CPU lane, allocator retries,
// the exact critical path and an out-of-memory included), for every example, one that runs out of
// memory and one with retries: the Timeline is all a reader needs.
TEST(TimelineAnalysis, EveryExamplesTimelineFileSummarizesAsSimulateDoes) {
  std::vector<std::pair<std::string, std::vector<std::string>>> cases;
  for (const auto& entry : std::filesystem::directory_iterator(SHARDSCOPE_EXAMPLES_DIR)) {
    if (entry.path().extension() == ".yaml") cases.push_back({entry.path().string(), {}});
  }
  std::sort(cases.begin(), cases.end());
  ASSERT_GE(cases.size(), 6u);
  cases.push_back({kDefault, {"training.micro_batch=8"}});  // does not fit
  cases.push_back({kDefault, {"allocator.expandable_segments=false", "training.micro_batch=3"}});
  bool out_of_memory = false, retries = false;
  for (const auto& [file, overrides] : cases) {
    SCOPED_TRACE(file + (overrides.empty() ? "" : " --set " + overrides[0]));
    const auto run = run_file(file, overrides);
    const auto back =
        analysis::summarize(timeline_from_json(timeline_to_json(run.result.timeline)));
    EXPECT_EQ(analysis::summary_to_json(back), analysis::summary_to_json(run.summary));
    EXPECT_EQ(analysis::summary_table(back), analysis::summary_table(run.summary));
    EXPECT_TRUE(back == run.summary);  // every field, the full critical path's ops too
    ASSERT_FALSE(back.stream_busy.empty());
    EXPECT_TRUE(back.stream_busy[0].second.has_value()) << back.stream_busy[0].first;
    EXPECT_FALSE(back.critical_path.ops.empty());
    ASSERT_TRUE(back.allocator_retries.has_value());
    const auto& by_iteration = run.result.timeline.allocator_retries_by_iteration;
    EXPECT_EQ(std::accumulate(by_iteration.begin(), by_iteration.end(), 0),
              *back.allocator_retries);
    out_of_memory |= !back.out_of_memory.empty();
    retries |= *back.allocator_retries > 0;
  }
  EXPECT_TRUE(out_of_memory);
  EXPECT_TRUE(retries);
}

// What no producer recorded is unknown, not zero: the CPU lane, the compute lost beside
// collectives and the retries of a timeline without them.
TEST(TimelineAnalysis, WhatTheProducerDidNotRecordIsUnknown) {
  auto t = run_file(kDefault).result.timeline;
  t.cpu_busy_by_iteration.clear();
  t.contention_by_iteration.clear();
  t.allocator_retries.reset();
  t.allocator_retries_by_iteration.clear();
  const auto s = analysis::summarize(t);
  EXPECT_FALSE(s.stream_busy[0].second.has_value());
  EXPECT_FALSE(s.contention.has_value());
  EXPECT_FALSE(s.allocator_retries.has_value());
  EXPECT_FALSE(s.allocator_retries_per_step.has_value());
  EXPECT_NE(analysis::summary_to_json(s).find("\"allocator_retries_per_step\": null"),
            std::string::npos);
  const std::string table = analysis::summary_table(s);
  EXPECT_NE(table.find("cpu unknown"), std::string::npos) << table;
  EXPECT_NE(table.find("compute beside it           unknown"), std::string::npos) << table;
  EXPECT_NE(analysis::summary_to_json(s).find("\"allocator_retries\": null"), std::string::npos);
  EXPECT_NE(analysis::summary_to_json(s).find("\"contention_s\": null"), std::string::npos);
}

// The default scenario releases the allocator's cache once in its second iteration and, run
// longer, twice in each after: retries in the steady state, which the summary reports per step
// (the planner's bottleneck too); a run of one iteration cannot tell them from the warm-up's.
TEST(TimelineAnalysis, RetriesInTheLastIterationAreTheStepsOwn) {
  const auto two = run_file(kDefault);
  EXPECT_EQ(two.result.timeline.allocator_retries_by_iteration, (std::vector<int>{0, 1}));
  EXPECT_EQ(two.summary.allocator_retries_per_step, 1);
  EXPECT_NE(analysis::summary_table(two.summary).find("1 in the last iteration, not settled"),
            std::string::npos);
  const auto four = run_file(kDefault, {"training.iterations=4"});
  EXPECT_EQ(four.result.timeline.allocator_retries_by_iteration, (std::vector<int>{0, 1, 2, 2}));
  EXPECT_EQ(four.summary.allocator_retries_per_step, 2);
  const auto one = run_file(kDefault, {"training.iterations=1"});
  EXPECT_FALSE(one.summary.allocator_retries_per_step.has_value());
  EXPECT_EQ(analysis::summary_table(one.summary).find("in the last iteration"), std::string::npos);
}

TEST(TimelineAnalysis, CriticalPathFromDependenciesEndsWhereTheSimulatorsEnds) {
  const auto run = run_file(kDefault);
  Timeline without_exact_path = run.result.timeline;
  without_exact_path.critical_path.clear();
  const auto generic = analysis::critical_path(without_exact_path);
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
