#include "transformer_kernels.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <string>

namespace shardscope::detail {
namespace {

struct Matmul {
  const char* name;
  std::int64_t in = 0;
  std::int64_t out = 0;
};

// A block's nn.Linear layers in forward order; the attention runs between wv and wo.
struct BlockMatmuls {
  std::array<Matmul, 7> layers;
  std::size_t count = 0;

  std::span<const Matmul> all() const { return {layers.data(), count}; }
};
constexpr std::size_t kAttentionAfter = 3;  // wq, wk, wv

BlockMatmuls block_matmuls(const TransformerConfig& c) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  if (c.mlp == MlpKind::swiglu) {
    return {{{{"wq", h, h},
              {"wk", h, kv},
              {"wv", h, kv},
              {"wo", h, h},
              {"w1", h, f},
              {"w3", h, f},
              {"w2", f, h}}},
            7};
  }
  return {
      {{{"wq", h, h}, {"wk", h, kv}, {"wv", h, kv}, {"wo", h, h}, {"fc1", h, f}, {"fc2", f, h}}},
      6};
}

// What a linear's GEMMs read: fp8 operands in TransformerEngine's fp8 Linear, else the compute
// dtype. Either way they write the compute dtype (TE's weight gradient too: its activation
// dtype).
DType linear_operands(const BlockShape& b) {
  return b.fp8_linears ? DType::fp8 : b.dtype;
}

// y = x·Wᵀ
Kernel linear_forward(const Matmul& mm, const BlockShape& b) {
  return {mm.name, 1, Gemm{b.tokens(), mm.out, mm.in, 1, false, true, linear_operands(b), b.dtype}};
}
// dx = dy·W
Kernel linear_input_grad(const Matmul& mm, const BlockShape& b) {
  return {std::string(mm.name) + ".dgrad", 1,
          Gemm{b.tokens(), mm.in, mm.out, 1, false, false, linear_operands(b), b.dtype}};
}
// dW = dyᵀ·x
Kernel linear_weight_grad(const Matmul& mm, const BlockShape& b) {
  return {std::string(mm.name) + ".wgrad", 1,
          Gemm{mm.out, mm.in, b.tokens(), 1, true, false, linear_operands(b), b.dtype}};
}

// The block's projections as modules, in forward order: a fused qkv projection is one module of
// three matmuls' outputs (MPT's Wqkv), the rest one module per matmul.
std::vector<Matmul> projection_modules(const TransformerConfig& c) {
  const BlockMatmuls mm = block_matmuls(c);
  std::vector<Matmul> out;
  for (std::size_t i = 0; i < mm.count; ++i) {
    if (fused_qkv(c) && i > 0 && i < kAttentionAfter) {
      out.back().name = "wqkv";
      out.back().out += mm.layers[i].out;
      continue;
    }
    out.push_back(mm.layers[i]);
  }
  return out;
}

// The projections a block's forward runs, as modules (one GEMM each: a fused qkv projection is
// one nn.Linear, one GEMM of q's, k's and v's outputs together), and how many of them run before
// the attention.
struct BlockModules {
  std::vector<Matmul> modules;
  std::size_t attention_after = 0;
};
BlockModules block_modules(const TransformerConfig& c) {
  return {projection_modules(c), fused_qkv(c) ? 1 : kAttentionAfter};
}

// TransformerEngine's casts around its fp8 Linear modules (fp8_cast_transpose_fused: read once,
// write the fp8 copy and its fp8 transpose, the amax alongside). Forward: each module's input
// and its weight, read in the dtype FSDP hands it, for each of `modules` that runs. Backward: each
// module's output gradient.
void add_fp8_forward_casts(KernelSet& out, const BlockShape& b, std::span<const Matmul> modules) {
  const Bytes elem = bytes_per_element(b.dtype);
  const Bytes weight = bytes_per_element(b.cast_from.value_or(b.dtype));
  Bytes bytes = 0;
  for (const Matmul& m : modules)
    bytes += b.tokens() * m.in * (elem + 2) + m.in * m.out * (weight + 2);
  out.push_back({"fp8.cast_transpose", 1, MemoryBound{bytes, 0}});
}
void add_fp8_backward_casts(KernelSet& out, const BlockShape& b, std::span<const Matmul> modules) {
  Bytes bytes = 0;
  for (const Matmul& m : modules) bytes += b.tokens() * m.out * (bytes_per_element(b.dtype) + 2);
  out.push_back({"fp8.grad_cast_transpose", 1, MemoryBound{bytes, 0}});
}

// Dropout's traffic at `sites` sites of `elements` each: read the input, write the output and
// the bool mask (forward); read the gradient and the mask, write the gradient (backward).
Bytes dropout_bytes(const BlockShape& b, std::int64_t sites, std::int64_t elements) {
  if (b.config.dropout <= 0) return 0;
  return sites * elements * (2 * bytes_per_element(b.dtype) + 1);
}

// PyTorch's math SDPA (_scaled_dot_product_attention_math): scores = q·kᵀ per head (the full
// s × s, no causal skipping), the causal mask filled out of place, softmax (and dropout), then
// probabilities · v. Backward: dP = dO·vᵀ, dV = Pᵀ·dO, softmax's (and dropout's and the mask's)
// gradient, dQ = dS·k, dK = dSᵀ·q.
void math_attention(KernelSet& out, const BlockShape& b, bool backward) {
  const TransformerConfig& c = b.config;
  const std::int64_t s = b.seq_len, kv = b.keys(), d = c.head_dim(),
                     heads = b.micro_batch * c.heads;
  const std::int64_t probs = heads * s * kv;
  const Bytes e = bytes_per_element(b.dtype);
  const auto gemm = [&](const char* label, std::int64_t m, std::int64_t n, std::int64_t k, bool ta,
                        bool tb) {
    out.push_back({label, 1, Gemm{m, n, k, heads, ta, tb, b.dtype, b.dtype}});
  };
  if (!backward) {
    gemm("attention.scores", s, kv, d, false, true);
    out.push_back(
        {"attention.mask+softmax", 1, MemoryBound{probs * 4 * e + dropout_bytes(b, 1, probs), 0}});
    gemm("attention.pv", s, d, kv, false, false);
    return;
  }
  gemm("attention.pv.dgrad", s, s, d, false, true);
  gemm("attention.pv.wgrad", s, d, s, true, false);
  out.push_back({"attention.softmax.backward", 1,
                 MemoryBound{probs * 5 * e + dropout_bytes(b, 1, probs), 0}});
  gemm("attention.scores.dgrad", s, d, s, false, false);
  gemm("attention.scores.wgrad", s, d, s, true, false);
}

Kernel attention(const BlockShape& b, bool backward) {
  const TransformerConfig& c = b.config;
  return {backward ? "attention.backward" : "attention", 1,
          Attention{b.micro_batch, c.heads, c.kv_heads, b.seq_len, b.keys(), c.head_dim(),
                    b.causal(), backward, b.dtype}};
}

// The MLP activation's forward traffic: SwiGLU's silu and product (5 accesses per element), a
// fused GELU's read and write, or gelu_new's eight elementwise kernels (pow, three scalar ops,
// an add, tanh, two products: 10 reads and 8 writes), in fp32 under autocast, whose fp32 list
// has pow, after the input's cast.
Bytes activation_bytes(const BlockShape& b) {
  const std::int64_t f = b.config.ffn_hidden, t = b.tokens();
  const Bytes elem = bytes_per_element(b.dtype);
  switch (b.config.mlp) {
    case MlpKind::swiglu:
      return t * f * 5 * elem;
    case MlpKind::gelu:
      return t * f * 2 * elem;
    case MlpKind::gelu_new:
      return b.cast_from ? t * f * (Bytes{18} * 4 + elem + 4) : t * f * 18 * elem;
  }
  return 0;
}

// One norm's forward traffic per element. A fused RMSNorm (nn.RMSNorm on CUDA: one kernel) reads
// its input and writes its output in the residual stream's dtype r (fp32 under autocast over
// fp32 parameters, else the compute dtype p). Every other norm is counted as the first kernel
// model counted all of them: input and output in p and two fp32 accesses. For an RMSNorm written
// as ops that is less than its kernels move (36 bytes an element in bf16), and for a LayerNorm
// (one kernel) more; both counts are what the published runs' fits were made with, and counted in
// full they pull those fits apart (docs/validation.md, "Norms").
Bytes norm_bytes_per_element(const BlockShape& b) {
  const Bytes p = bytes_per_element(b.dtype);
  if (b.config.norm == NormKind::rmsnorm)
    return 2 * (b.cast_from ? bytes_per_element(*b.cast_from) : p);
  constexpr Bytes kF32 = 4;
  return 2 * p + 2 * kF32;
}

// Memory-bound kernels of one block's forward: two norms, RoPE on q and k (rotary embeddings
// only), the MLP activation, two residual adds (read two, write one) and four accesses of h
// more per token, which the first kernel model counted and nothing has measured apart.
Bytes block_elementwise_bytes(const BlockShape& b) {
  const TransformerConfig& c = b.config;
  const std::int64_t h = c.hidden, kv = c.kv_dim(), t = b.tokens();
  const Bytes elem = bytes_per_element(b.dtype);
  const std::int64_t rope = c.pos_emb == PosEmbedding::rope ? 2 * (h + kv) : 0;
  return 2 * t * h * norm_bytes_per_element(b) + t * elem * (rope + 6 * h + 4 * h) +
         activation_bytes(b) + dropout_bytes(b, 2, t * h);  // the two residual dropouts
}

void add_attention(KernelSet& out, const BlockShape& b, bool backward) {
  if (b.config.attention == AttentionKind::math) {
    math_attention(out, b, backward);
  } else {
    out.push_back(attention(b, backward));
  }
}

Kernel elementwise(const BlockShape& b, std::int64_t passes) {
  return {"norms+rope+activation+residual", 1, MemoryBound{passes * block_elementwise_bytes(b), 0}};
}

// Autocast's casts of `numel` weight elements: forward reads the weights and writes their copies
// (to_copy, a narrowing conversion), backward reads the low-precision weight gradient and writes
// it in the weights' dtype (ToCopyBackward, an upcast). Nothing when the weights are not cast.
enum class CastOf { weights, gradients };
void add_casts(KernelSet& out, const BlockShape& b, std::int64_t numel, const char* label,
               CastOf what) {
  if (!b.cast_from) return;
  const auto [from, to] =
      what == CastOf::weights ? std::pair{*b.cast_from, b.dtype} : std::pair{b.dtype, *b.cast_from};
  out.push_back({label, 1, dtype_conversion(numel, from, to)});
}

}  // namespace

std::int64_t block_projection_params(const TransformerConfig& c) {
  const TransformerParams p = count_params(c);
  return p.attention + p.mlp;
}

std::vector<std::int64_t> projection_weight_numels(const TransformerConfig& c) {
  std::vector<std::int64_t> out;
  for (const Matmul& m : projection_modules(c)) out.push_back(m.in * m.out);
  return out;
}

std::int64_t largest_projection_params(const TransformerConfig& c) {
  const auto numels = projection_weight_numels(c);
  return *std::max_element(numels.begin(), numels.end());
}

bool fused_qkv(const TransformerConfig& c) {
  return c.mlp != MlpKind::swiglu;
}

std::int64_t projection_inputs(const TransformerConfig& c) {
  return fused_qkv(c) ? 2 : 5;
}

KernelSet block_forward_kernels(const BlockShape& b) {
  const BlockModules bm = block_modules(b.config);
  KernelSet out;
  if (b.fp8_linears) {
    add_fp8_forward_casts(out, b, bm.modules);
  } else {
    add_casts(out, b, block_projection_params(b.config), "autocast.weight_casts", CastOf::weights);
  }
  for (std::size_t i = 0; i < bm.modules.size(); ++i) {
    if (i == bm.attention_after) add_attention(out, b, false);
    out.push_back(linear_forward(bm.modules[i], b));
  }
  out.push_back(elementwise(b, 1));
  return out;
}

KernelSet block_backward_kernels(const BlockShape& b) {
  const BlockModules bm = block_modules(b.config);
  KernelSet out;
  for (std::size_t i = bm.modules.size(); i-- > 0;) {
    out.push_back(linear_input_grad(bm.modules[i], b));
    out.push_back(linear_weight_grad(bm.modules[i], b));
    if (i == bm.attention_after) add_attention(out, b, true);
  }
  out.push_back(elementwise(b, 2));
  // The weight gradients come out in the compute dtype and are cast to the weights' own: by
  // autocast's ToCopyBackward, or for TE's modules (outside autocast) by the autograd engine,
  // which casts a gradient to its input's dtype.
  if (b.fp8_linears) {
    add_fp8_backward_casts(out, b, bm.modules);
    add_casts(out, b, block_projection_params(b.config), "weight_grad_casts", CastOf::gradients);
  } else {
    add_casts(out, b, block_projection_params(b.config), "autocast.grad_casts", CastOf::gradients);
  }
  return out;
}

namespace {

bool linear_has_bias(const TransformerConfig& c, std::size_t i) {
  if (i < kAttentionAfter) return c.qkv_bias;
  if (i == kAttentionAfter) return c.out_proj_bias;
  return c.mlp_bias;
}

// A forward's memory-bound traffic less the MLP's residual dropout and add (read two, write
// one), which a recompute stopped early does not run.
Kernel elementwise_up_to_mlp_output(const BlockShape& b) {
  const std::int64_t t = b.tokens(), h = b.config.hidden;
  const Bytes skipped = t * h * 3 * bytes_per_element(b.dtype) + dropout_bytes(b, 1, t * h);
  return {"norms+rope+activation+residual", 1,
          MemoryBound{block_elementwise_bytes(b) - skipped, 0}};
}

}  // namespace

SelectiveLinears selective_linears(const TransformerConfig& c) {
  const auto mm = block_matmuls(c);
  SelectiveLinears out;
  out.count = mm.count;
  int mms = 0;
  for (std::size_t i = 0; i < mm.count; ++i) {
    const bool addmm = linear_has_bias(c, i);
    out.saved[i] = !addmm && ++mms % 2 == 1;
    out.recomputed[i] = !out.saved[i];
  }
  out.recomputed[mm.count - 1] = false;  // early stop: its output is no saved tensor
  return out;
}

std::int64_t selective_saved_width(const TransformerConfig& c) {
  const auto mm = block_matmuls(c);
  const SelectiveLinears sel = selective_linears(c);
  std::int64_t width = 0;
  for (std::size_t i = 0; i < mm.count; ++i) {
    if (sel.saved[i]) width += mm.layers[i].out;
  }
  return width;
}

KernelSet block_selective_recompute_kernels(const BlockShape& b) {
  const auto mm = block_matmuls(b.config);
  const SelectiveLinears sel = selective_linears(b.config);
  KernelSet out;
  std::int64_t cast = 0;  // autocast casts the weights of the linears that run again
  for (std::size_t i = 0; i < mm.count; ++i) {
    if (sel.recomputed[i]) cast += mm.layers[i].in * mm.layers[i].out;
  }
  add_casts(out, b, cast, "autocast.weight_casts", CastOf::weights);
  for (std::size_t i = 0; i < mm.count; ++i) {
    if (sel.recomputed[i]) out.push_back(linear_forward(mm.layers[i], b));
  }
  out.push_back(elementwise_up_to_mlp_output(b));
  return out;
}

KernelSet block_full_recompute_kernels(const BlockShape& b) {
  const BlockModules bm = block_modules(b.config);
  const Matmul& last = bm.modules.back();  // w2 / fc2: its output is no saved tensor
  KernelSet out;
  if (b.fp8_linears) {
    add_fp8_forward_casts(out, b, std::span(bm.modules).first(bm.modules.size() - 1));
  } else {
    add_casts(out, b, block_projection_params(b.config) - last.in * last.out,
              "autocast.weight_casts", CastOf::weights);
  }
  for (std::size_t i = 0; i + 1 < bm.modules.size(); ++i) {
    if (i == bm.attention_after) add_attention(out, b, false);
    out.push_back(linear_forward(bm.modules[i], b));
  }
  out.push_back(elementwise_up_to_mlp_output(b));
  return out;
}

KernelSet embed_forward_kernels(const BlockShape& b) {
  const std::int64_t elements = b.tokens() * b.config.hidden;
  const Bytes rows = elements * bytes_per_element(b.dtype);
  return {{"embedding", 1, MemoryBound{rows + dropout_bytes(b, 1, elements), 0}}};
}

KernelSet embed_backward_kernels(const BlockShape& b) {
  const Flops adds = static_cast<double>(b.tokens()) * static_cast<double>(b.config.hidden);
  return {{"embedding.backward", 1, MemoryBound{0, adds}}};
}

namespace {

// The output projection's GEMMs `make` builds, once per chunk: the full chunks as one kernel
// repeated, a shorter last chunk as its own.
template <typename Make>
void per_chunk(KernelSet& out, const BlockShape& b, const LossShape& loss, const char* suffix,
               Make make) {
  const std::int64_t t = b.tokens(), chunk = loss.chunk_tokens;
  const Matmul output{"output", b.config.hidden, b.config.vocab};
  const auto add = [&](std::int64_t tokens, std::int64_t times, const char* tail) {
    const BlockShape part{b.config, 1, tokens, b.dtype, b.cast_from};
    Kernel k = make(output, part);
    k.label += std::string(suffix) + tail;
    k.repeat = times;
    out.push_back(std::move(k));
  };
  if (t / chunk > 0) add(chunk, t / chunk, "");
  if (t % chunk > 0) add(t % chunk, 1, ".last_chunk");
}

}  // namespace

KernelSet output_forward_kernels(const BlockShape& b, const LossShape& loss) {
  KernelSet out;
  add_casts(out, b, b.config.vocab * b.config.hidden, "autocast.weight_casts", CastOf::weights);
  per_chunk(out, b, loss, "", linear_forward);
  return out;
}

KernelSet output_backward_kernels(const BlockShape& b, const LossShape& loss) {
  KernelSet out;
  per_chunk(out, b, loss, "", linear_input_grad);
  per_chunk(out, b, loss, "", linear_weight_grad);
  add_casts(out, b, b.config.vocab * b.config.hidden, "autocast.grad_casts", CastOf::gradients);
  return out;
}

KernelSet upcast_kernels(const BlockShape& b, bool backward) {
  // logits.float(): read the logits, write fp32; backward: read fp32, write the logits' dtype.
  const std::int64_t numel = b.tokens() * b.config.vocab;
  if (backward)
    return {{"logits.float.backward", 1, dtype_conversion(numel, DType::fp32, b.dtype)}};
  return {{"logits.float", 1, dtype_conversion(numel, b.dtype, DType::fp32)}};
}

KernelSet loss_forward_kernels(const BlockShape& b, const LossShape& loss) {
  return {
      {"cross_entropy", 1, CrossEntropy{b.tokens(), b.config.vocab, false, b.dtype, loss.recipe}}};
}

KernelSet loss_backward_kernels(const BlockShape& b, const LossShape& loss) {
  KernelSet out;
  if (loss.recipe == LossRecipe::chunked) per_chunk(out, b, loss, ".recompute", linear_forward);
  out.push_back({"cross_entropy.backward", 1,
                 CrossEntropy{b.tokens(), b.config.vocab, true, b.dtype, loss.recipe}});
  return out;
}

KernelSet repeated(KernelSet kernels, std::int64_t times) {
  for (Kernel& k : kernels) k.repeat *= times;
  return kernels;
}

}  // namespace shardscope::detail
