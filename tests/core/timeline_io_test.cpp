#include <gtest/gtest.h>

#include "shardscope/core/error.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope {
namespace {

Timeline sample() {
  Timeline t;
  t.name = "sample";
  t.source = "simulated";
  t.streams = {{"cpu", StreamKind::cpu}, {"compute", StreamKind::compute}};
  t.groups = {"root", "layers.0"};
  t.communicators = {{"shard", 8, 1}};
  t.ops = {{0, OpKind::forward, 1, 1, Phase::forward, 0, 0, kNone, 0, 10, 35},
           {1, OpKind::backward, 1, 1, Phase::backward, 0, 0, kNone, 0, 35, 85}};
  t.memory = {{0, 100, 2 * kMiB, std::vector<Bytes>(all_buffer_categories().size(), 0)}};
  t.memory_capacity = 80 * kGiB;
  t.metrics = {{"step_time_s", 0.085}, {"peak_allocated_bytes", 100}};
  return t;
}

TEST(TimelineIo, RoundTripsByteForByte) {
  const std::string text = timeline_to_json(sample());
  const Timeline back = timeline_from_json(text);
  EXPECT_EQ(back.ops.size(), 2u);
  EXPECT_EQ(back.ops[1].duration(), 50);
  EXPECT_EQ(back.end_time(), 85);
  EXPECT_DOUBLE_EQ(back.metrics.at("step_time_s"), 0.085);
  EXPECT_EQ(timeline_to_json(back), text);
  EXPECT_NE(text.find("\"schema\": \"shardscope.timeline/1\""), std::string::npos);
}

TEST(TimelineIo, RejectsMalformedOps) {
  std::string text = timeline_to_json(sample());
  const auto pos = text.find("\"end_ns\":85");
  text.replace(pos, 11, "\"end_ns\":5");
  EXPECT_THROW(timeline_from_json(text), ValidationError);
  EXPECT_THROW(timeline_from_json(R"({"schema": "shardscope.schedule/1"})"), ValidationError);
}

}  // namespace
}  // namespace shardscope
