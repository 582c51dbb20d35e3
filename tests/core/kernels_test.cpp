// The kernels lowering attaches to compute ops: each kind's FLOPs and bytes in closed form, a
// block's kernels against the transformer formulas of group_compute.hpp, and every op's FLOPs and
// bytes equal to its kernels' sums (the property check_schedule enforces on any IR).
#include <gtest/gtest.h>

#include <set>

#include "lowering_test_util.hpp"
#include "shardscope/core/kernel.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule_check.hpp"

namespace shardscope {
namespace {

using testing::first_op;

double d(std::int64_t x) {
  return static_cast<double>(x);
}

TEST(Kernels, EachKindCountsItsWorkInClosedForm) {
  const Kernel gemm{"g", 3, Gemm{8, 16, 32, 2, false, true, DType::bf16, DType::bf16}};
  EXPECT_DOUBLE_EQ(kernel_flops(gemm), 3 * 2.0 * 8 * 16 * 32 * 2);
  EXPECT_EQ(kernel_memory_bytes(gemm), 0);

  Attention a{2, 8, 2, 128, 128, 64, false, false, DType::bf16};
  const double full = 4.0 * 2 * 8 * 128 * 128 * 64;  // QKᵀ and PV, 2 FLOPs per multiply-add
  EXPECT_DOUBLE_EQ(kernel_flops({"a", 1, a}), full);
  a.causal = true;
  EXPECT_DOUBLE_EQ(kernel_flops({"a", 1, a}), full / 2);
  a.backward = true;
  EXPECT_DOUBLE_EQ(kernel_flops({"a", 1, a}), 2.5 * full / 2);

  const Kernel loss{"l", 1, CrossEntropy{100, 1000, false, DType::bf16}};
  EXPECT_DOUBLE_EQ(kernel_flops(loss), 5.0 * 100 * 1000);
  // upcast_fp32: log_softmax of the fp32 copy (read, write); the .float() is its own kernel.
  EXPECT_EQ(kernel_memory_bytes(loss), 100 * 1000 * (4 + 4));
  const Kernel loss_back{"l", 1, CrossEntropy{100, 1000, true, DType::bf16}};
  EXPECT_DOUBLE_EQ(kernel_flops(loss_back), 3.0 * 100 * 1000);
  EXPECT_EQ(kernel_memory_bytes(loss_back), 100 * 1000 * (3 * 4));

  // Fused AdamW reads param, grad, exp_avg, exp_avg_sq and writes param and both states.
  const Kernel adam{"adamw", 1,
                    OptimizerUpdate{1000, Optimizer::adamw, DType::fp32, OptimizerImpl::fused}};
  EXPECT_EQ(kernel_memory_bytes(adam), 1000 * 4 * 7);
  EXPECT_DOUBLE_EQ(kernel_flops(adam), 12.0 * 1000);
  // Foreach (_multi_tensor_adam): weight decay 2, lerp_ 3, mul_ 2, addcmul_ 3, sqrt 2, div_ 2,
  // add_ 2, addcdiv_ 4 element accesses; Adam has no weight-decay pass by default.
  const Kernel adamw_foreach{
      "adamw", 1, OptimizerUpdate{1000, Optimizer::adamw, DType::fp32, OptimizerImpl::foreach}};
  EXPECT_EQ(kernel_memory_bytes(adamw_foreach), 1000 * 4 * (2 + 3 + 2 + 3 + 2 + 2 + 2 + 4));
  EXPECT_DOUBLE_EQ(kernel_flops(adamw_foreach), kernel_flops(adam));
  const Kernel adam_foreach{
      "adam", 1, OptimizerUpdate{1000, Optimizer::adam, DType::fp32, OptimizerImpl::foreach}};
  EXPECT_EQ(kernel_memory_bytes(adam_foreach), 1000 * 4 * (3 + 2 + 3 + 2 + 2 + 2 + 4));
  // SGD without momentum: p.add_(grad, alpha=-lr) in either implementation.
  for (const OptimizerImpl impl : {OptimizerImpl::fused, OptimizerImpl::foreach}) {
    const Kernel sgd{"sgd", 2, OptimizerUpdate{1000, Optimizer::sgd, DType::bf16, impl}};
    EXPECT_EQ(kernel_memory_bytes(sgd), 2 * 1000 * 2 * 3);
    EXPECT_DOUBLE_EQ(kernel_flops(sgd), 2 * 2.0 * 1000);
  }

  const KernelTotals t = kernel_set_totals(std::vector<Kernel>{gemm, {"a", 1, a}, loss});
  EXPECT_DOUBLE_EQ(t.flops, kernel_flops(gemm) + kernel_flops({"a", 1, a}) + kernel_flops(loss));
  EXPECT_DOUBLE_EQ(t.attention_flops, kernel_flops({"a", 1, a}));
  EXPECT_EQ(t.memory_bytes, kernel_memory_bytes(loss));
}

TEST(Kernels, KindNamesRoundTrip) {
  for (const auto kind : {KernelKind::gemm, KernelKind::attention, KernelKind::memory,
                          KernelKind::loss, KernelKind::optimizer}) {
    EXPECT_EQ(parse_kernel_kind(to_string(kind)), kind);
  }
  EXPECT_FALSE(parse_kernel_kind("conv"));
}

// Llama 3.1 8B, 4 layers, bf16 compute, on 8 GPUs; `ac` is training.activation_checkpointing.
Scenario llama_checkpointed(const std::string& ac, const std::string& mlp = "swiglu") {
  return scenario_from_text(
      "model: {preset: llama3.1-8b, layers: 4, mlp: " + mlp +
          "}\n"
          "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
          "training: {seq_len: 2048, micro_batch: 2, iterations: 1, activation_checkpointing: " +
          ac +
          "}\n"
          "fsdp: {api: fsdp2, mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n",
      {});
}

// The linear weights of one block: q, o (h×h), k, v (h×kv), MLP (3·h·f SwiGLU, 2·h·f GELU).
double block_weights(const TransformerConfig& c) {
  const double h = d(c.hidden), kv = d(c.kv_dim()), f = d(c.ffn_hidden);
  return 2 * h * h + 2 * h * kv + (c.mlp == MlpKind::swiglu ? 3 : 2) * h * f;
}

TEST(Kernels, ABlockMatchesTheTransformerFormulas) {
  for (const std::string mlp : {"swiglu", "gelu"}) {
    SCOPED_TRACE(mlp);
    const Scenario sc = llama_checkpointed("none", mlp);
    const Schedule s = lower(sc);
    const TransformerConfig& c = sc.model.transformer;
    const double t = 2 * 2048, seq = 2048;
    const double attention = 2 * t * seq * d(c.hidden);  // causal: half of 4·t·s·h
    const Op& fwd = first_op(s, OpKind::forward, "block");
    EXPECT_DOUBLE_EQ(fwd.flops, 2 * t * block_weights(c) + attention);
    EXPECT_DOUBLE_EQ(fwd.attention_flops, attention);
    const Op& bwd = first_op(s, OpKind::backward, "block");
    EXPECT_DOUBLE_EQ(bwd.flops, 4 * t * block_weights(c) + 2.5 * attention);
    EXPECT_DOUBLE_EQ(bwd.attention_flops, 2.5 * attention);
    EXPECT_EQ(bwd.bytes, 2 * fwd.bytes);  // memory-bound traffic: backward twice the forward

    // nn.Linear's three GEMMs: forward (t, out, in)·ᵀ, input and weight gradients. A Llama-style
    // block's q, k and v are three modules; a GPT-style block's (MPT's Wqkv, GPT-2's c_attn) one
    // module, one GEMM of their outputs together.
    const auto fk = op_kernels(s, fwd);
    ASSERT_FALSE(fk.empty());
    const bool fused = mlp == "gelu";
    const std::int64_t qkv = fused ? c.hidden + 2 * c.kv_dim() : c.hidden;
    EXPECT_EQ(fk[0].label, fused ? "wqkv" : "wq");
    EXPECT_EQ(std::get<Gemm>(fk[0].shape),
              (Gemm{4096, qkv, c.hidden, 1, false, true, DType::bf16, DType::bf16}));
    const auto bk = op_kernels(s, bwd);
    const auto find = [&](std::string_view label) {
      for (const Kernel& k : bk) {
        if (k.label == label) return std::get<Gemm>(k.shape);
      }
      throw std::runtime_error("no kernel " + std::string(label));
    };
    const std::string qkv_name = fused ? "wqkv" : "wk";
    const std::int64_t qkv_out = fused ? qkv : c.kv_dim();
    EXPECT_EQ(find(qkv_name + ".dgrad"),
              (Gemm{4096, c.hidden, qkv_out, 1, false, false, DType::bf16, DType::bf16}));
    EXPECT_EQ(find(qkv_name + ".wgrad"),
              (Gemm{qkv_out, c.hidden, 4096, 1, true, false, DType::bf16, DType::bf16}));
    const auto gemms = std::count_if(bk.begin(), bk.end(),
                                     [](const Kernel& k) { return k.kind() == KernelKind::gemm; });
    EXPECT_EQ(gemms, 2 * (fused ? 4 : 7));  // every module's input and weight gradients
    // Grouped-query flash attention over the micro-batch's sequences.
    const auto attn = std::find_if(
        fk.begin(), fk.end(), [](const Kernel& k) { return k.kind() == KernelKind::attention; });
    ASSERT_NE(attn, fk.end());
    EXPECT_EQ(
        std::get<Attention>(attn->shape),
        (Attention{2, c.heads, c.kv_heads, 2048, 2048, c.head_dim(), true, false, DType::bf16}));
  }
}

TEST(Kernels, TheHeadAndLossAndTheOptimizer) {
  const Scenario sc = llama_checkpointed("none");
  const Schedule s = lower(sc);
  const TransformerConfig& c = sc.model.transformer;
  const double t = 4096, h = d(c.hidden), v = d(c.vocab);
  EXPECT_DOUBLE_EQ(first_op(s, OpKind::forward, "head").flops, 2 * t * h * v);
  EXPECT_DOUBLE_EQ(first_op(s, OpKind::forward, "loss").flops, 5 * t * v);
  EXPECT_DOUBLE_EQ(first_op(s, OpKind::backward, "head").flops, 4 * t * h * v);
  EXPECT_DOUBLE_EQ(first_op(s, OpKind::backward, "loss").flops, 3 * t * v);
  // One AdamW step over every sharded parameter, in fp32, foreach (PyTorch's default).
  std::int64_t shard = 0;
  for (const ParamGroup& g : s.groups) shard += g.sharded_numel;
  const Op& step = first_op(s, OpKind::optimizer_step, "adamw");
  const auto k = op_kernels(s, step);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(std::get<OptimizerUpdate>(k[0].shape),
            (OptimizerUpdate{shard, Optimizer::adamw, DType::fp32, OptimizerImpl::foreach}));
  EXPECT_EQ(step.bytes, shard * 4 * 20);
}

// torch.utils.checkpoint stops a recompute after the last tensor backward needs (early stop), so
// the MLP's output projection and the residual add after it never run again: real PyTorch 2.11
// runs 6 of a SwiGLU block's 7 matmuls and 5 of a GELU block's 6 in a fully checkpointed
// recompute (tests/pytorch/collective_oracle.py --show, the checkpointing cases).
TEST(Kernels, RecomputeRunsWhatTheCheckpointingPolicyDropped) {
  const Scenario sc = llama_checkpointed("none");
  const TransformerConfig& c = sc.model.transformer;
  const double t = 4096, h = d(c.hidden), kv = d(c.kv_dim()), f = d(c.ffn_hidden);
  const Bytes residual_add = 4096 * c.hidden * 3 * 2;  // read two, write one, bf16
  const Schedule none = lower(sc);
  const Op& forward = first_op(none, OpKind::forward, "block");
  // full: the forward again, attention included, up to the MLP's output projection.
  const Schedule full = lower(llama_checkpointed("full"));
  const Op& re = first_op(full, OpKind::recompute, "block");
  EXPECT_DOUBLE_EQ(re.flops, forward.flops - 2 * t * f * h);
  EXPECT_DOUBLE_EQ(re.attention_flops, forward.attention_flops);
  EXPECT_EQ(re.bytes, forward.bytes - residual_add);
  // selective_op: every second matmul (wk, wo, w3) and the memory-bound kernels, no attention.
  const Schedule sac = lower(llama_checkpointed("selective_op"));
  const Op& sac_re = first_op(sac, OpKind::recompute, "block");
  EXPECT_DOUBLE_EQ(sac_re.flops, 2 * t * (h * kv + h * h + h * f));
  EXPECT_DOUBLE_EQ(sac_re.attention_flops, 0);
  EXPECT_EQ(sac_re.bytes, forward.bytes - residual_add);
  // GELU: wk, wo and fc2 are the unsaved matmuls; fc2, the last, is not recomputed.
  const Schedule gelu = lower(llama_checkpointed("none", "gelu"));
  const Schedule gelu_sac = lower(llama_checkpointed("selective_op", "gelu"));
  const Op& gelu_forward = first_op(gelu, OpKind::forward, "block");
  const Op& gelu_re = first_op(gelu_sac, OpKind::recompute, "block");
  EXPECT_DOUBLE_EQ(gelu_re.flops, 2 * t * (h * kv + h * h));
  EXPECT_EQ(gelu_re.bytes, gelu_forward.bytes - residual_add);
}

// torchtitan's policy saves aten.mm outputs only; a linear with a bias runs as aten.addmm, so it
// is recomputed and not counted (its _op_sac_save_list; real PyTorch recomputes 5 of a biased
// GPT block's 6 linears, the last skipped by early stop).
TEST(Kernels, SelectiveCheckpointingRecomputesEveryBiasedLinear) {
  const TransformerConfig& c = llama_checkpointed("none").model.transformer;
  const double t = 4096, h = d(c.hidden), kv = d(c.kv_dim()), f = d(c.ffn_hidden);
  const auto recompute_flops = [](const std::string& mlp, const std::string& biases) {
    const Scenario sc = scenario_from_text(
        "model: {preset: llama3.1-8b, layers: 4, mlp: " + mlp + ", " + biases +
            "}\ncluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
            "training: {seq_len: 2048, micro_batch: 2, iterations: 1, "
            "activation_checkpointing: selective_op}\n"
            "fsdp: {api: fsdp2, mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n",
        {});
    return first_op(lower(sc), OpKind::recompute, "block").flops;
  };
  // GPT-style, every projection biased: wq, wk, wv, wo, fc1 (fc2, the last, is skipped).
  EXPECT_DOUBLE_EQ(recompute_flops("gelu", "bias: true"), 2 * t * (2 * h * h + 2 * h * kv + h * f));
  // Qwen-style, biases on q, k, v only: those three, then the mm count saves wo and w3 and
  // recomputes w1 (w2, the fourth mm and the last linear, is skipped).
  EXPECT_DOUBLE_EQ(recompute_flops("swiglu", "qkv_bias: true"),
                   2 * t * (h * h + 2 * h * kv + h * f));
}

TEST(Kernels, EveryOpCarriesItsKernelsSumsAndIdenticalBlocksShareOneSet) {
  for (const std::string ac : {"none", "full", "selective_op", "every_2"}) {
    SCOPED_TRACE(ac);
    const Schedule s = lower(llama_checkpointed(ac));
    EXPECT_TRUE(check_schedule(s).empty());  // includes: FLOPs and bytes equal the kernels' sums
    std::set<std::int32_t> used;
    for (const Op& op : s.ops) {
      const bool compute = op.kind == OpKind::forward || op.kind == OpKind::backward ||
                           op.kind == OpKind::recompute || op.kind == OpKind::optimizer_step;
      EXPECT_EQ(op.kernels != kNone, compute) << to_string(op.kind);
      if (op.kernels == kNone) continue;
      used.insert(op.kernels);
      const KernelTotals k = kernel_set_totals(op_kernels(s, op));
      EXPECT_DOUBLE_EQ(op.flops, k.flops);
      EXPECT_EQ(op.bytes, k.memory_bytes);
    }
    // embed, head, .float() and loss ×2, block forward, backward, at most one recompute,
    // optimizer: however many blocks.
    EXPECT_LE(s.kernel_sets.size(), 12u);
    EXPECT_EQ(used.size(), s.kernel_sets.size());  // no set without an op
  }
}

TEST(Kernels, ACustomModelHasNoShapesToGive) {
  const Schedule s = lower(scenario_from_text(
      "model: {family: custom, groups: [{name: root, params: 1000, forward_flops: 1.0e9}]}\n"
      "cluster: {nodes: 1, gpus_per_node: 2}\n"
      "training: {iterations: 1}\n",
      {}));
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::forward || op.kind == OpKind::backward) {
      EXPECT_EQ(op.kernels, kNone);
    }
  }
  EXPECT_TRUE(check_schedule(s).empty());
}

}  // namespace
}  // namespace shardscope
