// The GPT-NeoX / MPT / GPT-2 block recipes (docs/semantics.md, "Block recipes"): a parallel
// residual saves one residual tensor fewer, ALiBi runs no rotary kernel, Hugging Face's gelu_new
// saves its elementwise intermediates (in fp32 under autocast, whose fp32 list has pow), and an
// RMSNorm written as ops keeps and moves more than the fused kernel.
#include <gtest/gtest.h>

#include <string>

#include "lowering_test_util.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {
namespace {

using testing::first_op;

// A GPT-style 2-layer model, 8 GPUs, 2 × 1024 tokens per micro-batch, no checkpointing.
Scenario gpt(const std::vector<std::string>& overrides) {
  return scenario_from_text(
      "model: {family: transformer, hidden: 1024, layers: 2, heads: 16, ffn_hidden: 4096, "
      "vocab: 50304, max_seq: 2048, mlp: gelu, norm: layernorm, pos_emb: learned, bias: true}\n"
      "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
      "training: {seq_len: 1024, micro_batch: 2, iterations: 1, activation_checkpointing: none}\n"
      "fsdp: {mixed_precision: {param_dtype: bf16}}\n",
      overrides);
}

constexpr std::int64_t kTokens = 2048, kSeq = 1024, kH = 1024, kF = 4096;

TEST(BlockRecipes, AParallelResidualSavesOneResidualTensorFewer) {
  const Scenario base = gpt({});
  const Scenario parallel = gpt({"model.parallel_residual=true"});
  const Bytes e = 2;  // bf16
  EXPECT_EQ(block_activation_bytes(base.model.transformer, kTokens, kSeq, e) -
                block_activation_bytes(parallel.model.transformer, kTokens, kSeq, e),
            kTokens * kH * e);
  // Under autocast the residual stream is fp32: the tensor saved fewer is fp32.
  EXPECT_EQ(block_activation_bytes(base.model.transformer, kTokens, kSeq, e, 4) -
                block_activation_bytes(parallel.model.transformer, kTokens, kSeq, e, 4),
            kTokens * kH * 4);
  // The same FLOPs: the two sublayers are only read from the same input.
  const Schedule sb = lower(base), sp = lower(parallel);
  EXPECT_EQ(first_op(sb, OpKind::forward, "block").flops,
            first_op(sp, OpKind::forward, "block").flops);
}

TEST(BlockRecipes, AlibiRunsNoRotaryKernel) {
  const Scenario rope = gpt({"model.pos_emb=rope"});
  const Scenario alibi = gpt({"model.pos_emb=alibi"});
  const Scenario learned = gpt({});
  // RoPE reads and writes q and k once in forward: 2·(h + kv) elements per token.
  const Schedule sr = lower(rope), sa = lower(alibi), sl = lower(learned);
  const Op &r = first_op(sr, OpKind::forward, "block"), &a = first_op(sa, OpKind::forward, "block"),
           &l = first_op(sl, OpKind::forward, "block");
  EXPECT_EQ(r.bytes - a.bytes, kTokens * 2 * (kH + kH) * 2);
  EXPECT_EQ(a.bytes, l.bytes);
  // No position parameters: the learned table's max_seq × h are gone.
  EXPECT_EQ(learned.model.total_params() - alibi.model.total_params(), 2048 * kH);
  EXPECT_EQ(rope.model.total_params(), alibi.model.total_params());
}

TEST(BlockRecipes, GeluNewSavesItsElementwiseIntermediates) {
  const TransformerConfig fused = gpt({}).model.transformer;
  const TransformerConfig gelu_new = gpt({"model.mlp=gelu_new"}).model.transformer;
  // bf16 compute: pow's input (fc's output), tanh's output, 0.5·x, 1 + tanh and their product
  // (the second fc's input): 5 ffn-sized tensors instead of GELU's input and output.
  EXPECT_EQ(block_activation_bytes(gelu_new, kTokens, kSeq, 2) -
                block_activation_bytes(fused, kTokens, kSeq, 2),
            kTokens * kF * 2 * (5 - 2));
  // Autocast bf16 over fp32 weights: pow casts x to fp32 and saves it, tanh's output and
  // 1 + tanh are fp32, 0.5·x stays bf16, and the second fc saves its cast bf16 input:
  // 4 + 4 + 2 + 4 + 2 = 16 bytes per ffn element against GELU's 2 + 2.
  EXPECT_EQ(block_activation_bytes(gelu_new, kTokens, kSeq, 2, 4) -
                block_activation_bytes(fused, kTokens, kSeq, 2, 4),
            kTokens * kF * (16 - 4));
  // Forward traffic: eight kernels, 18 accesses per element, instead of GELU's 2.
  const Schedule sa = lower(gpt({"model.mlp=gelu_new"})), sb = lower(gpt({}));
  const Op& a = first_op(sa, OpKind::forward, "block");
  const Op& b = first_op(sb, OpKind::forward, "block");
  EXPECT_EQ(a.bytes - b.bytes, kTokens * kF * 2 * (18 - 2));
  EXPECT_EQ(a.flops, b.flops);
}

TEST(BlockRecipes, TheFusedRmsNormKeepsAndMovesLessThanTheOtherNorms) {
  const auto config = [](const char* norm) {
    return gpt({std::string("model.norm=") + norm}).model.transformer;
  };
  const TransformerConfig fused = config("rmsnorm"), ops = config("unfused_rmsnorm");
  // Written as ops, each of the two norms keeps an fp32 copy of its bf16 input and the bf16
  // normalised tensor, where the fused kernel keeps the bf16 input: 4 bytes an element more. Under
  // autocast the fp32 input is kept either way, and the ops add the fp32 normalised tensor.
  for (const Bytes cast_from : {Bytes{0}, Bytes{4}}) {
    SCOPED_TRACE(cast_from);
    EXPECT_EQ(block_activation_bytes(ops, kTokens, kSeq, 2, cast_from) -
                  block_activation_bytes(fused, kTokens, kSeq, 2, cast_from),
              2 * kTokens * kH * 4);
  }
  // Forward traffic: the fused RMSNorm reads its input and writes its output (2 + 2 bytes an
  // element in bf16); every other norm is counted with two fp32 accesses more (docs/validation.md,
  // "Norms"). Nothing else in the block depends on the norm.
  const auto forward_bytes = [](const char* norm) {
    return first_op(lower(gpt({std::string("model.norm=") + norm})), OpKind::forward, "block")
        .bytes;
  };
  const Bytes fused_bytes = forward_bytes("rmsnorm");
  for (const char* norm : {"unfused_rmsnorm", "layernorm", "low_precision_layernorm"}) {
    SCOPED_TRACE(norm);
    EXPECT_EQ(forward_bytes(norm) - fused_bytes, 2 * kTokens * kH * 2 * 4);
  }
}

TEST(BlockRecipes, KeysSayWhatIsAllowed) {
  EXPECT_THROW((void)gpt({"model.mlp=relu"}), ValidationError);
  EXPECT_THROW((void)gpt({"model.pos_emb=sinusoidal"}), ValidationError);
  const Scenario s = gpt({"model.norm_bias=false"});
  EXPECT_EQ(gpt({}).model.total_params() - s.model.total_params(), (2 * 2 + 1) * kH);
}

}  // namespace
}  // namespace shardscope
