// Orderings the FSDP documentation promises (the published runs: scripts/published-runs).
#include <gtest/gtest.h>

#include "sim/sim_test_util.hpp"

namespace shardscope {
namespace {

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
  // runs ahead, so they tie but for which compute their collectives overlap, and so slow by the
  // SMs they hold (PRE runs an all-gather beside the previous reduce-scatter more often): within
  // 0.1 %.
  EXPECT_NEAR(static_cast<double>(pre.summary.step_time),
              static_cast<double>(post.summary.step_time),
              0.001 * static_cast<double>(post.summary.step_time));
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

}  // namespace
}  // namespace shardscope
