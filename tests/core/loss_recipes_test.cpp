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
Scenario llama_with_loss(const std::string& loss, const std::string& extra = "",
                         const std::vector<std::string>& overrides = {}) {
  return scenario_from_text(
      "model: {preset: llama3.1-8b, layers: 2}\n"
      "cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}\n"
      "training: {seq_len: 2048, micro_batch: 2, iterations: 1, loss: " +
          loss + extra +
          "}\n"
          "fsdp: {api: fsdp2, mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}\n",
      overrides);
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

// The ops of the root's head and loss, in issue order, with what each allocates and frees.
struct RootOp {
  std::string label;
  std::vector<Bytes> allocs, frees;
};
std::vector<RootOp> root_ops(const Schedule& s, Phase phase) {
  std::vector<RootOp> out;
  for (const Op& op : s.ops) {
    if (op.phase != phase || op.iteration != 0 || op.group != 0) continue;
    if (op.kind != OpKind::forward && op.kind != OpKind::backward) continue;
    RootOp r{std::string(op_label(s, op)), {}, {}};
    if (r.label == "embed") continue;
    for (BufferId b : op.allocs) {
      const Buffer& buffer = s.buffers[static_cast<std::size_t>(b)];
      if (buffer.group != kNone) r.allocs.push_back(buffer.size);  // not cuBLAS's workspace
    }
    for (BufferId b : op.frees) r.frees.push_back(s.buffers[static_cast<std::size_t>(b)].size);
    out.push_back(std::move(r));
  }
  return out;
}

// Each recipe's tensors live as long as real PyTorch 2.11 keeps them when a training step like
// torchtitan's computes the loss from the model's output (tests/pytorch/memory_oracle.py).
TEST(LossRecipes, EachTensorLivesAsLongAsInPyTorch) {
  const Scenario up = llama_with_loss("upcast_fp32");
  const TransformerConfig& c = up.model.transformer;
  const std::int64_t t = 4096, v = c.vocab, h = c.hidden, e = 2, norm = 2 * t * h * e;
  const Bytes logits = t * v * e, fp32 = t * v * 4, head_grad = v * h * e + h * e;
  {
    const Schedule s = lower(up);
    const auto fwd = root_ops(s, Phase::forward);
    ASSERT_EQ(fwd.size(), 3U);
    // head: the final norm's tensors (saved) and the logits (handed on)
    EXPECT_EQ(fwd[0].label, "head");
    EXPECT_EQ(fwd[0].allocs, (std::vector<Bytes>{norm, logits}));
    // .float(): its fp32 copy; the training step still holds the logits (torchtitan's `pred`)
    EXPECT_EQ(fwd[1].label, "logits.float");
    EXPECT_EQ(fwd[1].allocs, (std::vector<Bytes>{fp32}));
    EXPECT_TRUE(fwd[1].frees.empty());
    // log_softmax keeps its fp32 output beside both; then the copy and the logits go
    EXPECT_EQ(fwd[2].label, "loss");
    EXPECT_EQ(fwd[2].allocs, (std::vector<Bytes>{fp32}));
    EXPECT_EQ(fwd[2].frees, (std::vector<Bytes>{logits, fp32}));
    const auto bwd = root_ops(s, Phase::backward);
    ASSERT_EQ(bwd.size(), 3U);
    // nll's and log_softmax's gradients beside the saved output; then the first and it go
    EXPECT_EQ(bwd[0].label, "loss");
    EXPECT_EQ(bwd[0].allocs, (std::vector<Bytes>{fp32, fp32}));
    EXPECT_EQ(bwd[0].frees, (std::vector<Bytes>{fp32, fp32}));
    EXPECT_EQ(bwd[1].label, "logits.float");
    EXPECT_EQ(bwd[1].allocs, (std::vector<Bytes>{logits}));
    EXPECT_EQ(bwd[1].frees, (std::vector<Bytes>{fp32}));
    // the head's GEMMs make the output head's and final norm's gradients and free the rest
    EXPECT_EQ(bwd[2].label, "head");
    EXPECT_EQ(bwd[2].allocs, (std::vector<Bytes>{head_grad}));
    EXPECT_EQ(bwd[2].frees, (std::vector<Bytes>{norm, logits}));
  }
  {
    const Schedule s = lower(llama_with_loss("fused"));
    const auto fwd = root_ops(s, Phase::forward);
    ASSERT_EQ(fwd.size(), 2U);
    EXPECT_EQ(fwd[0].allocs, (std::vector<Bytes>{norm, logits}));
    EXPECT_EQ(fwd[1].allocs, (std::vector<Bytes>{t * 4}));  // the log-sum-exp; logits kept
    EXPECT_TRUE(fwd[1].frees.empty());
    const auto bwd = root_ops(s, Phase::backward);
    ASSERT_EQ(bwd.size(), 2U);
    EXPECT_TRUE(bwd[0].allocs.empty());  // the gradient is written into the logits
    EXPECT_EQ(bwd[1].frees, (std::vector<Bytes>{norm, logits}));
  }
  {
    const Schedule s = lower(llama_with_loss("chunked"));
    const std::int64_t chunk = 128;  // 4,096 / ⌈128,256 / 4,096⌉ = 128
    const auto fwd = root_ops(s, Phase::forward);
    ASSERT_EQ(fwd.size(), 2U);
    EXPECT_EQ(fwd[1].allocs, (std::vector<Bytes>{t * 4, chunk * v * 4, chunk * v * 4}));
    const auto bwd = root_ops(s, Phase::backward);
    ASSERT_EQ(bwd.size(), 2U);
    EXPECT_EQ(bwd[0].allocs, (std::vector<Bytes>{chunk * v * 4, chunk * v * 4, chunk * v * 4}));
    // the head's weight gradient summed over chunks out of place, the input's likewise
    EXPECT_EQ(bwd[1].allocs,
              (std::vector<Bytes>{head_grad, v * h * e, v * h * e, t * h * e, t * h * e}));
  }
}

// MixedPrecisionPolicy(output_dtype=fp32) on the root (docs/semantics.md, "Mixed-precision
// casts"): its post-forward casts the logits and frees the model's own; the loss reads fp32
// logits; the gradient is cast back before the root's pre-backward. The same tensors as
// PyTorch's memory trackers see (tests/pytorch/memory_oracle.py, "output fp32 root" rows).
TEST(LossRecipes, AnFp32OutputCastOnTheRootReplacesTheLossUpcast) {
  const std::vector<std::string> root_fp32{"fsdp.mixed_precision.output_dtype=fp32",
                                           "fsdp.mixed_precision.output_dtype_modules=root"};
  const Scenario up = llama_with_loss("upcast_fp32", "", root_fp32);
  ASSERT_EQ(root_output_cast(up), DType::fp32);
  const TransformerConfig& c = up.model.transformer;
  const std::int64_t t = 4096, v = c.vocab, h = c.hidden, e = 2, norm = 2 * t * h * e;
  const Bytes logits = t * v * e, fp32 = t * v * 4, head_grad = v * h * e + h * e;
  {
    const Schedule s = lower(up);
    EXPECT_TRUE(check_schedule(s).empty());
    const auto fwd = root_ops(s, Phase::forward);
    ASSERT_EQ(fwd.size(), 3U);
    EXPECT_EQ(fwd[0].label, "head");
    EXPECT_EQ(fwd[0].allocs, (std::vector<Bytes>{norm, logits}));
    // The cast's copy replaces the model's logits, which nothing else holds.
    EXPECT_EQ(fwd[1].label, "cast_forward_outputs");
    EXPECT_EQ(fwd[1].allocs, (std::vector<Bytes>{fp32}));
    EXPECT_EQ(fwd[1].frees, (std::vector<Bytes>{logits}));
    EXPECT_EQ(first_op(s, OpKind::forward, "cast_forward_outputs").bytes, t * v * (e + 4));
    // .float() of fp32 logits is the tensor itself: no copy, log_softmax beside it
    EXPECT_EQ(fwd[2].label, "loss");
    EXPECT_EQ(fwd[2].allocs, (std::vector<Bytes>{fp32}));
    EXPECT_EQ(fwd[2].frees, (std::vector<Bytes>{fp32}));
    const auto bwd = root_ops(s, Phase::backward);
    ASSERT_EQ(bwd.size(), 3U);
    EXPECT_EQ(bwd[0].label, "loss");
    EXPECT_EQ(bwd[1].label, "cast_forward_outputs.backward");
    EXPECT_EQ(bwd[1].allocs, (std::vector<Bytes>{logits}));
    EXPECT_EQ(bwd[1].frees, (std::vector<Bytes>{fp32}));
    EXPECT_EQ(bwd[2].label, "head");
    EXPECT_EQ(bwd[2].allocs, (std::vector<Bytes>{head_grad}));
    EXPECT_EQ(bwd[2].frees, (std::vector<Bytes>{norm, logits}));
    // The cast back runs before the root's pre-backward all-gather is waited for: the gradient
    // reaches the hook on the uncast logits after ToCopyBackward.
    const Op& back = first_op(s, OpKind::backward, "cast_forward_outputs.backward");
    const Op& head = first_op(s, OpKind::backward, "head");
    EXPECT_LT(&back, &head);
    EXPECT_EQ(back.bytes, t * v * (e + 4));
  }
  {
    // fused: the kept logits, and the gradient written into them, are fp32.
    const Schedule s = lower(llama_with_loss("fused", "", root_fp32));
    const auto fwd = root_ops(s, Phase::forward);
    ASSERT_EQ(fwd.size(), 3U);
    EXPECT_EQ(fwd[1].frees, (std::vector<Bytes>{logits}));
    EXPECT_TRUE(fwd[2].frees.empty());  // kept
    const auto bwd = root_ops(s, Phase::backward);
    ASSERT_EQ(bwd.size(), 3U);
    EXPECT_EQ(bwd[1].frees, (std::vector<Bytes>{fp32}));
    EXPECT_EQ(bwd[1].allocs, (std::vector<Bytes>{logits}));
  }
  // Logits already fp32 (fp32 compute) are not copied: PyTorch's _cast_fp_tensor returns them.
  EXPECT_EQ(root_output_cast(scenario_from_text(
                "model: {preset: tiny}\nfsdp: {mixed_precision: {output_dtype: fp32}}\n", {})),
            std::nullopt);
}

TEST(LossRecipes, KernelsCountTheRecomputedHeadAndTheTraffic) {
  const double t = 4096;
  for (const char* loss : {"upcast_fp32", "fused", "chunked"}) {
    SCOPED_TRACE(loss);
    const Scenario sc = llama_with_loss(loss);
    const Schedule s = lower(sc);
    EXPECT_TRUE(check_schedule(s).empty());  // op sums equal their kernels'
    const double h = static_cast<double>(sc.model.transformer.hidden);
    const double v = static_cast<double>(sc.model.transformer.vocab);
    const bool chunked = sc.training.loss == LossRecipe::chunked;
    // The root's ops after the blocks, each pass: the head, (.float()) and the loss.
    double fwd_flops = 0, bwd_flops = 0, fwd_bytes = 0, bwd_bytes = 0;
    for (const Op& op : s.ops) {
      const std::string_view label = op_label(s, op);
      if (op.iteration != 0 || op.group != 0 || label == "embed") continue;
      if (op.kind == OpKind::forward) {
        fwd_flops += op.flops;
        fwd_bytes += static_cast<double>(op.bytes);
      } else if (op.kind == OpKind::backward) {
        bwd_flops += op.flops;
        bwd_bytes += static_cast<double>(op.bytes);
      }
    }
    // Forward: the projection and 5 FLOPs per logit; backward: its two gradient GEMMs and 3 per
    // logit, plus (chunked) the projection and the forward's 5 again.
    EXPECT_DOUBLE_EQ(fwd_flops, 2 * t * h * v + 5 * t * v);
    EXPECT_DOUBLE_EQ(bwd_flops, (chunked ? 6 : 4) * t * h * v + (chunked ? 8 : 3) * t * v);
    const double e = 2;
    const double forward_bytes = sc.training.loss == LossRecipe::fused ? e : e + 12;
    const double backward_bytes = sc.training.loss == LossRecipe::fused ? 2 * e
                                  : chunked                             ? 2 * e + 28
                                                                        : e + 16;
    EXPECT_DOUBLE_EQ(fwd_bytes, t * v * forward_bytes);
    EXPECT_DOUBLE_EQ(bwd_bytes, t * v * backward_bytes);
    if (sc.training.loss == LossRecipe::upcast_fp32) {  // the cast is its own op, as traced
      EXPECT_DOUBLE_EQ(static_cast<double>(first_op(s, OpKind::forward, "logits.float").bytes),
                       t * v * (e + 4));
    }
    if (chunked) {  // 32 chunks of 128 tokens: one GEMM shape repeated
      const auto k = op_kernels(s, first_op(s, OpKind::forward, "head"));
      ASSERT_EQ(std::get<Gemm>(k[0].shape).m, 128);
      EXPECT_EQ(k[0].repeat, 32);
    }
  }
}

TEST(LossRecipes, AShortLastChunkIsItsOwnKernel) {
  const Scenario sc = llama_with_loss("chunked", ", loss_chunk_tokens: 1000");
  const Schedule s = lower(sc);
  const auto k = op_kernels(s, first_op(s, OpKind::forward, "head"));
  ASSERT_GE(k.size(), 2U);
  EXPECT_EQ(std::get<Gemm>(k[0].shape).m, 1000);
  EXPECT_EQ(k[0].repeat, 4);
  EXPECT_EQ(std::get<Gemm>(k[1].shape).m, 96);  // 4,096 − 4 × 1,000
  EXPECT_EQ(k[1].label, "output.last_chunk");
}

TEST(LossRecipes, ChunkTokensNeedAChunkedLoss) {
  EXPECT_THROW(llama_with_loss("fused", ", loss_chunk_tokens: 512"), ValidationError);
  try {
    llama_with_loss("softmax");
    FAIL();
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("upcast_fp32, fused, chunked"), std::string::npos);
  }
}

// The chunked loss applies the output head after the root's forward: an FSDP2 root resharded
// after forward has only the weight's shard there (PyTorch fails on the DTensor).
TEST(LossRecipes, ChunkedLossNeedsTheRootUnshardedAfterForward) {
  const std::string fsdp2 =
      "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 2}\n"
      "training: {seq_len: 64, loss: chunked}\nfsdp: {api: fsdp2, reshard_root_after_forward: ";
  EXPECT_NO_THROW(scenario_from_text(fsdp2 + "false}\n", {}));
  try {
    scenario_from_text(fsdp2 + "true}\n", {});
    FAIL() << "a resharded root with the chunked loss was accepted";
  } catch (const ValidationError& e) {
    EXPECT_NE(std::string(e.what()).find("fsdp.reshard_root_after_forward"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("training.loss: upcast_fp32 or fused"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardscope
