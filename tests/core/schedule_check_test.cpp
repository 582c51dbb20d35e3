#include "shardscope/core/schedule_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "shardscope/core/schedule_io.hpp"

namespace shardscope {
namespace {

Schedule golden() {
  return schedule_from_json(
      read_text_file(std::string(SHARDSCOPE_TEST_DATA_DIR) + "/schedule_small.json"));
}

bool mentions(const std::vector<Problem>& problems, std::string_view fragment) {
  return std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
    return p.to_string().find(fragment) != std::string::npos;
  });
}

TEST(ScheduleCheck, GoldenScheduleIsValid) {
  EXPECT_TRUE(check_schedule(golden()).empty());
}

TEST(ScheduleCheck, MissingAndLaterDependencies) {
  auto s = golden();
  s.ops[2].deps = {42};
  s.ops[3].deps = {5};
  const auto p = check_schedule(s);
  EXPECT_TRUE(mentions(p, "op 42 does not exist"));
  EXPECT_TRUE(mentions(p, "waits on op 5, which is issued after it"));
}

TEST(ScheduleCheck, FindsACycleThroughStreamOrder) {
  // op 2 (compute) waits on op 4, and op 4 follows op 2 on the compute stream.
  auto s = golden();
  s.ops[2].deps = {4};
  EXPECT_TRUE(mentions(check_schedule(s), "dependency cycle"));
}

TEST(ScheduleCheck, BufferLifetimeViolations) {
  auto s = golden();
  s.ops[5].uses.push_back(3);         // unsharded params used after reshard freed them
  s.ops[6].frees.push_back(3);        // and freed a second time
  s.buffers[1].live_at_start = true;  // all-gather input allocated although live at start
  s.buffer_labels.push_back("orphan");
  s.buffers.push_back({BufferName{static_cast<std::int32_t>(s.buffer_labels.size() - 1)}, 8,
                       DType::fp32, BufferCategory::workspace, kNone, Location::gpu, false});
  s.ops[0].uses.push_back(2);  // all-gather output used before it exists
  const auto p = check_schedule(s);
  EXPECT_TRUE(mentions(p, "after op 4 freed it"));
  EXPECT_TRUE(mentions(p, "is freed 2 times"));
  EXPECT_TRUE(mentions(p, "is live at start and allocated again"));
  EXPECT_TRUE(mentions(p, "(orphan): is never allocated"));
  EXPECT_TRUE(mentions(p, "before it is allocated"));
}

TEST(ScheduleCheck, KernelsMustExistSuitTheOpAndAddUpToItsWork) {
  auto s = golden();
  s.ops[3].flops += 1e6;  // a forward whose FLOPs its kernels do not account for
  s.ops[5].kernels = 7;   // no such set
  s.ops[4].kernels = 0;   // a reshard runs no kernels
  const auto p = check_schedule(s);
  EXPECT_TRUE(mentions(p,
                       "ops[3]: carries 53433568 FLOPs (4096 in attention) and 1536 B, but its "
                       "kernels (set 0) add up to 52433568 FLOPs"));
  EXPECT_TRUE(mentions(p, "ops[5].kernels: kernel set 7 does not exist"));
  EXPECT_TRUE(mentions(p, "ops[4].kernels: reshard runs no kernels"));
}

TEST(ScheduleCheck, CollectivesNeedCommunicatorsAndIdsMustExist) {
  auto s = golden();
  s.ops[1].comm = kNone;
  s.ops[3].comm = 0;
  s.ops[4].stream = 9;
  s.ops[6].stream = 1;  // cpu_wait off the CPU lane
  const auto p = check_schedule(s);
  EXPECT_TRUE(mentions(p, "all_gather needs a communicator"));
  EXPECT_TRUE(mentions(p, "forward is not a collective"));
  EXPECT_TRUE(mentions(p, "stream 9 does not exist"));
  EXPECT_TRUE(mentions(p, "cpu_wait runs on the CPU lane"));
}

TEST(ScheduleCheck, LifetimesFollowAllocAndFreeOps) {
  const auto life = buffer_lifetimes(golden());
  EXPECT_EQ(life[0].alloc, kNone);
  EXPECT_EQ(life[1].alloc, 0);
  EXPECT_EQ(life[1].free, 1);
  EXPECT_EQ(life[3].alloc, 2);
  EXPECT_EQ(life[3].free, 4);
}

}  // namespace
}  // namespace shardscope
