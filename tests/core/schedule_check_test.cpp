#include "shardscope/core/schedule_check.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
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
  s.ops[0].uses.push_back(2);              // all-gather output used before it exists
  s.buffers[0].location = Location::host;  // a host buffer cannot come from the NCCL pool
  s.buffers[0].pool = MemoryPool::process_group;
  const auto p = check_schedule(s);
  EXPECT_TRUE(mentions(p, "is in the process group's pool but not on the GPU"));
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

TEST(ScheduleCheck, OpsComeInTheOrderOfTheirIterations) {
  // The CPU issues one iteration after another: last_iteration and first_op_of rely on it.
  auto s = golden();
  s.iterations = 2;
  for (std::size_t i = 3; i < s.ops.size(); ++i) s.ops[i].iteration = 1;
  EXPECT_TRUE(check_schedule(s).empty());
  EXPECT_EQ(last_iteration(s), 1);
  EXPECT_EQ(first_op_of(s, 1), 3u);
  EXPECT_EQ(first_op_of(s, 2), s.ops.size());
  s.ops[4].iteration = 0;
  EXPECT_TRUE(mentions(check_schedule(s),
                       "ops[4].iteration: iteration 0 is issued after an op of "
                       "iteration 1"));
  s.ops[4].iteration = 2;
  EXPECT_TRUE(mentions(check_schedule(s), "iteration 2 is not one of the schedule's 2"));
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

TEST(ScheduleCheck, ACollectiveNamesLiveBuffersOfItsSizeAndDtype) {
  {  // unnamed: the backends would have to guess
    auto s = golden();
    s.ops[1].input = {};
    EXPECT_TRUE(
        mentions(check_schedule(s), "ops[1].input: all_gather must name the buffer it reads"));
  }
  {  // the output read as another dtype, and a collective that would cast
    auto s = golden();
    s.ops[1].output.dtype = DType::fp32;
    const auto p = check_schedule(s);
    EXPECT_TRUE(mentions(p, "reads layers.0.all_gather_output as fp32, but it holds bf16"));
    EXPECT_TRUE(mentions(p, "a collective does not cast"));
  }
  {  // sizes that disagree with the communicator (2 ranks) and with the op's bytes
    auto s = golden();
    s.ops[1].input.count = 500;
    EXPECT_TRUE(mentions(check_schedule(s), "all_gather over 2 ranks: 500 elements in, 2000 out"));
    s = golden();
    s.ops[1].bytes = 8000;
    EXPECT_TRUE(mentions(check_schedule(s), "carries 8000 B, but its output is 4000 B"));
  }
  {  // out of the buffer, through an offset or the rank's chunk
    auto s = golden();
    s.ops[1].input.offset = 2;
    EXPECT_TRUE(mentions(check_schedule(s), "1000 elements from byte 2 do not fit"));
    s = golden();
    s.ops[1].input.rank_chunk = true;  // 2 chunks of 1000 bf16 in a 2000-byte buffer
    EXPECT_TRUE(mentions(check_schedule(s), "1000 elements per rank × 2 from byte 0 do not fit"));
  }
  {  // a buffer the op does not list, and one not live then (the unsharded parameters come later)
    auto s = golden();
    s.ops[1].output.buffer = 3;
    const auto p = check_schedule(s);
    EXPECT_TRUE(mentions(p, "names layers.0.unsharded_params, which the op neither allocates"));
    EXPECT_TRUE(mentions(p, "names layers.0.unsharded_params, which is not live at this op"));
  }
  {  // only data-moving ops name regions; copies element for element
    auto s = golden();
    s.ops[3].input = s.ops[2].output;
    s.ops[0].output.count = 999;
    const auto p = check_schedule(s);
    EXPECT_TRUE(mentions(p, "ops[3]: forward moves no data"));
    EXPECT_TRUE(mentions(p, "ops[0]: copies 1000 elements into 999"));
  }
}

TEST(ScheduleCheck, EveryLoweredCollectiveNamesItsBuffers) {
  // FSDP2 gathers in place (the input is the rank's chunk of the output), FSDP1 from its own
  // shard; HSDP all-reduces in place. check_schedule holds the sizes; here the placement.
  for (const char* fsdp : {"{api: fsdp2, mesh: {replicate: 2, shard: 4}}",
                           "{api: fsdp1, sharding_strategy: HYBRID_SHARD}"}) {
    SCOPED_TRACE(fsdp);
    const bool fsdp2 = std::string_view(fsdp).find("fsdp2") != std::string_view::npos;
    const Schedule s = lower(scenario_from_text(
        fmt::format("model: {{preset: tiny, layers: 2}}\ncluster: {{nodes: 2, gpus_per_node: 4}}\n"
                    "training: {{seq_len: 64}}\nfsdp: {}\n",
                    fsdp)));
    EXPECT_TRUE(check_schedule(s).empty());
    int gathers = 0, all_reduces = 0;
    for (const Op& op : s.ops) {
      if (!is_collective(op.kind)) continue;
      ASSERT_TRUE(op.input.named() && op.output.named()) << to_string(op.kind);
      if (op.kind == OpKind::all_gather && op.phase != Phase::checkpoint) {
        ++gathers;
        EXPECT_EQ(op.input.buffer == op.output.buffer, fsdp2);
        EXPECT_EQ(op.input.rank_chunk, fsdp2);
      }
      if (op.kind == OpKind::all_reduce) {
        ++all_reduces;
        EXPECT_EQ(op.input, op.output);
      }
    }
    EXPECT_GT(gathers, 0);
    EXPECT_GT(all_reduces, 0);
  }
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
