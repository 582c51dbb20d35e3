#include <gtest/gtest.h>

#include "core/timeline_test_util.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope {
namespace {

using testing::no_categories;
using testing::timeline_op;

Timeline sample() {
  Timeline t;
  t.name = "sample";
  t.source = "measured";
  t.provenance = {"examples/x.yaml", "host (2 ranks as threads)", "host", "0.1.0", 1};
  t.facts = {2, 1, 4096, 6e9, 989e12};
  t.streams = {{"cpu", StreamKind::cpu}, {"compute", StreamKind::compute}};
  t.groups = {"root", "layers.0"};
  t.communicators = {{"shard", 8, 1}};
  t.op_labels = {"attention"};
  t.ops = {timeline_op(0, OpKind::forward, 1, 10, 35),
           timeline_op(1, OpKind::backward, 1, 35, 85, Phase::backward)};
  t.ops[0].group = t.ops[1].group = 1;
  t.ops[0].label = 0;
  t.ops[1].flops = 1.5e12;
  t.ops[1].deps = {0};
  t.ops[1].issue_start = 2;  // its launch call; op 0's was not seen
  t.ops[1].issue_end = 6;
  t.memory = {{0, 100, 2 * kMiB, no_categories(), kNone}, {35, 200, 2 * kMiB, no_categories(), 1}};
  t.peaks = peaks_from_samples(t);
  t.memory_capacity = 80 * kGiB;
  t.cpu_busy_by_iteration = {12, 40};
  t.contention_by_iteration = {0, 9};
  t.allocator_retries = 3;
  t.allocator_retries_by_iteration = {1, 2};
  t.out_of_memory =
      OutOfMemoryEvent{1, "grads layers.0", BufferCategory::unsharded_grads, 300, 400};
  t.critical_path = {{1, false, 0}, {0, true, 7}};
  return t;
}

TEST(TimelineIo, RoundTripsByteForByte) {
  const std::string text = timeline_to_json(sample());
  const Timeline back = timeline_from_json(text);
  ASSERT_EQ(back.ops.size(), 2u);
  EXPECT_EQ(back.ops[1].duration(), 50);
  EXPECT_EQ(back.end_time(), 85);
  EXPECT_EQ(op_label(back, back.ops[0]), "attention");
  EXPECT_EQ(back.ops[1].deps.size(), 1u);
  EXPECT_FALSE(back.ops[0].issue_known());
  EXPECT_EQ(back.ops[1].issue_start, 2);
  EXPECT_EQ(back.ops[1].issue_end, 6);
  EXPECT_DOUBLE_EQ(back.ops[1].flops, 1.5e12);
  EXPECT_EQ(back.provenance.rank, 1);
  EXPECT_EQ(back.facts.tokens_per_iteration, 4096);
  EXPECT_EQ(back.peaks.allocated.bytes, 200);
  EXPECT_EQ(back.peaks.allocated.op, 1);
  EXPECT_EQ(back.peaks.allocated_by_phase[static_cast<std::size_t>(Phase::backward)], 200);
  EXPECT_EQ(back.cpu_busy_by_iteration, (std::vector<TimeNs>{12, 40}));
  EXPECT_EQ(back.contention_by_iteration, (std::vector<TimeNs>{0, 9}));
  EXPECT_EQ(back.allocator_retries, 3);
  EXPECT_EQ(back.allocator_retries_by_iteration, (std::vector<int>{1, 2}));
  ASSERT_TRUE(back.out_of_memory);
  EXPECT_EQ(back.out_of_memory->buffer, "grads layers.0");
  EXPECT_EQ(back.out_of_memory->category, BufferCategory::unsharded_grads);
  ASSERT_EQ(back.critical_path.size(), 2u);
  EXPECT_TRUE(back.critical_path[1].issue_bound);
  EXPECT_EQ(back.critical_path[1].cpu_gap, 7);
  EXPECT_EQ(timeline_to_json(back), text);
  EXPECT_NE(text.find("\"schema\": \"shardscope.timeline/3\""), std::string::npos);
}

// A timeline/2 file has no CPU busy time, retries, out-of-memory event or exact path: it reads
// with them unknown, not as zeros.
TEST(TimelineIo, VersionTwoReadsWithTheProducerFactsUnknown) {
  Timeline t = sample();
  t.cpu_busy_by_iteration.clear();
  t.contention_by_iteration.clear();
  t.allocator_retries.reset();
  t.allocator_retries_by_iteration.clear();
  t.out_of_memory.reset();
  t.critical_path.clear();
  std::string text = timeline_to_json(t);
  text.replace(text.find("timeline/3"), 10, "timeline/2");
  text.erase(text.find("  \"allocator_retries\": null,\n"), 28);
  const Timeline back = timeline_from_json(text);
  EXPECT_TRUE(back.cpu_busy_by_iteration.empty());
  EXPECT_TRUE(back.contention_by_iteration.empty());
  EXPECT_FALSE(back.allocator_retries);
  EXPECT_FALSE(back.out_of_memory);
  EXPECT_TRUE(back.critical_path.empty());
}

// Retries by iteration are counts that add up to the run's: anything else is refused by key.
TEST(TimelineIo, RefusesRetriesByIterationThatAreNotTheRunsRetries) {
  for (const std::string to : {"[1, 1]", "[4, -1]", "[\"1\", 2]"}) {
    std::string text = timeline_to_json(sample());
    const std::string from = "\"allocator_retries_by_iteration\": [1,2]";
    ASSERT_NE(text.find(from), std::string::npos) << text;
    text.replace(text.find(from), from.size(), "\"allocator_retries_by_iteration\": " + to);
    try {
      (void)timeline_from_json(text, "t.json");
      ADD_FAILURE() << to;
    } catch (const ValidationError& e) {
      ASSERT_FALSE(e.problems().empty()) << to;
      EXPECT_EQ(e.problems()[0].key, "allocator_retries_by_iteration") << to;
    }
  }
}

TEST(TimelineIo, RefusesACriticalPathOrOutOfMemoryOfAnOpNotInIt) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"[[1,false,0],[0,true,7]]", "[[1,false,0],[9,true,7]]"},
           {"{\"op\":1,\"buffer\"", "{\"op\":5,\"buffer\""}}) {
    std::string text = timeline_to_json(sample());
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
    try {
      timeline_from_json(text, "t.json");
      FAIL() << "accepted " << to;
    } catch (const ValidationError& e) {
      EXPECT_NE(std::string(e.what()).find("is not among the ops"), std::string::npos) << e.what();
    }
  }
}

TEST(TimelineIo, RefusesNegativeContentionNamingTheKey) {
  std::string text = timeline_to_json(sample());
  const std::string from = "\"contention_by_iteration_ns\": [0,9]";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"contention_by_iteration_ns\": [0, -9]");
  try {
    timeline_from_json(text, "t.json");
    FAIL() << "accepted a negative contention";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("contention_by_iteration_ns"), std::string::npos)
        << e.what();
  }
}

TEST(TimelineIo, RejectsMalformedOps) {
  std::string text = timeline_to_json(sample());
  const auto pos = text.find("\"end_ns\":85");
  text.replace(pos, 11, "\"end_ns\":5");
  EXPECT_THROW(timeline_from_json(text), ValidationError);
  EXPECT_THROW(timeline_from_json(R"({"schema": "shardscope.schedule/1"})"), ValidationError);
  for (const char* bad : {"[6,2]", "[-1,2]", "[2]", "[2,6,7]"}) {
    std::string launch = timeline_to_json(sample());
    const auto at = launch.find("\"issue_ns\":[2,6]");
    ASSERT_NE(at, std::string::npos);
    launch.replace(at + 11, 5, bad);
    EXPECT_THROW(timeline_from_json(launch), ValidationError) << bad;
  }
}

TEST(TimelineIo, RejectsDanglingLabelsAndNegativeDependencies) {
  std::string text = timeline_to_json(sample());
  text.replace(text.find("\"label\":0"), 9, "\"label\":7");
  text.replace(text.find("\"deps\":[0]"), 10, "\"deps\":[-3]");
  try {
    timeline_from_json(text, "t.json");
    FAIL() << "accepted";
  } catch (const ValidationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ops[0].label"), std::string::npos) << what;
    EXPECT_NE(what.find("ops[1].deps"), std::string::npos) << what;
  }
}

TEST(TimelineIo, OlderFormatGetsAClearError) {
  try {
    timeline_from_json(R"({"schema": "shardscope.timeline/1", "ops": []})", "old.json");
    FAIL() << "accepted";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("older timeline format"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardscope
