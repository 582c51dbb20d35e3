#include <gtest/gtest.h>

#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope {
namespace {

const std::string kData = SHARDSCOPE_TEST_DATA_DIR;

TEST(ScheduleIo, GoldenFileRoundTripsByteForByte) {
  const std::string text = read_text_file(kData + "/schedule_small.json");
  const Schedule s = schedule_from_json(text, "schedule_small.json");
  EXPECT_EQ(s.ops.size(), 7u);
  EXPECT_EQ(s.ops[1].kind, OpKind::all_gather);
  EXPECT_EQ(s.ops[1].comm, 0);
  EXPECT_EQ(s.ops[3].fixed_time, 25 * kNsPerMs);
  EXPECT_EQ(schedule_to_json(s), text);
}

TEST(ScheduleIo, RejectsOtherSchemasAndListsMalformedFields) {
  EXPECT_THROW(schedule_from_json(R"({"schema": "other/1"})"), ValidationError);
  EXPECT_THROW(schedule_from_json("{not json"), ValidationError);
  try {
    schedule_from_json(R"({"schema": "shardscope.schedule/1", "name": "x", "world_size": 0, "iterations": 1,
      "tokens_per_iteration": 0, "streams": [], "communicators": [], "groups": [], "buffers": [],
      "ops": [{"id": 3, "kind": "teleport", "stream": 0, "group": -1, "phase": "forward", "iteration": 0,
               "microbatch": 0, "comm": -1, "bytes": 0, "flops": 0, "deps": [], "allocs": [], "frees": [], "uses": []}]})");
    FAIL();
  } catch (const ValidationError& e) {
    std::vector<std::string> keys;
    for (const auto& p : e.problems()) keys.push_back(p.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"world_size", "ops[0].id", "ops[0].kind"}));
  }
}

TEST(ScheduleIo, AtomicWriteLeavesNothingHalfWritten) {
  EXPECT_THROW(write_text_file_atomic("/nonexistent-dir/out.json", "{}"), Error);
}

}  // namespace
}  // namespace shardscope
