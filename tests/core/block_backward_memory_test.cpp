// What a block's backward holds beyond its saved tensors (block_backward_workspace,
// docs/semantics.md "A block's backward"): its largest moment, closed-form per MLP and attention
// kind, with the saved tensors autograd has released by then taken off.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lowering_test_util.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {
// Named, not anonymous: unity builds (CI) put several test files in one translation unit.
namespace block_backward_memory_test {

constexpr std::int64_t kTokens = 2048, kSeq = 1024, kH = 1024, kF = 4096;

Scenario model(const std::string& transformer) {
  return scenario_from_text(
      "model: {family: transformer, hidden: 1024, layers: 2, heads: 16, "
      "ffn_hidden: 4096, vocab: 50304, max_seq: 2048, " +
          transformer +
          "}\n"
          "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
          "training: {seq_len: 1024, micro_batch: 2, iterations: 1}\n",
      {});
}

std::vector<Bytes> sorted(const WorkspaceSizes& sizes) {
  std::vector<Bytes> out(sizes.begin(), sizes.end());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(BlockBackwardMemory, GeluPeaksAtTheOutputProjectionsInputGradient) {
  const auto& c =
      model("mlp: gelu, norm: layernorm, pos_emb: learned, bias: true").model.transformer;
  const Bytes e = 2;
  // fc2's backward: the incoming gradient and fc2's input gradient (GELU's backward after it
  // holds two ffn-sized gradients but has released fc2's saved input: no more).
  EXPECT_EQ(sorted(block_backward_workspace(c, kTokens, kSeq, e)),
            (std::vector<Bytes>{kTokens * kH * e, kTokens * kF * e}));
  // Under autocast over fp32 weights the residual gradient is fp32 and fc2 reads its bf16 cast.
  EXPECT_EQ(sorted(block_backward_workspace(c, kTokens, kSeq, e, 4)),
            (std::vector<Bytes>{kTokens * kH * e, kTokens * kH * 4, kTokens * kF * e}));
}

TEST(BlockBackwardMemory, SwigluPeaksAtTheProductsBackward) {
  const auto& c = model("mlp: swiglu").model.transformer;
  const Bytes e = 2;
  // silu's and w3's output gradients beside the product's (three ffn-sized), w2's saved input
  // (the product, ffn-sized) released: two ffn-sized tensors and the residual gradient.
  EXPECT_EQ(sorted(block_backward_workspace(c, kTokens, kSeq, e)),
            (std::vector<Bytes>{kTokens * kH * e, kTokens * kF * e, kTokens * kF * e}));
}

TEST(BlockBackwardMemory, MathAttentionPeaksAtTheScoresGradients) {
  const auto& c = model(
                      "mlp: gelu, norm: layernorm, pos_emb: learned, bias: true, "
                      "attention: math")
                      .model.transformer;
  const Bytes e = 2;
  // The probabilities' and the scores' gradients, fp32 [b, heads, s, s] each, with two residual
  // gradients, less the MLP's saved fc output and GELU output (released by then).
  const Bytes scores = kTokens * 16 * kSeq * 4;
  const Bytes expected = 2 * scores + 2 * kTokens * kH * e - 2 * kTokens * kF * e;
  const WorkspaceSizes w = block_backward_workspace(c, kTokens, kSeq, e);
  Bytes sum = 0;
  for (Bytes b : w) sum += b;
  EXPECT_EQ(sum, expected);
  // One score gradient shrunk by what was released; the other and the residual gradients whole.
  EXPECT_EQ(sorted(w), (std::vector<Bytes>{kTokens * kH * e, kTokens * kH * e,
                                           scores - 2 * kTokens * kF * e, scores}));
}

}  // namespace block_backward_memory_test
}  // namespace shardscope
