// Orderings the FSDP documentation promises, and the published TorchTitan runs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim/sim_test_util.hpp"

namespace shardscope {
namespace {

using testing::gib;
using testing::run_text;

// Llama 3.1 8B on 2 nodes with short sequences: communication matters.
const std::string kCommBound = R"(
model: {preset: llama3.1-8b}
cluster: {preset: h100-sxm-80gb, nodes: 2, gpus_per_node: 8}
training: {seq_len: 2048, micro_batch: 1, iterations: 2}
fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}
)";

TEST(Orderings, Fsdp1BackwardPrefetchTradesMemoryForTime) {
  const auto pre = run_text(kCommBound, {"fsdp.api=fsdp1", "fsdp.backward_prefetch=BACKWARD_PRE"});
  const auto post =
      run_text(kCommBound, {"fsdp.api=fsdp1", "fsdp.backward_prefetch=BACKWARD_POST"});
  const auto none = run_text(kCommBound, {"fsdp.api=fsdp1", "fsdp.backward_prefetch=none"});
  // PRE and POST queue the same collectives in the same order on the communicator while the CPU
  // runs ahead, so they tie up to rounding; PRE never loses.
  EXPECT_LE(pre.summary.step_time, post.summary.step_time + kNsPerUs);
  EXPECT_LT(post.summary.step_time, none.summary.step_time);
  EXPECT_GE(pre.summary.peak_allocated, post.summary.peak_allocated);
  EXPECT_GE(post.summary.peak_allocated, none.summary.peak_allocated);
  EXPECT_GT(none.summary.comm_exposed, pre.summary.comm_exposed);
}

TEST(Orderings, KeepingParametersAfterForwardCostsMemoryNotTime) {
  const auto reshard = run_text(kCommBound, {"fsdp.reshard_after_forward=true"});
  const auto keep = run_text(kCommBound, {"fsdp.reshard_after_forward=false"});
  EXPECT_GT(keep.summary.peak_allocated, reshard.summary.peak_allocated);
  EXPECT_LE(keep.summary.step_time, reshard.summary.step_time);
  EXPECT_EQ(keep.summary.collectives.at("all_gather"), 33);  // forward only
  EXPECT_EQ(reshard.summary.collectives.at("all_gather"), 65);
}

TEST(Orderings, CpuOffloadCutsShardedParameterGradientAndOptimizerBytes) {
  const std::string base = R"(
model: {preset: llama2-7b}
cluster: {preset: a100-sxm-80gb}
training: {seq_len: 2048, micro_batch: 1, iterations: 2, activation_checkpointing: full}
fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}
)";
  const auto gpu = run_text(base);
  const auto off = run_text(base, {"fsdp.cpu_offload.params=true"});
  std::int64_t shard = 0;
  for (const auto& g : gpu.schedule.groups) shard += g.sharded_numel;
  const Bytes params = shard * 4, states = 2 * shard * 4, grads = shard * 4;
  const Bytes saved = gpu.summary.peak_allocated.value() - off.summary.peak_allocated.value();
  // At the peak (start of backward) the gradients are not yet reduced: parameters and states
  // leave the GPU; over the step, gradients too.
  EXPECT_GE(saved, params + states - 64 * kMiB);
  EXPECT_LE(saved, params + states + grads);
  EXPECT_GT(off.summary.step_time, gpu.summary.step_time);  // PCIe copies and a CPU AdamW
}

// ../shared/reference/published_runs.csv (copied to tests/data): TorchTitan Llama 3.1 8B runs on
// H100 with 96 GB HBM capped at 500 W.
TEST(PublishedRuns, TorchTitanLlama8BWithinTenPercent) {
  std::ifstream in(std::string(SHARDSCOPE_TEST_DATA_DIR) + "/published_runs.csv");
  ASSERT_TRUE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("case,", 0) == 0) continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    ASSERT_EQ(f.size(), 9u) << line;
    const int gpus = std::stoi(f[2]), nodes = std::stoi(f[3]);
    const auto r = testing::run_text(
        "model: {preset: " + f[1] +
        "}\n"
        "cluster: {preset: h100-sxm-80gb, nodes: " +
        std::to_string(nodes) + ", gpus_per_node: " + std::to_string(gpus / nodes) +
        // The runs' H100s have 96 GB of HBM2e at about 2.4 TB/s (the CSV's header).
        ", gpu: {memory: 96GB, hbm_bandwidth: 2.4TB/s, power_cap_w: 500}}\n"
        "training: {seq_len: " +
        f[5] + ", micro_batch: " + f[4] + ", activation_checkpointing: " + f[6] +
        ", iterations: 2}\n"
        "fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}, "
        "reshard_last_after_forward: false}\n"  // torchtitan keeps the last block unsharded
        // torchtitan's launch script has run with expandable segments since 2024-10-22
        // (pytorch/torchtitan#643), before these December 2024 runs.
        "allocator: {expandable_segments: true}\n");
    const double tps = std::stod(f[7]), mem = std::stod(f[8]);
    EXPECT_NEAR(r.summary.tokens_per_s_per_gpu.value() / tps, 1.0, 0.10)
        << f[0] << ": " << *r.summary.tokens_per_s_per_gpu << " tokens/s";
    EXPECT_NEAR(gib(r.summary.peak_reserved.value()) / mem, 1.0, 0.10)
        << f[0] << ": " << gib(*r.summary.peak_reserved) << " GiB";
    ++cases;
  }
  EXPECT_EQ(cases, 2);
}

}  // namespace
}  // namespace shardscope
