// model.attention and model.dropout: what a block keeps for backward in closed form
// (docs/semantics.md, "Attention and dropout"), the math path's kernels, and the keys' errors.
#include <gtest/gtest.h>

#include <algorithm>

#include "lowering_test_util.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/kernel.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::first_op;

// Llama 3.1 8B shapes, 2 layers, 2 × 1,024 tokens, bf16.
Scenario llama_with_model_keys(const std::string& model_keys) {
  return scenario_from_text("model: {preset: llama3.1-8b, layers: 2" + model_keys +
                                "}\n"
                                "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
                                "training: {seq_len: 1024, micro_batch: 2, iterations: 1}\n"
                                "fsdp: {mixed_precision: {param_dtype: bf16}}\n",
                            {});
}

TEST(AttentionAndDropout, SavedBytesInClosedForm) {
  TransformerConfig c = llama_with_model_keys("").model.transformer;
  const std::int64_t t = 2048, s = 1024, e = 2, heads = c.heads, h = c.hidden, kv = c.kv_dim();
  const Bytes flash = block_activation_bytes(c, t, s, e);
  c.attention = AttentionKind::math;
  const Bytes math = block_activation_bytes(c, t, s, e);
  // Flash keeps q, k, v (k and v at their own heads), its output and an fp32 log-sum-exp;
  // math computes in fp32 (allow_fp16_bf16_reduction_math_sdp is off) and keeps q scaled, k and
  // v repeated to every head, softmax's [b, heads, s, s] output, and the output cast back
  // (what real PyTorch 2.11 keeps, tests/pytorch/memory_oracle.py's math rows).
  EXPECT_EQ(math - flash, 3 * t * h * 4 + t * heads * s * 4 + t * h * e -
                              (t * e * (2 * h + 2 * kv) + t * 4 * heads));
  c.dropout = 0.1;
  // A bool mask per residual dropout; math also keeps the probabilities' mask and the dropped
  // probabilities.
  EXPECT_EQ(block_activation_bytes(c, t, s, e) - math, 2 * t * h + t * heads * s * (1 + 4));
  c.attention = AttentionKind::flash;
  EXPECT_EQ(block_activation_bytes(c, t, s, e) - flash, 2 * t * h);
  // Selective checkpointing recomputes the dropouts, keeps what the attention keeps.
  EXPECT_EQ(block_saved_bytes(c, t, s, e, ActivationCheckpointing::selective_op),
            block_saved_bytes(llama_with_model_keys("").model.transformer, t, s, e,
                              ActivationCheckpointing::selective_op));
}

TEST(AttentionAndDropout, MathAttentionRunsTwoBatchedGemmsOverTheFullSquare) {
  const Scenario flash_sc = llama_with_model_keys("");
  const Scenario math_sc = llama_with_model_keys(", attention: math");
  const Schedule flash = lower(flash_sc);
  const Schedule math = lower(math_sc);
  EXPECT_TRUE(check_schedule(math).empty());
  const TransformerConfig& c = math_sc.model.transformer;
  const double b = 2, s = 1024, d = static_cast<double>(c.head_dim());
  const double heads = static_cast<double>(c.heads);
  const Op& f = first_op(flash, OpKind::forward, "block");
  const Op& m = first_op(math, OpKind::forward, "block");
  // Flash skips the masked half (2·b·H·s²·d); math computes all of it (4·b·H·s²·d) as GEMMs.
  EXPECT_DOUBLE_EQ(f.attention_flops, 2 * b * heads * s * s * d);
  EXPECT_DOUBLE_EQ(m.attention_flops, 0);
  EXPECT_DOUBLE_EQ(m.flops - (f.flops - f.attention_flops), 4 * b * heads * s * s * d);
  // Mask and softmax: read and write the scores twice.
  EXPECT_EQ(m.bytes - f.bytes, static_cast<Bytes>(b * heads * s * s) * 4 * 2);
  // The forward allocates the scores and the masked scores, in fp32, while it runs.
  Bytes transient = 0;
  for (const BufferId id : m.allocs) {
    const Buffer& buf = math.buffers[static_cast<std::size_t>(id)];
    const bool freed = std::find(m.frees.begin(), m.frees.end(), id) != m.frees.end();
    if (buf.category == BufferCategory::workspace && freed) transient += buf.size;
  }
  EXPECT_EQ(transient, 2 * static_cast<Bytes>(b * heads * s * s) * 4);
}

TEST(AttentionAndDropout, KeysSayWhatIsAllowed) {
  try {
    llama_with_model_keys(", attention: efficient");
    FAIL();
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("not modelled yet"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("allowed: flash, math, cudnn"), std::string::npos);
  }
  EXPECT_THROW(llama_with_model_keys(", dropout: 1.5"), ValidationError);
  // 2 × 32 × (4 Mi tokens)² probabilities: refused before any arithmetic could overflow.
  try {
    scenario_from_text(
        "model: {preset: llama3.1-8b, attention: math}\n"
        "training: {seq_len: 4194304, micro_batch: 2}\n",
        {});
    FAIL();
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("model.attention: math attention would keep"),
              std::string::npos);
  }
  EXPECT_THROW(scenario_from_text("model: {family: custom, attention: math, groups: [{name: root, "
                                  "params: 10}]}\ncluster: {nodes: 1, gpus_per_node: 2}\n",
                                  {}),
               ValidationError);
}

}  // namespace
}  // namespace shardscope
