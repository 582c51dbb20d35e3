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

// The root's parameters by where their gradients come from: the embedding lookup's backward
// (token embedding, learned position table) and the head's (final norm, untied output head;
// a tied head's gradient is the token embedding's, accumulated by the lookup's backward).
struct RootParams {
  std::int64_t embedding = 0;
  std::int64_t head = 0;
};

RootParams root_params(const TransformerConfig& c) {
  RootParams p;
  p.embedding =
      c.vocab * c.hidden + (c.pos_emb == PosEmbedding::learned ? c.max_seq * c.hidden : 0);
  const std::int64_t norm = is_layernorm(c.norm) && c.norm_bias ? 2 * c.hidden : c.hidden;
  p.head = norm + c.vocab * c.hidden;  // tied: the shared weight's gradient starts here
  if (c.tie_embeddings) p.embedding -= c.vocab * c.hidden;
  return p;
}

ComputePart embed_part(const detail::BlockShape& shape, KernelSetTable& kernels) {
  const TransformerConfig& c = shape.config;
  ComputePart embed;
  embed.label = "embed";
  embed.position = ComputePosition::before_children;
  embed.forward = kernels.pass(detail::embed_forward_kernels(shape));
  embed.backward = kernels.pass(detail::embed_backward_kernels(shape));
  // The embedding dropout's mask (bool), kept for its backward.
  if (c.dropout > 0) embed.saved_bytes = shape.tokens() * c.hidden;
  embed.param_numel = root_params(c).embedding;
  // A tied weight's two gradients meet in autograd's input buffer: the lookup's is made, added
  // out of place to the head's, and freed.
  if (c.tie_embeddings) {
    const Bytes grad = c.vocab * c.hidden * bytes_per_element(shape.dtype);
    embed.backward_workspace = {grad, grad};
  }
  return embed;
}

// The output head and the loss, in the order PyTorch runs their kernels (docs/semantics.md,
// "Loss recipes"), each part one op, so each tensor lives exactly as long as it does there.
// `logits`: the dtype the loss receives the logits in, the compute dtype unless FSDP2 casts the
// root's output (root_output_cast); the cast itself is the lowerer's, in the root's post-forward.
std::vector<ComputePart> head_parts(const detail::BlockShape& shape, const TrainingSpec& training,
                                    DType logits, KernelSetTable& kernels) {
  const TransformerConfig& c = shape.config;
  const detail::LossShape loss{training.loss, training.loss == LossRecipe::chunked
                                                  ? loss_chunk_tokens(c, training)
                                                  : shape.tokens()};
  const std::int64_t t = shape.tokens(), h = c.hidden, vocab = c.vocab;
  const Bytes e = bytes_per_element(shape.dtype);
  ComputePart head;
  head.label = "head";
  head.position = ComputePosition::after_children;
  head.forward = kernels.pass(detail::output_forward_kernels(shape, loss));
  head.backward = kernels.pass(detail::output_backward_kernels(shape, loss));
  head.param_numel = root_params(c).head;
  // The final norm's input and output (the head's input).
  head.saved_bytes = 2 * t * h * e;
  if (shape.cast_from) {
    // Autocast: the final norm keeps its input in the residual stream's dtype (a low-precision
    // LayerNorm its own low-precision copy); the head's matmul keeps its cast input (not the
    // norm's output; or the low-precision norm's output itself) and the cast output weight (for
    // its input gradient).
    const Bytes from =
        c.norm == NormKind::low_precision_layernorm ? e : bytes_per_element(*shape.cast_from);
    head.saved_bytes = t * h * from + t * h * e + vocab * h * e;
  }
  // Written as ops (block_saved_tensors), the norm also keeps its normalised tensor in its
  // input's dtype and, for a low-precision input, an fp32 copy of it in place of the input.
  if (c.norm == NormKind::unfused_rmsnorm)
    head.saved_bytes += shape.cast_from ? t * h * bytes_per_element(*shape.cast_from) : t * h * 4;
  // The loss reads the logits in their (possibly cast) dtype.
  const detail::BlockShape loss_shape{c, shape.micro_batch, shape.seq_len, logits, shape.cast_from};
  ComputePart lossp;
  lossp.label = "loss";
  lossp.position = ComputePosition::after_root;
  lossp.forward = kernels.pass(detail::loss_forward_kernels(loss_shape, loss));
  lossp.backward = kernels.pass(detail::loss_backward_kernels(loss_shape, loss));
  lossp.param_numel = 0;
  lossp.saved_category = BufferCategory::logits;
  const Bytes lse = t * 4;  // fp32 log-sum-exp per token
  head.forward_output = t * vocab * e;
  switch (training.loss) {
    case LossRecipe::upcast_fp32: {
      if (logits == DType::fp32) {
        // fp32 logits: .float() is the tensor itself, no copy and no cast back.
        lossp.saved_bytes = t * vocab * 4;
        lossp.backward_workspace = {t * vocab * 4};
        lossp.backward_output = t * vocab * 4;
        return {std::move(head), std::move(lossp)};
      }
      // logits = head(x) → logits.float() → log_softmax, saved → nll_loss; the training step
      // holds the logits until the loss is made (torchtitan's `pred`, deleted before
      // backward), so the logits, their fp32 copy and log_softmax's output are live at once.
      // Backward: nll_loss_backward writes a dense fp32 gradient,
      // _log_softmax_backward_data another (then both the first and the saved output go),
      // ToCopyBackward casts it back (then it goes), and the head's GEMMs read that.
      ComputePart upcast;
      upcast.label = "logits.float";
      upcast.position = ComputePosition::after_root;
      upcast.forward = kernels.pass(detail::upcast_kernels(loss_shape, false));
      upcast.backward = kernels.pass(detail::upcast_kernels(loss_shape, true));
      upcast.param_numel = 0;
      upcast.forward_output = t * vocab * 4;
      upcast.passes_input_on = true;
      upcast.backward_output = t * vocab * bytes_per_element(logits);
      lossp.saved_bytes = t * vocab * 4;
      lossp.backward_workspace = {t * vocab * 4};
      lossp.backward_output = t * vocab * 4;
      return {std::move(head), std::move(upcast), std::move(lossp)};
    }
    case LossRecipe::fused:
      // One kernel reads the logits for the loss and the per-token log-sum-exp; the logits are
      // kept and overwritten with their gradient, which the head's GEMMs read.
      lossp.input_becomes_grad = true;
      lossp.saved_bytes = lse;
      return {std::move(head), std::move(lossp)};
    case LossRecipe::chunked: {
      // A checkpointed loop over chunks of c tokens, each the upcast_fp32 recipe on its own
      // logits: forward at most the chunk's fp32 copy and log_softmax output at once; backward
      // the recomputed output and the two fp32 gradients. The head's weight gradient sums the
      // chunks' in autograd's input buffer, out of place: the sum so far, the new chunk's and
      // their sum at once; the input gradient likewise, a zero-padded slice per chunk.
      const std::int64_t chunk = loss.chunk_tokens;
      head.forward_output = 0;  // no full logits: the loss applies the head
      lossp.saved_bytes = lse;
      lossp.forward_workspace = {chunk * vocab * 4, chunk * vocab * 4};
      lossp.backward_workspace = {chunk * vocab * 4, chunk * vocab * 4, chunk * vocab * 4};
      const Bytes weight_grad = vocab * h * e;
      head.backward_workspace = {weight_grad, weight_grad, t * h * e, t * h * e};
      head.position = ComputePosition::after_root;  // the loss applies the head per chunk
      return {std::move(head), std::move(lossp)};
    }
  }
  return {};
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

// Math SDPA computes a bf16 or fp16 attention in fp32 (_scaled_dot_product_attention_math upcasts
// q, k and v unless torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True), off by
// default, on every device).
Bytes math_attention_elem(Bytes elem) {
  return std::max<Bytes>(elem, 4);
}

}  // namespace

DType compute_dtype(const Scenario& s) {
  return s.training.autocast.value_or(param_dtype(s.fsdp.mixed_precision));
}

std::optional<DType> root_output_cast(const Scenario& s) {
  const auto& mp = s.fsdp.mixed_precision;
  if (s.fsdp.api != FsdpApi::fsdp2 || s.model.family != ModelFamily::transformer ||
      !mp.output_dtype || s.training.loss == LossRecipe::chunked)
    return std::nullopt;
  if (*mp.output_dtype == compute_dtype(s)) return std::nullopt;  // _cast_fp_tensor: no copy
  return mp.output_dtype;
}

std::optional<DType> autocast_cast_source(const Scenario& s) {
  const DType weights = param_dtype(s.fsdp.mixed_precision);
  if (!s.training.autocast || *s.training.autocast == weights) return std::nullopt;
  return weights;
}

namespace {

Bytes total_bytes(const WorkspaceSizes& tensors) {
  Bytes sum = 0;
  for (Bytes b : tensors) sum += b;
  return sum;
}

// What the MLP saves for backward, tensor by tensor, by MLP kind.
void append_mlp_saved(WorkspaceSizes& out, const TransformerConfig& c, std::int64_t tokens,
                      Bytes elem, Bytes cast_from) {
  const Bytes f = tokens * c.ffn_hidden;
  const auto add = [&](std::initializer_list<Bytes> element_sizes) {
    for (Bytes e : element_sizes) out.push_back(f * e);
  };
  switch (c.mlp) {
    case MlpKind::swiglu:  // w1 and w3 outputs, silu's output, the product (w2's input)
      add({elem, elem, elem, elem});
      return;
    case MlpKind::gelu:  // fc's output (GELU's input), GELU's output (the second fc's input)
      add({elem, elem});
      return;
    case MlpKind::gelu_new:
      // 0.5·x·(1 + tanh(c·(x + 0.044715·pow(x, 3)))): pow saves its input, tanh its output,
      // the last product both factors; under autocast pow casts x to fp32 (its fp32 list), so
      // everything after it is fp32 and the second fc saves its own cast input.
      if (cast_from > 0) {
        add({4, 4, elem, 4, elem});
      } else {
        add({elem, elem, elem, elem, elem});
      }
      return;
  }
}

}  // namespace

WorkspaceSizes block_saved_tensors(const TransformerConfig& c, std::int64_t tokens,
                                   std::int64_t seq_len, Bytes elem, Bytes cast_from,
                                   bool fp8_linears) {
  const std::int64_t h = c.hidden, kv = c.kv_dim();
  // The two norms keep their inputs (with a parallel residual both read the block input: one
  // tensor) and the projections reading them keep their outputs: four tensors (three) in the
  // residual stream's dtype. Under autocast each projection casts the norm output it reads and
  // keeps that copy instead, so the norms' outputs are not kept. A low-precision LayerNorm under
  // autocast keeps its own low-precision copy of its input and returns a low-precision output,
  // which the projections keep as they are (one tensor for those that share it): as without
  // autocast, in the low precision.
  const bool cast_norms = cast_from > 0 && c.norm != NormKind::low_precision_layernorm;
  const Bytes norm_elem = cast_norms ? cast_from : elem;
  const std::int64_t norm_inputs = c.parallel_residual ? 1 : 2;
  // TransformerEngine's fp8 Linear keeps the fp8 transpose of its own input instead: one byte
  // per element, one per module reading a norm's output.
  constexpr Bytes kFp8 = 1;
  WorkspaceSizes out;
  if (c.norm == NormKind::unfused_rmsnorm) {
    // The ops of each norm keep pow's fp32 input (x.float(): a copy of a low-precision input for
    // each norm; under autocast the fp32 input itself) and, for the weight's product, the
    // normalised tensor in the input's dtype. On the CPU PyTorch keeps exactly these
    // (tests/pytorch/memory_oracle.py, the llama-unfused rows).
    const std::int64_t fp32_inputs = cast_norms ? norm_inputs : 2;
    for (std::int64_t i = 0; i < fp32_inputs; ++i) out.push_back(tokens * 4 * h);
    for (int norm = 0; norm < 2; ++norm) out.push_back(tokens * norm_elem * h);
  } else {
    for (std::int64_t i = 0; i < norm_inputs; ++i) out.push_back(tokens * norm_elem * h);
  }
  if (cast_norms || fp8_linears) {
    for (std::int64_t i = 0; i < detail::projection_inputs(c); ++i)
      out.push_back(tokens * (fp8_linears ? kFp8 : elem) * h);
  } else {
    for (int norm = 0; norm < 2; ++norm) out.push_back(tokens * elem * h);  // the norms' outputs
  }
  append_mlp_saved(out, c, tokens, elem, cast_from);
  // The last tensor the MLP saves is its output projection's input, which only that projection
  // keeps.
  if (fp8_linears) out[out.size() - 1] = tokens * c.ffn_hidden * kFp8;
  // Per norm its fp32 statistics: LayerNorm's mean and rstd, RMSNorm's rstd.
  const std::int64_t stats = is_layernorm(c.norm) ? 4 : 2;
  for (std::int64_t i = 0; i < stats; ++i) out.push_back(tokens * 4);
  // What the attention keeps for its backward. Flash: q (after RoPE), k and v at their own heads
  // (GQA through enable_gqa), its output (the output projection's input, a view of it) and the
  // fp32 log-sum-exp per head and token. Math, in fp32: q scaled, k and v repeated to every head,
  // softmax's probabilities, and the output cast back (the output projection's input).
  if (fused_attention(c.attention)) {
    for (Bytes b : {tokens * elem * h, tokens * elem * kv, tokens * elem * kv, tokens * elem * h,
                    tokens * 4 * c.heads})
      out.push_back(b);
    if (fp8_linears) out.push_back(tokens * kFp8 * h);  // the output projection's fp8 input
  } else {
    const Bytes acc = math_attention_elem(elem);
    for (Bytes b : {tokens * acc * h, tokens * acc * h, tokens * acc * h,
                    attention_probabilities(c, tokens, seq_len) * acc,
                    tokens * (fp8_linears ? kFp8 : elem) * h})
      out.push_back(b);
  }
  // Dropout's saved masks (bool, one byte per element): the two residual dropouts; under math
  // attention also the probabilities' mask and the dropped probabilities (attn @ v saves its
  // input). Flash attention keeps only its RNG state.
  if (c.dropout > 0) {
    out.push_back(tokens * h);
    out.push_back(tokens * h);
    if (!fused_attention(c.attention)) {
      const std::int64_t probabilities = attention_probabilities(c, tokens, seq_len);
      out.push_back(probabilities);
      out.push_back(probabilities * math_attention_elem(elem));
    }
  }
  return out;
}

Bytes block_activation_bytes(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq_len,
                             Bytes elem, Bytes cast_from) {
  return total_bytes(block_saved_tensors(c, tokens, seq_len, elem, cast_from));
}

namespace {

// One moment of a block's backward: the gradients alive then and the saved tensors the backward
// has already released (autograd frees a node's saved tensors once its backward has run, and a
// checkpoint's recomputed ones as they are unpacked).
struct BackwardMoment {
  WorkspaceSizes alive;
  Bytes released = 0;
  Bytes excess() const { return total_bytes(alive) - released; }
};

// `moment`'s gradients less what it has released, taken from the largest first: tensors whose
// sum is the moment's memory beyond the block's saved tensors.
WorkspaceSizes net_of_released(BackwardMoment moment) {
  std::vector<Bytes> sizes(moment.alive.begin(), moment.alive.end());
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  Bytes left = moment.released;
  WorkspaceSizes out;
  for (Bytes size : sizes) {
    const Bytes taken = std::min(size, left);
    left -= taken;
    if (size > taken) out.push_back(size - taken);
  }
  return out;
}

// `tensors` with the smallest as one allocation, as many as their sum stays within the largest
// tensor: that allocation needs no larger hole than the largest already does, and each tensor is
// a buffer the planner lowers and replays for every configuration and a sweep for every point
// (Llama 3.1 405B, fully checkpointed: 15 tensors a block, 8 so). The rest keep their sizes and
// order; the smallest follow them.
WorkspaceSizes with_small_tensors_together(const WorkspaceSizes& tensors) {
  std::vector<std::size_t> by_size(tensors.size());
  for (std::size_t i = 0; i < by_size.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](std::size_t a, std::size_t b) { return tensors[a] < tensors[b]; });
  if (by_size.size() < 3) return tensors;
  const Bytes largest = tensors[by_size.back()];
  std::vector<char> merged(tensors.size(), 0);
  Bytes together = 0;
  std::size_t count = 0;
  while (count + 1 < by_size.size() && together + tensors[by_size[count]] <= largest) {
    together += tensors[by_size[count]];
    merged[by_size[count++]] = 1;
  }
  if (count < 2) return tensors;  // nothing gained
  WorkspaceSizes out;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (!merged[i]) out.push_back(tensors[i]);
  out.push_back(together);
  return out;
}

}  // namespace

WorkspaceSizes block_backward_workspace(const TransformerConfig& c, std::int64_t tokens,
                                        std::int64_t seq_len, Bytes elem, Bytes cast_from) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  const Bytes residual = cast_from > 0 ? cast_from : elem;
  const Bytes grad = tokens * h * residual;  // the gradient flowing down the residual stream
  // Under autocast the residual add's backward casts it to the MLP output's dtype for fc2.
  const Bytes grad_cast = cast_from > 0 ? tokens * h * elem : 0;
  const Bytes ffn = tokens * f * elem;
  WorkspaceSizes mlp_tensors;
  append_mlp_saved(mlp_tensors, c, tokens, elem, cast_from);
  const Bytes mlp_saved = total_bytes(mlp_tensors);
  std::vector<BackwardMoment> moments;
  // The MLP's output projection: its input's gradient beside the incoming one.
  moments.push_back({{grad, grad_cast, ffn}, 0});
  if (c.mlp == MlpKind::swiglu) {
    // The product's backward: the gradients of silu's output and of w3's, the product's own
    // still alive; w2's saved input (the product) released.
    moments.push_back({{grad, ffn, ffn, ffn}, ffn});
  } else {
    // GELU's backward: its input's gradient beside its output's; fc2's saved input released.
    moments.push_back({{grad, ffn, ffn}, ffn});
  }
  // The attention's backward, the MLP's saved tensors released: the residual gradient after the
  // MLP's branch joins it, and q's, k's and v's gradients beside the output's (math attention:
  // the probabilities' and the scores' gradients, [b, heads, s, s] each, in its precision).
  BackwardMoment attention{{grad, grad}, mlp_saved};
  if (fused_attention(c.attention)) {
    attention.alive.push_back(tokens * elem * (2 * h + 2 * kv));
  } else {
    const Bytes scores = attention_probabilities(c, tokens, seq_len) * math_attention_elem(elem);
    attention.alive.push_back(scores);
    attention.alive.push_back(scores);
  }
  moments.push_back(attention);
  const auto peak = std::max_element(
      moments.begin(), moments.end(),
      [](const BackwardMoment& a, const BackwardMoment& b) { return a.excess() < b.excess(); });
  return net_of_released(*peak);
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
      // block input + the flash attention's output and log-sum-exp (on the save list; math
      // attention's bmm and softmax are not) + the saved linears' outputs (without biases: wq,
      // wv, w1, w2 | wq, wv, fc1; detail::selective_linears); dropout masks and autocast's
      // casts are recomputed
      const std::int64_t kept = detail::selective_saved_width(c);
      const Bytes attention = fused_attention(c.attention) ? tokens * (elem * h + 4 * c.heads) : 0;
      return tokens * residual * h + tokens * elem * kept + attention;
    }
  }
  return 0;
}

WorkspaceSizes block_mlp_transient_tensors(const TransformerConfig& c, std::int64_t tokens,
                                           Bytes elem, Bytes cast_from) {
  const Bytes residual_elem = cast_from > 0 ? cast_from : elem;
  const bool swiglu = c.mlp == MlpKind::swiglu;
  const std::int64_t residuals = swiglu ? 2 : 1, ffns = swiglu ? 3 : 2;
  WorkspaceSizes tensors;
  for (std::int64_t i = 0; i < residuals; ++i) tensors.push_back(tokens * c.hidden * residual_elem);
  for (std::int64_t i = 0; i < ffns; ++i) tensors.push_back(tokens * c.ffn_hidden * elem);
  if (cast_from > 0)
    for (std::int64_t i = 0; i < residuals; ++i) tensors.push_back(tokens * c.hidden * elem);
  return tensors;
}

Bytes block_mlp_transient_bytes(const TransformerConfig& c, std::int64_t tokens, Bytes elem,
                                Bytes cast_from) {
  return total_bytes(block_mlp_transient_tensors(c, tokens, elem, cast_from));
}

WorkspaceSizes block_fp8_weight_tensors(const TransformerConfig& c) {
  return detail::projection_weight_numels(c);  // one byte per element
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
  const bool fp8 = s.training.fp8 != Fp8Recipe::none;
  detail::BlockShape shape{c, s.training.micro_batch, s.training.seq_len, compute_dtype(s),
                           cast_from};
  shape.fp8_linears = fp8;
  KernelSetTable kernels(out.kernel_sets);
  // Every block is the same: its kernels and sizes once (a sweep lowers thousands of 126-block
  // models); a group of n blocks runs each kernel n times.
  const KernelSet block_forward = detail::block_forward_kernels(shape);
  const KernelSet block_backward = detail::block_backward_kernels(shape);
  const KernelSet block_sac = detail::block_selective_recompute_kernels(shape);
  const KernelSet block_full_recompute = detail::block_full_recompute_kernels(shape);
  const std::int64_t seq = s.training.seq_len;
  // A block's saved tensors, once: their sum is what a block that keeps everything saves, and
  // a fully checkpointed block's recompute allocates them again.
  WorkspaceSizes recomputed = block_saved_tensors(c, t, seq, elem, from, fp8);
  const Bytes all = total_bytes(recomputed);
  const Bytes sac_saved =
      block_saved_bytes(c, t, seq, elem, ActivationCheckpointing::selective_op, from);
  const Bytes full_saved = block_saved_bytes(c, t, seq, elem, ActivationCheckpointing::full, from);
  // Autocast's weight copies: saved with the activations of a block that keeps them, held by the
  // cast cache or freed after use in a checkpointed one, and cast again by its recompute.
  // TransformerEngine's fp8 Linear replaces them: it saves its weight's fp8 transpose with the
  // activations, and a checkpointed block's forward frees its fp8 copies after each use (no cast
  // cache): the largest module's copy and transpose are transient there.
  const WorkspaceSizes fp8_weights = fp8 ? block_fp8_weight_tensors(c) : WorkspaceSizes{};
  const Bytes casts = fp8         ? total_bytes(fp8_weights)
                      : cast_from ? block_weight_cast_bytes(c, elem)
                                  : 0;
  WorkspaceSizes fp8_forward_workspace;
  if (fp8) {
    const Bytes largest = *std::max_element(fp8_weights.begin(), fp8_weights.end());
    fp8_forward_workspace = {largest, largest};
  }
  // What a fully checkpointed block's recompute allocates, tensor by tensor: its saved tensors
  // and, under autocast, each projection's weight copy (the biases' together); with fp8 linears
  // each module's fp8 weight transpose.
  if (fp8) {
    recomputed.insert(recomputed.end(), fp8_weights.begin(), fp8_weights.end());
  } else if (casts > 0) {
    Bytes weights = 0;
    for (std::int64_t numel : detail::projection_weight_numels(c)) {
      recomputed.push_back(numel * elem);
      weights += numel * elem;
    }
    if (casts > weights) recomputed.push_back(casts - weights);
  }
  recomputed = with_small_tensors_together(recomputed);
  const Bytes largest_cast = cast_from && !fp8 ? detail::largest_projection_params(c) * elem : 0;
  const Bytes held_casts = fp8 ? 0 : casts;  // autocast's copies a checkpointed forward holds
  // A block's backward beyond its saved tensors, at its largest moment (block_backward_workspace).
  const WorkspaceSizes block_workspace = block_backward_workspace(c, t, seq, elem, from);
  // Math attention's forward: the scores, then the causally masked scores (masked_fill is out of
  // place), before softmax writes the probabilities it saves.
  WorkspaceSizes block_forward_workspace;
  if (c.attention == AttentionKind::math) {
    const Bytes scores = attention_probabilities(c, t, seq) * math_attention_elem(elem);
    block_forward_workspace = {scores, scores};
  }
  // A block whose forward keeps less than everything still makes every tensor while it runs:
  // the MLP's intermediates are its largest moment (real PyTorch's forward peak under
  // checkpointing).
  const WorkspaceSizes mlp_transient = block_mlp_transient_tensors(c, t, elem, from);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    if (g.is_root) {
      add_part(i, embed_part(shape, kernels));
      for (ComputePart& part :
           head_parts(shape, s.training, root_output_cast(s).value_or(shape.dtype), kernels))
        add_part(i, std::move(part));
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
      part.weight_casts = checkpointed * held_casts;
      part.largest_weight_cast = largest_cast;
      part.recompute = kernels.pass(block_full_recompute, checkpointed);
      part.recompute_bytes = checkpointed * (all + casts);
      for (std::int64_t b = 0; b < checkpointed; ++b)
        for (Bytes tensor : recomputed) part.recompute_tensors.push_back(tensor);
      for (Bytes tensor : mlp_transient) part.forward_workspace.push_back(tensor);
      for (Bytes tensor : fp8_forward_workspace) part.forward_workspace.push_back(tensor);
    } else if (s.training.activation_checkpointing == ActivationCheckpointing::selective_op) {
      part.saved_bytes = g.block_count * sac_saved;
      part.weight_casts = g.block_count * casts;
      part.largest_weight_cast = largest_cast;
      for (Bytes tensor : mlp_transient) part.forward_workspace.push_back(tensor);
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
