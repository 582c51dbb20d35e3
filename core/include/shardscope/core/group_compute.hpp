#pragma once
// Compute and activation memory of each FSDP group, per micro-batch, on one rank.
//
// Transformer block (t = seq_len × micro_batch tokens, p = bytes per element of the compute
// dtype, h hidden, kv = kv_heads × head_dim, f ffn_hidden, s seq_len), flash attention (no s²
// term). Each pass is a list of kernels (transformer_kernels.cpp, conventions in kernel.hpp) and
// its FLOPs and bytes are their sums:
//   forward FLOPs  = 2·t·(linear weights) + 2·t·s·h  (causal attention: half of 4·t·s·h)
//   backward FLOPs = 2 × forward for matmuls (input and weight gradients); flash attention
//                    backward = 2.5 × its forward
//   elementwise HBM traffic (forward) = t·p·(16h + 2kv + 5f) + t·4·4h (norms in fp32, RoPE,
//       SiLU·mul or GELU, residual adds); backward twice that
//   all activations A = t·p·(6h + 2kv + M) + t·4·(heads + 2·norms)
//       (two norm inputs and outputs, q, k, v, attention output, MLP: M = 4f SwiGLU, 2f GELU;
//        fp32 log-sum-exp per head and norm statistics)
//   saved for backward:  none → A;  full → t·p·h (the block input);
//                        selective_op (torchtitan's policy: keep the outputs of attention and of
//                        every matmul but every second one) → block input + attention output +
//                        wq, wv, w1, w2 outputs = t·p·(4h + kv + f) + t·4·heads for SwiGLU
//                        (GELU: wq, wv, fc1 → t·p·(3h + kv + f) + t·4·heads);
//                        every_N → full on blocks with (index + 1) % N == 0, none elsewhere.
//   recomputed in backward: the rest of A, with the FLOPs of the matmuls not kept.
// Root: "embed" (token/position lookup) before the blocks, "head" (final norm, output
// projection) after them, and the loss after the root's post-forward ("logits.float", "loss":
// docs/semantics.md, "Loss recipes"), each tensor living as long as in real PyTorch.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "shardscope/core/kernel.hpp"
#include "shardscope/core/param_groups.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/small_vector.hpp"

namespace shardscope {

enum class ComputePosition {
  before_children,  // runs right after the group's pre-forward (root "embed", custom root)
  after_children,   // runs after the children's forward (root "head")
  after_root,       // runs after the root's post-forward, outside the model: the loss, which
                    // the training step computes from the model's output (backward: before the
                    // root's pre-backward hook, which fires on the output's gradient)
};

/// Sizes of an op's transient tensors: a few per op, kept inline (no allocation per group).
using WorkspaceSizes = SmallVector<Bytes, 4>;

/// The work of one pass (forward, backward or recompute) of a part: what its op carries.
struct PassCompute {
  Flops flops = 0;
  Flops attention_flops = 0;     // the part of `flops` in attention kernels, ≤ flops
  Bytes memory_bytes = 0;        // HBM traffic of memory-bound kernels
  std::int32_t kernels = kNone;  // index into ModelCompute::kernel_sets; kNone: not known (custom)
};

struct ComputePart {
  std::string label;
  ComputePosition position = ComputePosition::before_children;
  PassCompute forward;
  PassCompute backward;
  PassCompute recompute;             // forward re-run inside backward (activation checkpointing)
  Bytes saved_bytes = 0;             // kept from forward to backward
  WorkspaceSizes forward_workspace;  // tensors transient during the forward op
  Bytes recompute_bytes = 0;         // rematerialised before backward, freed by it
  // The same tensor by tensor, each its own allocation (their sum is recompute_bytes); empty:
  // one buffer of recompute_bytes.
  WorkspaceSizes recompute_tensors;
  // Autocast's low-precision weight copies that autograd does not save (checkpointed blocks):
  // held by autocast's cast cache until the forward ends under FSDP2, whose unsharded parameters
  // are cacheable leaves; freed after use under FSDP1, whose flat-parameter views are not cached
  // (docs/semantics.md, "Autocast"). Casts a non-checkpointed block saves are in saved_bytes.
  Bytes weight_casts = 0;
  Bytes largest_weight_cast = 0;      // the largest one of them: what FSDP1 holds at once
  WorkspaceSizes backward_workspace;  // tensors transient during the backward op
  std::optional<TimeNs> forward_time;
  std::optional<TimeNs> backward_time;
  BufferCategory saved_category = BufferCategory::activations;
  // Tensors one part's op hands to the next part's op of the same group, which frees them:
  // the forward's output, consumed by the next part's forward (the logits the loss reads), and
  // the backward's input gradient, consumed by the part before it (the loss's gradient of the
  // logits, which the head's GEMMs read). 0: nothing handed on.
  Bytes forward_output = 0;
  Bytes backward_output = 0;
  // The forward input this part receives is kept until its backward and handed back as the
  // gradient it writes in place (the fused cross-entropy's logits).
  bool input_becomes_grad = false;
  // The forward input is handed on with this part's output instead of freed (the training
  // step holds the logits, `pred`, until the loss is made: the cast does not free them).
  bool passes_input_on = false;
  // The parameters whose gradients this part's backward produces; -1: all of the group's.
  std::int64_t param_numel = -1;
};

struct GroupCompute {
  std::size_t first_part =
      0;  // its parts are ModelCompute::parts[first_part, first_part + part_count)
  std::size_t part_count = 0;  // 0 for a group without compute
  std::optional<TimeNs> all_gather_time;
  std::optional<TimeNs> reduce_scatter_time;
};

/// The compute of every group: the parts of all groups back to back, in group order (one table,
/// not a vector per group: a sweep builds this for every point), and the kernel sets their passes
/// name (identical blocks share one set).
struct ModelCompute {
  std::vector<GroupCompute> groups;
  std::vector<ComputePart> parts;
  std::vector<KernelSet> kernel_sets;

  std::span<const ComputePart> parts_of(std::size_t group) const {
    const GroupCompute& g = groups[group];
    return {parts.data() + g.first_part, g.part_count};
  }
};

/// The dtype compute runs in: training.autocast, else mixed_precision.param_dtype, else fp32.
DType compute_dtype(const Scenario& scenario);

/// The dtype autocast casts weights from: the unsharded parameters' (param_dtype, else fp32) when
/// training.autocast is set to another dtype; unset when nothing is cast.
std::optional<DType> autocast_cast_source(const Scenario& scenario);

/// The dtype FSDP2's root post-forward casts the logits to (MixedPrecisionPolicy.output_dtype,
/// _fsdp_state.py FSDPState._post_forward), or unset when no copy is made: not FSDP2, no
/// output_dtype, or the logits already in it. A chunked loss's root returns hidden states, not
/// logits; the scenario reader refuses a cast of those (docs/semantics.md, "Mixed-precision
/// casts").
std::optional<DType> root_output_cast(const Scenario& scenario);

/// One entry per group of `param_groups(scenario)`, same order.
ModelCompute group_compute(const Scenario& scenario, const std::vector<GroupLayout>& groups);

/// Saved activation bytes of one transformer block under a policy (exposed for tests and docs);
/// `tokens` per micro-batch in sequences of `seq_len` (math attention keeps s × s per sequence).
/// `cast_from` > 0: autocast casts from weights and a residual stream of that element size, so
/// the norms' inputs and outputs are in it and every projection saves its own cast input
/// (without the weight copies, which block_weight_cast_bytes gives).
Bytes block_saved_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                        Bytes elem, ActivationCheckpointing ac, Bytes cast_from = 0);
Bytes block_activation_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                             Bytes elem, Bytes cast_from = 0);
/// The tensors block_activation_bytes sums, each as PyTorch allocates it: the norms' inputs and
/// outputs (or autocast's casts of them), the MLP's, the norms' statistics, the attention's and
/// the dropout masks. `fp8_linears` (training.fp8: transformer_engine): each projection module
/// keeps the fp8 transpose of its input (one byte per element) instead of its input, the norms'
/// outputs and the MLP output projection's input are kept by no one else, and the output
/// projection keeps its fp8 copy of the attention's output beside the attention's own.
WorkspaceSizes block_saved_tensors(const TransformerConfig& c, std::int64_t tokens,
                                   std::int64_t seq_len, Bytes elem, Bytes cast_from = 0,
                                   bool fp8_linears = false);
/// What a block's forward holds at once at its largest moment, the MLP's intermediates: SwiGLU's
/// residual stream and FFN norm output (read by w1 and w3), silu's output, w3's output and their
/// product; GELU's residual stream, fc output and GELU's; under autocast (`cast_from` > 0) also
/// the projections' cast inputs.
Bytes block_mlp_transient_bytes(const TransformerConfig& c, std::int64_t tokens, Bytes elem,
                                Bytes cast_from = 0);
/// The same, tensor by tensor (each its own allocation in PyTorch: one buffer of their sum would
/// need a contiguous hole no real tensor needs, and leave segments the later tensors fit badly).
WorkspaceSizes block_mlp_transient_tensors(const TransformerConfig& c, std::int64_t tokens,
                                           Bytes elem, Bytes cast_from = 0);
/// What a block's backward holds beyond its saved tensors at its largest moment, as tensors: the
/// gradient flowing down the residual stream with, in turn, the MLP output projection's input
/// gradient (under autocast also the incoming gradient's cast), the activation's backward (GELU:
/// its input's gradient beside its output's, fc2's saved input released; SwiGLU: silu's and w3's
/// output gradients beside the product's, w2's saved input released), and the attention's
/// backward once the MLP's saved tensors are released (q's, k's and v's gradients; math: the
/// probabilities' and the scores'). Autograd frees a node's saved tensors after its backward and
/// a checkpoint's recomputed tensors as they are unpacked, so the moment's released saved tensors
/// come off its gradients (the largest first); weight gradients are not counted here.
WorkspaceSizes block_backward_workspace(const TransformerConfig& c, std::int64_t tokens,
                                        std::int64_t seq_len, Bytes elem, Bytes cast_from = 0);
/// Autocast's copies of one block's projection weights and biases in the `elem`-sized dtype.
Bytes block_weight_cast_bytes(const TransformerConfig& c, Bytes elem);
/// TransformerEngine's fp8 transposes of one block's projection weights, one per module (a fused
/// qkv projection is one), one byte per element: each fp8 Linear saves its own for backward.
WorkspaceSizes block_fp8_weight_tensors(const TransformerConfig& c);

/// Tokens per chunk of a chunked loss: training.loss_chunk_tokens, else Liger's default (its
/// fused_linear_cross_entropy: the next power of two of ⌈tokens ÷ ⌈vocab ÷ hidden⌉⌉, so a chunk's
/// logits are about the size of the head's input), at most the micro-batch's tokens.
std::int64_t loss_chunk_tokens(const TransformerConfig& c, const TrainingSpec& t);

}  // namespace shardscope
