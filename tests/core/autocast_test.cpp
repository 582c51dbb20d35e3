// training.autocast over fp32 parameters (docs/semantics.md, "Autocast"): matmuls run in the
// autocast dtype, the all-gathers stay in the parameters' dtype, every projection weight is cast
// per use, the residual stream and norms stay in fp32 and each projection saves its own cast
// input. The weight copies live as long as autograd or autocast's cache keeps them: saved to
// backward when a block keeps its activations, until the forward ends under FSDP2 (cacheable leaf
// parameters), only during the op under FSDP1 (flat-parameter views are not cached).
#include <gtest/gtest.h>

#include <string>

#include "lowering_test_util.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/core/kernel.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::first_op;

// Llama 3.1 8B, 2 layers, 8 GPUs, 2 × 2048 tokens per micro-batch, fp32 parameters.
Scenario llama_training(const std::string& training, const std::string& fsdp = "api: fsdp2") {
  return scenario_from_text(
      "model: {preset: llama3.1-8b, layers: 2}\n"
      "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
      "training: {seq_len: 2048, micro_batch: 2, iterations: 1" +
          training + "}\nfsdp: {" + fsdp + "}\n",
      {});
}

std::int64_t projection_params(const TransformerConfig& c) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  return h * h + 2 * h * kv + h * h + 3 * h * f;  // wq, wk, wv, wo, w1, w3, w2 (no biases)
}

const Kernel* find_kernel(const Schedule& s, const Op& op, const std::string& label) {
  for (const Kernel& k : s.kernel_sets.at(static_cast<std::size_t>(op.kernels))) {
    if (k.label == label) return &k;
  }
  return nullptr;
}

// Who allocates and who frees each "autocast_casts" buffer.
struct CastLifetime {
  OpId alloc = kNone;
  OpId free = kNone;
  Bytes size = 0;
};
std::vector<CastLifetime> cast_buffers(const Schedule& s) {
  std::vector<CastLifetime> out;
  for (std::size_t b = 0; b < s.buffers.size(); ++b) {
    if (buffer_name(s, static_cast<BufferId>(b)).find("autocast_casts") == std::string::npos)
      continue;
    CastLifetime life;
    life.size = s.buffers[b].size;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      for (BufferId a : s.ops[i].allocs) {
        if (a == static_cast<BufferId>(b)) life.alloc = static_cast<OpId>(i);
      }
      for (BufferId f : s.ops[i].frees) {
        if (f == static_cast<BufferId>(b)) life.free = static_cast<OpId>(i);
      }
    }
    out.push_back(life);
  }
  return out;
}

TEST(Autocast, ComputesInTheAutocastDtypeAndCastsOnlyFromAnother) {
  const Scenario over_fp32 = llama_training(", autocast: bf16");
  EXPECT_EQ(compute_dtype(over_fp32), DType::bf16);
  EXPECT_EQ(autocast_cast_source(over_fp32), DType::fp32);
  // Lightning's bf16-mixed FSDP: MixedPrecision(param_dtype=bf16) and autocast bf16 — the
  // weights already are bf16, nothing is cast.
  const Scenario over_bf16 =
      llama_training(", autocast: bf16", "api: fsdp2, mixed_precision: {param_dtype: bf16}");
  EXPECT_EQ(compute_dtype(over_bf16), DType::bf16);
  EXPECT_FALSE(autocast_cast_source(over_bf16));
  const Scenario none = llama_training("");
  EXPECT_EQ(compute_dtype(none), DType::fp32);
  EXPECT_FALSE(autocast_cast_source(none));
}

TEST(Autocast, BlockActivationsInClosedForm) {
  const TransformerConfig& c = llama_training("").model.transformer;
  const std::int64_t t = 4096, s = 2048, h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  // fp32 norm inputs (their fp32 outputs are only cast, not kept); bf16 q, k, v, attention
  // output, SwiGLU's four ffn-sized tensors and five cast inputs (wq, wk, wv read norm 1; w1,
  // w3 norm 2); the fp32 rstd of each norm and the attention's log-sum-exp (real PyTorch 2.11
  // keeps exactly these: tests/pytorch/memory_oracle.py's autocast rows).
  const Bytes expected =
      t * 4 * 2 * h + t * 2 * (2 * h + 2 * kv + 4 * f + 5 * h) + t * 4 * 2 + t * 4 * c.heads;
  EXPECT_EQ(block_activation_bytes(c, t, s, 2, 4), expected);
  EXPECT_EQ(block_saved_bytes(c, t, s, 2, ActivationCheckpointing::none, 4), expected);
  // Without autocast the same tensors are one dtype and the norm outputs are shared.
  EXPECT_EQ(block_activation_bytes(c, t, s, 2),
            t * 2 * (6 * h + 2 * kv + 4 * f) + t * 4 * 2 + t * 4 * c.heads);
  // Full checkpointing keeps the fp32 block input; selective_op also its kept bf16 outputs.
  EXPECT_EQ(block_saved_bytes(c, t, s, 2, ActivationCheckpointing::full, 4), t * 4 * h);
  EXPECT_EQ(block_saved_bytes(c, t, s, 2, ActivationCheckpointing::selective_op, 4),
            t * 4 * h + t * 2 * (h + h + kv + f + h) + t * 4 * c.heads);
  // GPT-style blocks have one fused qkv projection and one fc: two cast inputs; the norm
  // outputs are not kept, their inputs are in fp32.
  TransformerConfig gpt = c;
  gpt.mlp = MlpKind::gelu;
  EXPECT_EQ(block_activation_bytes(gpt, t, s, 2, 4) - block_activation_bytes(gpt, t, s, 2),
            t * 4 * 2 * h - t * 2 * 4 * h + t * 2 * 2 * h);
  EXPECT_EQ(block_weight_cast_bytes(c, 2), projection_params(c) * 2);
}

TEST(Autocast, CastKernelsMoveEveryProjectionWeightAndGradient) {
  const Schedule s = lower(llama_training(", autocast: bf16"));
  const TransformerConfig& c = llama_training("").model.transformer;
  const Op& fwd = first_op(s, OpKind::forward, "block");
  const Kernel* casts = find_kernel(s, fwd, "autocast.weight_casts");
  ASSERT_NE(casts, nullptr);
  EXPECT_EQ(std::get<MemoryBound>(casts->shape).bytes, projection_params(c) * (4 + 2));
  const Kernel* grads =
      find_kernel(s, first_op(s, OpKind::backward, "block"), "autocast.grad_casts");
  ASSERT_NE(grads, nullptr);
  EXPECT_EQ(std::get<MemoryBound>(grads->shape).bytes, projection_params(c) * (2 + 4));
  // The matmuls run in bf16 while the all-gathers move fp32: as many bytes as without autocast,
  // twice as many as with bf16 parameters.
  const Kernel* wq = find_kernel(s, fwd, "wq");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(std::get<Gemm>(wq->shape).input, DType::bf16);
  const auto gathered = [](const Schedule& sched) {
    Bytes total = 0;
    for (const Op& op : sched.ops) total += op.kind == OpKind::all_gather ? op.bytes : 0;
    return total;
  };
  const Schedule bf16 =
      lower(llama_training("", "api: fsdp2, mixed_precision: {param_dtype: bf16}"));
  EXPECT_GT(gathered(s), 0);
  EXPECT_EQ(gathered(s), 2 * gathered(bf16));
  const Schedule plain = lower(llama_training(""));
  EXPECT_EQ(gathered(s), gathered(plain));
  EXPECT_EQ(find_kernel(plain, first_op(plain, OpKind::forward, "block"), "autocast.weight_casts"),
            nullptr);
}

TEST(Autocast, BlocksThatKeepActivationsSaveTheirWeightCasts) {
  const Scenario with = llama_training(", autocast: bf16");
  const Schedule s = lower(with);
  EXPECT_TRUE(cast_buffers(s).empty());  // nothing checkpointed: autograd saves the casts
  const TransformerConfig& c = with.model.transformer;
  const Bytes saved = block_activation_bytes(c, 4096, 2048, 2, 4) + block_weight_cast_bytes(c, 2);
  EXPECT_EQ(testing::block_activation_buffers(s), (std::vector<Bytes>{saved, saved}));
}

TEST(Autocast, Fsdp2CachesCheckpointedBlocksCastsUntilTheForwardEnds) {
  const Schedule s = lower(llama_training(", autocast: bf16, activation_checkpointing: full"));
  EXPECT_TRUE(check_schedule(s).empty());
  const auto casts = cast_buffers(s);
  ASSERT_EQ(casts.size(), 2u);  // one per block, one micro-batch
  const OpId loss = static_cast<OpId>(&first_op(s, OpKind::forward, "loss") - s.ops.data());
  for (const auto& life : casts) {
    EXPECT_EQ(s.ops[static_cast<std::size_t>(life.alloc)].kind, OpKind::forward);
    EXPECT_LT(life.alloc, loss);
    EXPECT_EQ(life.free, loss);
    EXPECT_EQ(life.size, block_weight_cast_bytes(llama_training("").model.transformer, 2));
  }
}

// Each cast is freed after the projection that reads it: one projection's copy at a time, the
// largest (Llama's w1, w3 and w2: ffn × hidden each; GPT's fc, or its fused qkv when wider), as
// real PyTorch's forward peak under MPT's recipe shows at 30B scale (docs/validation.md).
TEST(Autocast, Fsdp1FreesCheckpointedBlocksCastsAfterUse) {
  const std::string fsdp1 = "api: fsdp1, sharding_strategy: FULL_SHARD";
  const Scenario with = llama_training(", autocast: bf16, activation_checkpointing: full", fsdp1);
  const Schedule s = lower(with);
  EXPECT_TRUE(check_schedule(s).empty());
  const auto casts = cast_buffers(s);
  ASSERT_EQ(casts.size(), 2u);
  const TransformerConfig& c = with.model.transformer;
  for (const auto& life : casts) {
    EXPECT_EQ(life.alloc, life.free);
    EXPECT_EQ(s.ops[static_cast<std::size_t>(life.alloc)].kind, OpKind::forward);
    EXPECT_EQ(life.size, c.ffn_hidden * c.hidden * 2);
  }
  // A GPT-style block whose fused qkv outweighs its fc: that projection's copy.
  Scenario wide_qkv = with;
  wide_qkv.model.transformer.mlp = MlpKind::gelu;
  wide_qkv.model.transformer.kv_heads = wide_qkv.model.transformer.heads;
  wide_qkv.model.transformer.ffn_hidden = 2 * c.hidden;
  const std::int64_t h = c.hidden;
  for (const auto& life : cast_buffers(lower(wide_qkv))) {
    EXPECT_EQ(life.size, 3 * h * h * 2);
  }
}

TEST(Autocast, TheHeadSavesItsCastWeightAndFp32NormTensors) {
  const Scenario with = llama_training(", autocast: bf16");
  const Scenario bf16 = llama_training("", "api: fsdp2, mixed_precision: {param_dtype: bf16}");
  const TransformerConfig& c = with.model.transformer;
  const std::int64_t t = 4096, h = c.hidden;
  const auto head_saved = [](const Schedule& s) {
    for (const Op& op : s.ops) {
      if (op.kind != OpKind::forward || op_label(s, op) != "head") continue;
      return s.buffers[static_cast<std::size_t>(op.allocs.front())].size;
    }
    return Bytes{0};
  };
  // bf16: the final norm's input and output (the head's input). Autocast: the norm's fp32
  // input (its fp32 output is only cast), the head's cast input and the cast output weight.
  EXPECT_EQ(head_saved(lower(bf16)), 2 * t * h * 2);
  EXPECT_EQ(head_saved(lower(with)), t * h * 4 + t * h * 2 + c.vocab * h * 2);
}

}  // namespace
}  // namespace shardscope
