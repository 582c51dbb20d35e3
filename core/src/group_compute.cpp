#include "shardscope/core/group_compute.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "transformer_kernels.hpp"

namespace shardscope {
namespace {

// Interns kernel sets: every group of n identical blocks shares one set per pass.
class KernelSetTable {
 public:
  explicit KernelSetTable(std::vector<KernelSet>& sets) : sets_(sets) {}

  /// The pass that runs `kernels` `times` over: its set's index and totals.
  PassCompute pass(const KernelSet& kernels, std::int64_t times) {
    const auto key = std::make_pair(&kernels, times);
    if (const auto it = seen_.find(key); it != seen_.end()) return it->second;
    return seen_[key] = add(detail::repeated(kernels, times));
  }
  PassCompute pass(KernelSet kernels) { return add(std::move(kernels)); }

 private:
  PassCompute add(KernelSet kernels) {
    const KernelTotals totals = kernel_set_totals(kernels);
    sets_.push_back(std::move(kernels));
    return {totals.flops, totals.attention_flops, totals.memory_bytes,
            static_cast<std::int32_t>(sets_.size() - 1)};
  }

  std::vector<KernelSet>& sets_;
  std::map<std::pair<const KernelSet*, std::int64_t>, PassCompute> seen_;
};

ComputePart embed_part(const detail::BlockShape& shape, KernelSetTable& kernels) {
  ComputePart embed;
  embed.label = "embed";
  embed.position = ComputePosition::before_children;
  embed.forward = kernels.pass(detail::embed_forward_kernels(shape));
  embed.backward = kernels.pass(detail::embed_backward_kernels(shape));
  // The embedding dropout's mask (bool), kept for its backward.
  if (shape.config.dropout > 0) embed.saved_bytes = shape.tokens() * shape.config.hidden;
  return embed;
}

ComputePart head_part(const detail::BlockShape& shape, const TrainingSpec& training,
                      KernelSetTable& kernels) {
  const detail::LossShape loss{training.loss, training.loss == LossRecipe::chunked
                                                  ? loss_chunk_tokens(shape.config, training)
                                                  : shape.tokens()};
  LossMemory memory = loss_memory(shape.config, training, shape.dtype);
  if (shape.cast_from) {
    // Autocast: the final norm's input and output stay in the residual stream's dtype, the
    // head's matmul saves its cast input and the cast output weight (for its input gradient).
    const std::int64_t t = shape.tokens(), h = shape.config.hidden;
    const Bytes e = bytes_per_element(shape.dtype), from = bytes_per_element(*shape.cast_from);
    memory.saved += 2 * t * h * (from - e) + t * h * e + shape.config.vocab * h * e;
  }
  ComputePart head;
  head.label = "head+loss";
  head.position = ComputePosition::after_children;
  head.forward = kernels.pass(detail::head_forward_kernels(shape, loss));
  head.backward = kernels.pass(detail::head_backward_kernels(shape, loss));
  head.saved_bytes = memory.saved;
  head.saved_category = BufferCategory::logits;
  head.forward_workspace = std::move(memory.forward_workspace);
  head.backward_workspace = std::move(memory.backward_workspace);
  return head;
}

bool block_fully_checkpointed(const TrainingSpec& t, std::int64_t block) {
  if (t.activation_checkpointing == ActivationCheckpointing::full) return true;
  if (t.activation_checkpointing == ActivationCheckpointing::every_n)
    return (block + 1) % t.checkpoint_every == 0;
  return false;
}

// Elements of math attention's [micro_batch, heads, s, s] scores (tokens = micro_batch · s); the
// scenario reader bounds this product.
std::int64_t attention_probabilities(const TransformerConfig& c, std::int64_t tokens,
                                     std::int64_t seq_len) {
  return tokens * c.heads * seq_len;
}

// What the attention keeps for its backward besides q, k, v and its output: flash, the fp32
// log-sum-exp per head and token; math, softmax's output, the probabilities.
Bytes attention_saved_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                            Bytes elem) {
  return c.attention == AttentionKind::flash ? tokens * 4 * c.heads
                                             : attention_probabilities(c, tokens, seq_len) * elem;
}

// Dropout's saved masks (bool, one byte per element): the two residual dropouts; under math
// attention also the probabilities' mask and the dropped probabilities (attn @ v saves its
// input). Flash attention keeps only its RNG state.
Bytes block_dropout_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                          Bytes elem) {
  if (c.dropout <= 0) return 0;
  const Bytes residual = 2 * tokens * c.hidden;
  return c.attention == AttentionKind::flash
             ? residual
             : residual + attention_probabilities(c, tokens, seq_len) * (1 + elem);
}

}  // namespace

DType compute_dtype(const Scenario& s) {
  return s.training.autocast.value_or(s.fsdp.mixed_precision.param_dtype.value_or(DType::fp32));
}

std::optional<DType> autocast_cast_source(const Scenario& s) {
  const DType weights = s.fsdp.mixed_precision.param_dtype.value_or(DType::fp32);
  if (!s.training.autocast || *s.training.autocast == weights) return std::nullopt;
  return weights;
}

namespace {

// What the MLP saves for backward per token, by MLP kind.
Bytes mlp_saved_bytes_per_token(const TransformerConfig& c, Bytes elem, Bytes cast_from) {
  const std::int64_t f = c.ffn_hidden;
  switch (c.mlp) {
    case MlpKind::swiglu:  // w1 and w3 outputs, silu's output, the product (w2's input)
      return 4 * f * elem;
    case MlpKind::gelu:  // fc's output (GELU's input), GELU's output (the second fc's input)
      return 2 * f * elem;
    case MlpKind::gelu_new:
      // 0.5·x·(1 + tanh(c·(x + 0.044715·pow(x, 3)))): pow saves its input, tanh its output,
      // the last product both factors; under autocast pow casts x to fp32 (its fp32 list), so
      // everything after it is fp32 and the second fc saves its own cast input.
      return cast_from > 0 ? f * (4 + 4 + elem + 4 + elem) : 5 * f * elem;
  }
  return 0;
}

}  // namespace

Bytes block_activation_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                             Bytes elem, Bytes cast_from) {
  const std::int64_t h = c.hidden, kv = c.kv_dim();
  const std::int64_t norm_stats =
      c.norm == NormKind::layernorm ? 4 : 2;  // mean+rstd or rstd, two norms
  // The two norms' inputs and outputs are in the residual stream's dtype (with a parallel
  // residual both norms read the block input: three tensors); under autocast each projection
  // casts the norm output it reads and saves that copy.
  const Bytes residual = cast_from > 0 ? cast_from : elem;
  const std::int64_t norm_tensors = c.parallel_residual ? 3 : 4;
  const std::int64_t cast_inputs = cast_from > 0 ? detail::projection_inputs(c) * h : 0;
  return tokens * residual * norm_tensors * h + tokens * elem * (2 * h + 2 * kv + cast_inputs) +
         tokens * mlp_saved_bytes_per_token(c, elem, cast_from) + tokens * 4 * norm_stats +
         attention_saved_bytes(c, tokens, seq_len, elem) +
         block_dropout_bytes(c, tokens, seq_len, elem);
}

Bytes block_saved_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                        Bytes elem, ActivationCheckpointing ac, Bytes cast_from) {
  const std::int64_t h = c.hidden;
  const Bytes residual = cast_from > 0 ? cast_from : elem;  // the block input's dtype
  switch (ac) {
    case ActivationCheckpointing::none:
    case ActivationCheckpointing::every_n:
      return block_activation_bytes(c, tokens, seq_len, elem, cast_from);
    case ActivationCheckpointing::full:
      return tokens * residual * h;
    case ActivationCheckpointing::selective_op: {
      // block input + attention output (+ what the attention keeps) + the saved linears' outputs
      // (without biases: wq, wv, w1, w2 | wq, wv, fc1; detail::selective_linears); dropout
      // masks and autocast's casts are recomputed
      const std::int64_t kept = detail::selective_saved_width(c);
      return tokens * residual * h + tokens * elem * (h + kept) +
             attention_saved_bytes(c, tokens, seq_len, elem);
    }
  }
  return 0;
}

Bytes block_weight_cast_bytes(const TransformerConfig& c, Bytes elem) {
  return detail::block_projection_params(c) * elem;
}

std::int64_t loss_chunk_tokens(const TransformerConfig& c, const TrainingSpec& t) {
  const std::int64_t tokens = t.tokens_per_microbatch();
  if (t.loss_chunk_tokens > 0) return std::min(t.loss_chunk_tokens, tokens);
  const std::int64_t inc_factor = (c.vocab + c.hidden - 1) / c.hidden;
  const auto chunk = static_cast<std::uint64_t>((tokens + inc_factor - 1) / inc_factor);
  return std::min(static_cast<std::int64_t>(std::bit_ceil(chunk)), tokens);
}

// The sizes follow the PyTorch code paths docs/semantics.md ("Loss recipes") walks through; e is
// the compute dtype's element size, t tokens, V the vocabulary, c a chunk's tokens.
LossMemory loss_memory(const TransformerConfig& c, const TrainingSpec& training, DType dtype) {
  const std::int64_t t = training.tokens_per_microbatch(), vocab = c.vocab;
  const Bytes e = bytes_per_element(dtype);
  const Bytes norm = 2 * t * c.hidden * e;  // the final norm's input and output (the head's input)
  const Bytes lse = t * 4;                  // fp32 log-sum-exp per token
  LossMemory m;
  switch (training.loss) {
    case LossRecipe::upcast_fp32:
      m.saved = t * vocab * 4 + norm;                        // log_softmax's fp32 output
      m.forward_workspace = {t * vocab * e, t * vocab * 4};  // logits, their fp32 copy
      m.backward_workspace = {t * vocab * 4, t * vocab * 4, t * vocab * e};  // nll and
      // log_softmax gradients, the cast back
      break;
    case LossRecipe::fused:
      m.saved = t * vocab * e + lse + norm;  // the logits, overwritten by their gradient
      break;
    case LossRecipe::chunked: {
      const std::int64_t chunk = loss_chunk_tokens(c, training);
      m.saved = lse + norm;
      m.forward_workspace = {chunk * vocab * e, chunk * vocab * 4, chunk * vocab * 4};
      // The chunk's forward again (logits, fp32 copy, log_softmax), then upcast_fp32's backward.
      m.backward_workspace = {chunk * vocab * (e + 4 + 4), chunk * vocab * 4, chunk * vocab * 4,
                              chunk * vocab * e};
      break;
    }
  }
  return m;
}

ModelCompute group_compute(const Scenario& s, const std::vector<GroupLayout>& groups) {
  ModelCompute out;
  out.groups.resize(groups.size());
  out.parts.reserve(groups.size() + 1);  // one part per group, two for a transformer's root
  // Appends group i's parts (groups come in order, so a group's parts are contiguous).
  const auto add_part = [&](std::size_t i, ComputePart part) {
    if (out.groups[i].part_count == 0) out.groups[i].first_part = out.parts.size();
    ++out.groups[i].part_count;
    out.parts.push_back(std::move(part));
  };
  const std::int64_t t = s.training.tokens_per_microbatch();
  const Bytes elem = bytes_per_element(compute_dtype(s));
  const std::optional<DType> cast_from = autocast_cast_source(s);
  const Bytes from = cast_from ? bytes_per_element(*cast_from) : 0;
  if (s.model.family == ModelFamily::custom) {
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].custom_index < 0) continue;  // implicit root: no compute
      const auto& cg = s.model.groups[static_cast<std::size_t>(groups[i].custom_index)];
      ComputePart part;
      part.label = cg.name;
      part.forward.flops = cg.forward_flops.value_or(0);
      part.backward.flops = cg.backward_flops.value_or(2 * part.forward.flops);
      part.saved_bytes = cg.activation_bytes;
      part.forward_time = cg.forward_time;
      part.backward_time = cg.backward_time;
      add_part(i, std::move(part));
      out.groups[i].all_gather_time = cg.all_gather_time;
      out.groups[i].reduce_scatter_time = cg.reduce_scatter_time;
    }
    return out;
  }
  const auto& c = s.model.transformer;
  const detail::BlockShape shape{c, s.training.micro_batch, s.training.seq_len, compute_dtype(s),
                                 cast_from};
  KernelSetTable kernels(out.kernel_sets);
  // Every block is the same: its kernels and sizes once (a sweep lowers thousands of 126-block
  // models); a group of n blocks runs each kernel n times.
  const KernelSet block_forward = detail::block_forward_kernels(shape);
  const KernelSet block_backward = detail::block_backward_kernels(shape);
  const KernelSet block_sac = detail::block_selective_recompute_kernels(shape);
  const KernelSet block_full_recompute = detail::block_full_recompute_kernels(shape);
  const std::int64_t seq = s.training.seq_len;
  const Bytes all = block_activation_bytes(c, t, seq, elem, from);
  const Bytes sac_saved =
      block_saved_bytes(c, t, seq, elem, ActivationCheckpointing::selective_op, from);
  const Bytes full_saved = block_saved_bytes(c, t, seq, elem, ActivationCheckpointing::full, from);
  // Autocast's weight copies: saved with the activations of a block that keeps them, held by the
  // cast cache or freed after use in a checkpointed one, and cast again by its recompute.
  const Bytes casts = cast_from ? block_weight_cast_bytes(c, elem) : 0;
  // Gradients flowing through one block: hidden-sized, kv-sized and ffn-sized pairs; under math
  // attention also the probabilities' and the scores' gradients ([b, heads, s, s] each).
  WorkspaceSizes block_workspace{t * elem * 2 * c.hidden, t * elem * 2 * c.kv_dim(),
                                 t * elem * 2 * c.ffn_hidden};
  // Math attention's forward: the scores, then the causally masked scores (masked_fill is out of
  // place), before softmax writes the probabilities it saves.
  WorkspaceSizes block_forward_workspace;
  if (c.attention == AttentionKind::math) {
    const Bytes scores = attention_probabilities(c, t, seq) * elem;
    block_workspace.push_back(scores);
    block_workspace.push_back(scores);
    block_forward_workspace = {scores, scores};
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    if (g.is_root) {
      add_part(i, embed_part(shape, kernels));
      add_part(i, head_part(shape, s.training, kernels));
      continue;
    }
    ComputePart part;
    part.label = g.block_count == 1 ? "block" : "blocks";
    if (g.block_count > 0) {
      part.forward = kernels.pass(block_forward, g.block_count);
      part.backward = kernels.pass(block_backward, g.block_count);
      part.forward_workspace = block_forward_workspace;
      part.backward_workspace = block_workspace;
    }
    std::int64_t checkpointed = 0;
    for (std::int64_t b = g.first_block; b < g.first_block + g.block_count; ++b)
      checkpointed += block_fully_checkpointed(s.training, b) ? 1 : 0;
    if (checkpointed > 0) {  // full or every_n: the rest of the blocks keep everything
      part.saved_bytes = checkpointed * full_saved + (g.block_count - checkpointed) * (all + casts);
      part.weight_casts = checkpointed * casts;
      part.recompute = kernels.pass(block_full_recompute, checkpointed);
      part.recompute_bytes = checkpointed * (all + casts);
    } else if (s.training.activation_checkpointing == ActivationCheckpointing::selective_op) {
      part.saved_bytes = g.block_count * sac_saved;
      part.weight_casts = g.block_count * casts;
      part.recompute = kernels.pass(block_sac, g.block_count);
      part.recompute_bytes = g.block_count * (all - sac_saved + casts);
    } else {
      part.saved_bytes = g.block_count * (all + casts);
    }
    add_part(i, std::move(part));
  }
  return out;
}

}  // namespace shardscope
