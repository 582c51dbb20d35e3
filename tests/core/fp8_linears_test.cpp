// training.fp8: transformer_engine (docs/semantics.md, "fp8 linears"): a block's projections are
// TransformerEngine fp8 Linear modules. Their GEMMs read fp8 operands, TE casts each module's
// input and weight (and in backward its output gradient) to fp8 with their transposes instead of
// autocast's weight casts, and each module saves the fp8 transposes of its input and weight.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "lowering_test_util.hpp"
#include "scenario_test_util.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/kernel.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace fp8_linears_test {

using testing::first_op;
using testing::has_problem;
using testing::problems_of;

// Llama 3.1 8B (separate q, k, v projections) or an MPT-style GELU block (one fused qkv), 2
// layers, 8 H100, 2 × 2048 tokens per micro-batch, fp32 parameters under bf16 autocast.
std::string training_text(const std::string& model, const std::string& training,
                          const std::string& cluster = "preset: h100-sxm-80gb") {
  return "model: {" + model + "}\ncluster: {" + cluster +
         ", nodes: 1, gpus_per_node: 8}\n"
         "training: {seq_len: 2048, micro_batch: 2, iterations: 1, autocast: bf16" +
         training + "}\nfsdp: {api: fsdp1, sharding_strategy: FULL_SHARD}\n";
}
const std::string kLlama = "preset: llama3.1-8b, layers: 2";
const std::string kMpt =
    "family: transformer, hidden: 2560, layers: 2, heads: 20, kv_heads: 20, ffn_hidden: 10240, "
    "vocab: 50368, max_seq: 2048, mlp: gelu, norm: low_precision_layernorm, pos_emb: learned, "
    "bias: true, tie_embeddings: true, attention: triton";
constexpr std::int64_t kTokens = 4096;

const Kernel* find_kernel(const Schedule& s, const Op& op, const std::string& label) {
  for (const Kernel& k : s.kernel_sets.at(static_cast<std::size_t>(op.kernels))) {
    if (k.label == label) return &k;
  }
  return nullptr;
}

Bytes memory_bytes(const Schedule& s, const Op& op, const std::string& label) {
  const Kernel* k = find_kernel(s, op, label);
  return k == nullptr ? -1 : std::get<MemoryBound>(k->shape).bytes;
}

TEST(Fp8Linears, ProjectionGemmsReadFp8WhileTheOutputHeadStaysBf16) {
  const Schedule s = lower(scenario_from_text(training_text(kLlama, ", fp8: transformer_engine")));
  EXPECT_TRUE(check_schedule(s).empty());
  const Op& fwd = first_op(s, OpKind::forward, "block");
  const Op& bwd = first_op(s, OpKind::backward, "block");
  for (const auto& [op, label] :
       {std::pair{&fwd, "wq"}, {&fwd, "w2"}, {&bwd, "w1.dgrad"}, {&bwd, "wo.wgrad"}}) {
    const Kernel* k = find_kernel(s, *op, label);
    ASSERT_NE(k, nullptr) << label;
    EXPECT_EQ(std::get<Gemm>(k->shape).input, DType::fp8) << label;
  }
  // Every GEMM writes bf16, the weight gradient too (TE's activation dtype); the autograd engine
  // casts it to the fp32 weights' dtype: 2 bytes read and 4 written per projection parameter.
  EXPECT_EQ(std::get<Gemm>(find_kernel(s, fwd, "wq")->shape).output, DType::bf16);
  EXPECT_EQ(std::get<Gemm>(find_kernel(s, bwd, "wo.wgrad")->shape).output, DType::bf16);
  const TransformerConfig& c = scenario_from_text(training_text(kLlama, "")).model.transformer;
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  EXPECT_EQ(memory_bytes(s, bwd, "weight_grad_casts"),
            (2 * h * h + 2 * h * kv + 3 * h * f) * (2 + 4));
  const Op& head = first_op(s, OpKind::forward, "head");
  const Kernel* output = find_kernel(s, head, "output");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(std::get<Gemm>(output->shape).input, DType::bf16);
  EXPECT_EQ(find_kernel(s, fwd, "autocast.weight_casts"), nullptr);
  EXPECT_EQ(find_kernel(s, bwd, "autocast.grad_casts"), nullptr);
}

// Each module's input (bf16: 2 bytes read, its fp8 copy and transpose written) and weight (fp32:
// 4 read, 2 written); in backward each module's output gradient (2 read, 2 written).
TEST(Fp8Linears, CastTransposesInClosedForm) {
  const Scenario llama = scenario_from_text(training_text(kLlama, ", fp8: transformer_engine"));
  const TransformerConfig& c = llama.model.transformer;
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden, t = kTokens;
  const std::int64_t weights = 2 * h * h + 2 * h * kv + 3 * h * f;
  const Schedule s = lower(llama);
  // Inputs: wq, wk, wv, wo, w1, w3 read h-wide tensors, w2 an f-wide one. Output gradients:
  // h, kv, kv, h, f, f, h wide.
  EXPECT_EQ(memory_bytes(s, first_op(s, OpKind::forward, "block"), "fp8.cast_transpose"),
            t * (6 * h + f) * (2 + 2) + weights * (4 + 2));
  EXPECT_EQ(memory_bytes(s, first_op(s, OpKind::backward, "block"), "fp8.grad_cast_transpose"),
            t * (3 * h + 2 * kv + 2 * f) * (2 + 2));
  // MPT's fused Wqkv is one module: one h-wide input cast, one 3h-wide output gradient.
  const Scenario mpt = scenario_from_text(training_text(kMpt, ", fp8: transformer_engine"));
  const std::int64_t d = mpt.model.transformer.hidden, ff = mpt.model.transformer.ffn_hidden;
  const Schedule m = lower(mpt);
  EXPECT_EQ(memory_bytes(m, first_op(m, OpKind::forward, "block"), "fp8.cast_transpose"),
            t * (3 * d + ff) * (2 + 2) + (4 * d * d + 2 * d * ff) * (4 + 2));
  EXPECT_EQ(memory_bytes(m, first_op(m, OpKind::backward, "block"), "fp8.grad_cast_transpose"),
            t * (3 * d + d + ff + d) * (2 + 2));
}

// An MPT block (low-precision LayerNorm, fused Wqkv, GELU) without fp32 casts: instead of the
// two norm outputs (bf16) the Wqkv and up projections keep their inputs' fp8 transposes, the down
// projection its input's fp8 transpose instead of GELU's bf16 output, and the output projection
// an fp8 copy of the attention's output beside the attention's own: t·(h + f) bytes fewer.
TEST(Fp8Linears, SavedTensorsInClosedForm) {
  const Scenario mpt = scenario_from_text(training_text(kMpt, ", fp8: transformer_engine"));
  const TransformerConfig& c = mpt.model.transformer;
  const std::int64_t t = kTokens, s = 2048;
  const auto sum = [](const WorkspaceSizes& w) {
    return std::accumulate(w.begin(), w.end(), Bytes{0});
  };
  EXPECT_EQ(sum(block_saved_tensors(c, t, s, 2, 0, true)),
            sum(block_saved_tensors(c, t, s, 2, 0, false)) - t * (c.hidden + c.ffn_hidden));
  // Each module's weight transpose, one byte per element: Wqkv, out_proj, up, down.
  const std::int64_t h = c.hidden, f = c.ffn_hidden;
  const WorkspaceSizes weights = block_fp8_weight_tensors(c);
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_EQ(sum(weights), 4 * h * h + 2 * h * f);
}

// A block that keeps its activations saves its modules' fp8 weight transposes with them; a fully
// checkpointed one recomputes them with the rest, and holds no autocast cast buffer.
TEST(Fp8Linears, BlocksSaveTheirFp8WeightTransposes) {
  const Scenario mpt = scenario_from_text(training_text(kMpt, ", fp8: transformer_engine"));
  const TransformerConfig& c = mpt.model.transformer;
  const Schedule s = lower(mpt);
  const Bytes fp8_weights = 4 * c.hidden * c.hidden + 2 * c.hidden * c.ffn_hidden;
  const WorkspaceSizes saved = block_saved_tensors(c, kTokens, 2048, 2, 4, true);
  const Bytes expected = std::accumulate(saved.begin(), saved.end(), Bytes{0}) + fp8_weights;
  EXPECT_EQ(testing::block_activation_buffers(s), (std::vector<Bytes>{expected, expected}));
  const Schedule ckpt = lower(scenario_from_text(
      training_text(kMpt, ", fp8: transformer_engine, activation_checkpointing: full")));
  EXPECT_TRUE(check_schedule(ckpt).empty());
  for (std::size_t b = 0; b < ckpt.buffers.size(); ++b) {
    EXPECT_EQ(buffer_name(ckpt, static_cast<BufferId>(b)).find("autocast_casts"),
              std::string::npos);
  }
}

TEST(Fp8Linears, RefusedWhereTransformerEngineOrTheModelCannotRunIt) {
  // TE refuses fp8 without fp8 tensor cores.
  EXPECT_TRUE(has_problem(
      problems_of(training_text(kLlama, ", fp8: transformer_engine", "preset: a100-sxm-80gb")),
      "training.fp8", "no fp8 tensor cores"));
  // fp32 activations: no autocast over fp32 parameters.
  EXPECT_TRUE(has_problem(problems_of("model: {" + kLlama +
                                      "}\ncluster: {preset: h100-sxm-80gb}\n"
                                      "training: {seq_len: 2048, fp8: transformer_engine}\n"
                                      "fsdp: {api: fsdp2}\n"),
                          "training.fp8", "fp32 activations"));
  EXPECT_TRUE(
      has_problem(problems_of(training_text(
                      kLlama, ", fp8: transformer_engine, activation_checkpointing: selective_op")),
                  "training.fp8", "selective_op"));
  EXPECT_TRUE(has_problem(
      problems_of(training_text(kLlama, ", fp8: transformer_engine, generation: {calls: 1}")),
      "training.fp8", "training.generation"));
  EXPECT_TRUE(has_problem(problems_of(training_text(kLlama, ", fp8: te")), "training.fp8",
                          "transformer_engine"));
  EXPECT_TRUE(problems_of(training_text(kLlama, ", fp8: transformer_engine")).empty());
}

}  // namespace fp8_linears_test
}  // namespace shardscope
