#pragma once

#include <array>
// The kernels of a transformer's compute parts (private to core: group_compute builds the parts
// from them, so a part's FLOPs and bytes are its kernels' sums). Formulas: group_compute.hpp.

#include <cstdint>
#include <optional>
#include <vector>

#include "shardscope/core/kernel.hpp"
#include "shardscope/core/model_spec.hpp"

namespace shardscope::detail {

/// One micro-batch of one transformer block, in the compute dtype.
struct BlockShape {
  const TransformerConfig& config;
  std::int64_t micro_batch = 1;  // sequences
  std::int64_t seq_len = 0;
  DType dtype = DType::bf16;
  // Under autocast, the dtype the weights are cast from (per use in forward, the weight gradient
  // back to it in backward); unset when the weights are already in `dtype`.
  std::optional<DType> cast_from;
  // The positions each token attends to: 0 for seq_len (training, prefill); a decode step's one
  // token (seq_len 1) attends to the whole KV cache, unmasked.
  std::int64_t kv_len = 0;
  // The block's projections are TransformerEngine fp8 Linear modules (training.fp8): fp8 GEMMs
  // and TE's casts instead of autocast's. The output head never is.
  bool fp8_linears = false;

  std::int64_t tokens() const { return micro_batch * seq_len; }
  std::int64_t keys() const { return kv_len > 0 ? kv_len : seq_len; }
  bool causal() const { return keys() == seq_len; }
};

/// Whether q, k and v come from one fused projection (GPT-style blocks: GPT-2 c_attn, GPT-NeoX
/// query_key_value, MPT Wqkv) rather than three (Llama-style SwiGLU blocks).
bool fused_qkv(const TransformerConfig& c);
/// Projections that read a norm's output (each casts its own copy under autocast): Llama-style
/// SwiGLU blocks have separate q, k, v projections and w1, w3 (5); GPT-style GELU blocks one
/// fused qkv projection (GPT-2 c_attn, GPT-NeoX query_key_value, MPT Wqkv) and one fc (2).
std::int64_t projection_inputs(const TransformerConfig& c);
/// A block's projection weights and biases (what autocast casts per use).
std::int64_t block_projection_params(const TransformerConfig& c);
/// Each projection's weight elements in forward order, a fused qkv as one: the separate
/// parameters (and gradients) a block's linears have.
std::vector<std::int64_t> projection_weight_numels(const TransformerConfig& c);
/// The largest of them: the most autocast's casts hold at once when each is freed after its use.
std::int64_t largest_projection_params(const TransformerConfig& c);

/// Every kernel of a block's forward: q, k, v projections, attention, output projection, MLP,
/// and one memory-bound kernel for norms, RoPE, the MLP activation and residual adds.
KernelSet block_forward_kernels(const BlockShape& b);
/// Input- and weight-gradient GEMMs of every matmul, the attention backward and twice the
/// forward's memory-bound traffic, in the order backward runs them.
KernelSet block_backward_kernels(const BlockShape& b);
/// What torchtitan's selective-op policy (its _op_sac_save_list) does with a block's linears, in
/// forward order: it saves the output of every second `aten.mm` (the 1st, 3rd, ...) and
/// recomputes the rest; a linear with a bias runs as `aten.addmm`, which the list does not name,
/// so it is always recomputed and not counted. torch.utils.checkpoint stops the recompute after
/// the last tensor backward needs (early stop, on by default), so a recomputed last linear (the
/// MLP's output projection, whose output no backward reads) does not run again.
struct SelectiveLinears {
  std::array<bool, 7> saved{};       // its output is kept from forward
  std::array<bool, 7> recomputed{};  // it runs again in backward
  std::size_t count = 0;
};
SelectiveLinears selective_linears(const TransformerConfig& c);
/// The elements of the saved linears' outputs per token.
std::int64_t selective_saved_width(const TransformerConfig& c);
/// What the selective-op policy recomputes: the linears selective_linears names and the
/// memory-bound kernels up to the MLP's output (not the residual add after it: early stop).
KernelSet block_selective_recompute_kernels(const BlockShape& b);
/// A fully checkpointed block's recompute: its forward up to the last tensor backward needs.
/// torch.utils.checkpoint stops recomputing there (early stop, on by default), so the MLP's
/// output projection and the residual add after it do not run again.
KernelSet block_full_recompute_kernels(const BlockShape& b);

/// How the loss runs: its recipe and, when chunked, the tokens per chunk (otherwise all).
struct LossShape {
  LossRecipe recipe = LossRecipe::upcast_fp32;
  std::int64_t chunk_tokens = 0;
};

/// The root's "embed" (lookup; backward a scatter-add into the embedding gradient), its output
/// projection (per chunk under a chunked loss), the upcast of the logits to fp32
/// (upcast_fp32's `.float()`) and the cross-entropy (by recipe; chunked: the projection again
/// per chunk in backward, before the loss's gradient).
KernelSet embed_forward_kernels(const BlockShape& b);
KernelSet embed_backward_kernels(const BlockShape& b);
KernelSet output_forward_kernels(const BlockShape& b, const LossShape& loss);
KernelSet output_backward_kernels(const BlockShape& b, const LossShape& loss);
KernelSet upcast_kernels(const BlockShape& b, bool backward);
KernelSet loss_forward_kernels(const BlockShape& b, const LossShape& loss);
KernelSet loss_backward_kernels(const BlockShape& b, const LossShape& loss);

/// `kernels` with every repeat multiplied by `times` (a group of `times` identical blocks).
KernelSet repeated(KernelSet kernels, std::int64_t times);

}  // namespace shardscope::detail
