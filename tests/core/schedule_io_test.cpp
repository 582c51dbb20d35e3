#include "shardscope/core/schedule_io.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "shardscope/core/error.hpp"

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

TEST(ScheduleIo, BufferNamesAreSpelledFromTheirParts) {
  Schedule s;
  s.groups.push_back({"layers.3", 10, 5, DType::bf16, false});
  s.buffer_labels = {"all_gather_output", "optimizer/state0", "optimizer/foreach_temp",
                     "any name at all"};
  s.buffers.push_back({BufferName{0, true, 1, 0}, 8, DType::bf16, BufferCategory::all_gather_output,
                       0, Location::gpu, false});
  s.buffers.push_back({BufferName{1}, 8, DType::fp32, BufferCategory::optimizer_states, kNone,
                       Location::gpu, false});
  s.buffers.push_back({BufferName{2, false, 2}, 8, DType::fp32, BufferCategory::workspace, kNone,
                       Location::gpu, false});
  s.buffers.push_back(
      {BufferName{3, false}, 8, DType::fp32, BufferCategory::workspace, 0, Location::gpu, false});
  EXPECT_EQ(buffer_name(s, 0), "layers.3/all_gather_output@i1m0");
  EXPECT_EQ(buffer_name(s, 1), "optimizer/state0");
  EXPECT_EQ(buffer_name(s, 2), "optimizer/foreach_temp@i2");
  EXPECT_EQ(buffer_name(s, 3), "any name at all");  // read back from JSON: kept whole
  // Written out and read back, every name reads the same (kept whole on the way in).
  const Schedule back = schedule_from_json(schedule_to_json(s), "test");
  for (BufferId b = 0; b < 4; ++b) EXPECT_EQ(buffer_name(back, b), buffer_name(s, b));
}

TEST(ScheduleIo, RejectsOtherSchemasAndListsMalformedFields) {
  EXPECT_THROW(schedule_from_json(R"({"schema": "other/1"})"), ValidationError);
  EXPECT_THROW(schedule_from_json("{not json"), ValidationError);
  try {
    schedule_from_json(
        R"({"schema": "shardscope.schedule/3", "name": "x", "world_size": 0, "iterations": 1,
      "tokens_per_iteration": 0, "streams": [], "communicators": [], "groups": [], "buffers": [],
      "kernel_sets": [[{"kind": "warp", "label": "x", "repeat": 1},
                       {"kind": "gemm", "label": "y", "repeat": 0, "m": 1, "n": 2, "k": -3, "batch": 1,
                        "transpose_a": false, "transpose_b": "yes", "input": "bf16", "output": "int4"}]],
      "ops": [{"id": 3, "kind": "teleport", "stream": 0, "group": -1, "phase": "forward", "iteration": 0,
               "microbatch": 0, "comm": -1, "bytes": 0, "flops": 0, "deps": [], "allocs": [], "frees": [], "uses": [],
               "input": {"buffer": 0, "count": 0, "dtype": "int8", "offset": 0}}]})");
    FAIL();
  } catch (const ValidationError& e) {
    std::vector<std::string> keys;
    for (const auto& p : e.problems()) keys.push_back(p.key);
    EXPECT_EQ(keys, (std::vector<std::string>{
                        "world_size", "kernel_sets[0][0].kind", "kernel_sets[0][1].repeat",
                        "kernel_sets[0][1].k", "kernel_sets[0][1].transpose_b",
                        "kernel_sets[0][1].output", "ops[0].id", "ops[0].kind",
                        "ops[0].input.count", "ops[0].input.dtype"}));
  }
}

// A memory kernel's kind sets its rate (an upcast's is lower): written always, read as element-wise
// where an IR file written before upcasts were told apart has none, refused by key when unknown.
TEST(ScheduleIo, AMemoryKernelsKindIsOptionalAndRoundTrips) {
  const auto with_kernel = [](const std::string& extra) {
    return fmt::format(
        R"({{"schema": "shardscope.schedule/3", "name": "x", "world_size": 1, "iterations": 1,
      "tokens_per_iteration": 0, "streams": [], "communicators": [], "groups": [], "buffers": [],
      "kernel_sets": [[{{"kind": "memory", "label": "m", "repeat": 1, "bytes": 6, "flops": 0{}}}]],
      "ops": []}})",
        extra);
  };
  const auto kind_of = [](const Schedule& s) {
    return std::get<MemoryBound>(s.kernel_sets.at(0).at(0).shape).kind;
  };
  EXPECT_EQ(kind_of(schedule_from_json(with_kernel(""))), MemoryKind::elementwise);
  const Schedule upcast = schedule_from_json(with_kernel(R"(, "memory_kind": "upcast")"));
  EXPECT_EQ(kind_of(upcast), MemoryKind::upcast);
  EXPECT_EQ(kind_of(schedule_from_json(schedule_to_json(upcast))), MemoryKind::upcast);
  try {
    schedule_from_json(with_kernel(R"(, "memory_kind": "transpose")"), "k.json");
    FAIL();
  } catch (const ValidationError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_EQ(e.problems()[0].key, "kernel_sets[0][0].memory_kind");
    EXPECT_EQ(e.problems()[0].allowed, "elementwise, upcast");
  }
}

TEST(ScheduleIo, AnOlderIrGetsAClearError) {
  for (const auto& [schema, why] :
       {std::pair{"shardscope.schedule/1", "compute ops carry no kernels"},
        std::pair{"shardscope.schedule/2", "do not name the buffers and dtype"}}) {
    try {
      schedule_from_json(fmt::format(R"({{"schema": "{}", "name": "x"}})", schema), "old.json");
      FAIL() << schema;
    } catch (const ValidationError& e) {
      ASSERT_EQ(e.problems().size(), 1u);
      EXPECT_EQ(e.problems()[0].file, "old.json");
      EXPECT_NE(e.problems()[0].message.find("older IR format"), std::string::npos);
      EXPECT_NE(e.problems()[0].message.find(why), std::string::npos) << e.problems()[0].message;
      EXPECT_EQ(e.problems()[0].allowed, "shardscope.schedule/3");
    }
  }
}

TEST(ScheduleIo, AtomicWriteLeavesNothingHalfWritten) {
  EXPECT_THROW(write_text_file_atomic("/nonexistent-dir/out.json", "{}"), Error);
}

}  // namespace
}  // namespace shardscope
