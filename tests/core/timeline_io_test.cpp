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
  t.memory = {{0, 100, 2 * kMiB, no_categories(), kNone}, {35, 200, 2 * kMiB, no_categories(), 1}};
  t.peaks = peaks_from_samples(t);
  t.memory_capacity = 80 * kGiB;
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
  EXPECT_DOUBLE_EQ(back.ops[1].flops, 1.5e12);
  EXPECT_EQ(back.provenance.rank, 1);
  EXPECT_EQ(back.facts.tokens_per_iteration, 4096);
  EXPECT_EQ(back.peaks.allocated.bytes, 200);
  EXPECT_EQ(back.peaks.allocated.op, 1);
  EXPECT_EQ(back.peaks.allocated_by_phase[static_cast<std::size_t>(Phase::backward)], 200);
  EXPECT_EQ(timeline_to_json(back), text);
  EXPECT_NE(text.find("\"schema\": \"shardscope.timeline/2\""), std::string::npos);
}

TEST(TimelineIo, RejectsMalformedOps) {
  std::string text = timeline_to_json(sample());
  const auto pos = text.find("\"end_ns\":85");
  text.replace(pos, 11, "\"end_ns\":5");
  EXPECT_THROW(timeline_from_json(text), ValidationError);
  EXPECT_THROW(timeline_from_json(R"({"schema": "shardscope.schedule/1"})"), ValidationError);
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
