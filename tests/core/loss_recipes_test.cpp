// Loss recipes (training.loss): the chunk size, what the head and loss keep and allocate per
// recipe in closed form (docs/semantics.md, "Loss recipes"), their kernels' FLOPs and traffic, and
// what they do to a simulated step's memory and time.
#include <gtest/gtest.h>

#include "lowering_test_util.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/kernel.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::first_op;

// Llama 3.1 8B, 2 layers, bf16 compute, 8 GPUs, 2 × 2048 tokens per micro-batch.
Scenario llama(const std::string& loss, const std::string& extra = "") {
  return scenario_from_text(
      "model: {preset: llama3.1-8b, layers: 2}\n"
      "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
      "training: {seq_len: 2048, micro_batch: 2, iterations: 1, loss: " +
          loss + extra +
          "}\n"
          "fsdp: {api: fsdp2, mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n",
      {});
}

TEST(LossRecipes, ChunksFollowLigersDefaultUnlessGiven) {
  TransformerConfig c;
  c.hidden = 4096;
  c.vocab = 32000;
  TrainingSpec t;
  t.seq_len = 4096;
  t.micro_batch = 4;
  // Liger's own example: BT = 16,384, V = 32,000, H = 4,096 → ⌈V/H⌉ = 8 → 2,048 tokens.
  EXPECT_EQ(loss_chunk_tokens(c, t), 2048);
  c.vocab = 128256;  // Llama 3: ⌈128,256 / 4,096⌉ = 32 → 512
  EXPECT_EQ(loss_chunk_tokens(c, t), 512);
  t.micro_batch = 3;  // 12,288 / 32 = 384 → the next power of two
  EXPECT_EQ(loss_chunk_tokens(c, t), 512);
  t.loss_chunk_tokens = 1000;
  EXPECT_EQ(loss_chunk_tokens(c, t), 1000);
  t.loss_chunk_tokens = 1 << 20;  // never more than the micro-batch
  EXPECT_EQ(loss_chunk_tokens(c, t), 12288);
}

TEST(LossRecipes, SavedAndTransientBytesInClosedForm) {
  const Scenario up = llama("upcast_fp32");
  const TransformerConfig& c = up.model.transformer;
  const std::int64_t t = 4096, v = c.vocab, e = 2, norm = 2 * t * c.hidden * e;
  TrainingSpec training = up.training;

  LossMemory m = loss_memory(c, training, DType::bf16);
  EXPECT_EQ(m.saved, t * v * 4 + norm);
  EXPECT_EQ(m.forward_workspace, (WorkspaceSizes{t * v * e, t * v * 4}));
  EXPECT_EQ(m.backward_workspace, (WorkspaceSizes{t * v * 4, t * v * 4, t * v * e}));

  training.loss = LossRecipe::fused;
  m = loss_memory(c, training, DType::bf16);
  EXPECT_EQ(m.saved, t * v * e + t * 4 + norm);
  EXPECT_TRUE(m.forward_workspace.empty());
  EXPECT_TRUE(m.backward_workspace.empty());

  training.loss = LossRecipe::chunked;
  const std::int64_t chunk = 128;  // 4,096 / ⌈128,256 / 4,096⌉ = 128
  ASSERT_EQ(loss_chunk_tokens(c, training), chunk);
  m = loss_memory(c, training, DType::bf16);
  EXPECT_EQ(m.saved, t * 4 + norm);
  EXPECT_EQ(m.forward_workspace, (WorkspaceSizes{chunk * v * e, chunk * v * 4, chunk * v * 4}));
  EXPECT_EQ(m.backward_workspace,
            (WorkspaceSizes{chunk * v * (e + 8), chunk * v * 4, chunk * v * 4, chunk * v * e}));
}

TEST(LossRecipes, KernelsCountTheRecomputedHeadAndTheTraffic) {
  const double t = 4096;
  for (const char* loss : {"upcast_fp32", "fused", "chunked"}) {
    SCOPED_TRACE(loss);
    const Scenario sc = llama(loss);
    const Schedule s = lower(sc);
    EXPECT_TRUE(check_schedule(s).empty());  // op sums equal their kernels'
    const double h = static_cast<double>(sc.model.transformer.hidden);
    const double v = static_cast<double>(sc.model.transformer.vocab);
    const bool chunked = sc.training.loss == LossRecipe::chunked;
    const Op& fwd = first_op(s, OpKind::forward, "head+loss");
    const Op& bwd = first_op(s, OpKind::backward, "head+loss");
    // Forward: the projection and 5 FLOPs per logit; backward: its two gradient GEMMs and 3 per
    // logit, plus (chunked) the projection and the forward's 5 again.
    EXPECT_DOUBLE_EQ(fwd.flops, 2 * t * h * v + 5 * t * v);
    EXPECT_DOUBLE_EQ(bwd.flops, (chunked ? 6 : 4) * t * h * v + (chunked ? 8 : 3) * t * v);
    const double e = 2;
    const double forward_bytes = sc.training.loss == LossRecipe::fused ? e : e + 12;
    const double backward_bytes = sc.training.loss == LossRecipe::fused ? 2 * e
                                  : chunked                             ? 2 * e + 28
                                                                        : e + 16;
    EXPECT_DOUBLE_EQ(static_cast<double>(fwd.bytes), t * v * forward_bytes);
    EXPECT_DOUBLE_EQ(static_cast<double>(bwd.bytes), t * v * backward_bytes);
    if (chunked) {  // 32 chunks of 128 tokens: one GEMM shape repeated
      const auto k = op_kernels(s, fwd);
      ASSERT_EQ(std::get<Gemm>(k[0].shape).m, 128);
      EXPECT_EQ(k[0].repeat, 32);
    }
  }
}

TEST(LossRecipes, AShortLastChunkIsItsOwnKernel) {
  const Scenario sc = llama("chunked", ", loss_chunk_tokens: 1000");
  const Schedule s = lower(sc);
  const auto k = op_kernels(s, first_op(s, OpKind::forward, "head+loss"));
  ASSERT_GE(k.size(), 3U);
  EXPECT_EQ(std::get<Gemm>(k[0].shape).m, 1000);
  EXPECT_EQ(k[0].repeat, 4);
  EXPECT_EQ(std::get<Gemm>(k[1].shape).m, 96);  // 4,096 − 4 × 1,000
  EXPECT_EQ(k[1].label, "output.last_chunk");
}

TEST(LossRecipes, ChunkTokensNeedAChunkedLoss) {
  EXPECT_THROW(llama("fused", ", loss_chunk_tokens: 512"), ValidationError);
  try {
    llama("softmax");
    FAIL();
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("upcast_fp32, fused, chunked"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardscope
