#pragma once
// What is trained: a transformer described by its shape, or a custom list of FSDP groups.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardscope/core/units.hpp"

namespace shardscope {

enum class ModelFamily { transformer, custom };
/// swiglu: three projections; gelu: two with a fused GELU (nn.GELU, F.gelu, exact or tanh);
/// gelu_new: two with Hugging Face's NewGELUActivation, the tanh formula in separate elementwise
/// ops whose intermediates autograd saves (and whose pow runs in fp32 under autocast).
enum class MlpKind { swiglu, gelu, gelu_new };
/// How scaled-dot-product attention runs (docs/semantics.md, "Attention and dropout"): a fused
/// flash kernel, or PyTorch's math path (two batched GEMMs and a softmax, the s × s scores and
/// probabilities materialised).
/// SDPA's kernel: flash (FlashAttention-2, the FLASH_ATTENTION backend) and cudnn (cuDNN's fused
/// attention, CUDNN_ATTENTION) keep no s × s probabilities and save the same tensors; they differ
/// in speed. math materializes the probabilities. triton is not SDPA's: llm-foundry's Triton
/// FlashAttention (MPT's attn_impl: triton), FlashAttention-2's memory at its own speed.
enum class AttentionKind { flash, math, cudnn, triton };
inline bool fused_attention(AttentionKind a) {
  return a != AttentionKind::math;
}
/// rmsnorm: one fused kernel (nn.RMSNorm on CUDA, which dispatches to aten::_fused_rms_norm;
/// torchtitan's Triton fused_rmsnorm), keeping its input and the fp32 rstd.
/// low_precision_layernorm: llm-foundry's LPLayerNorm (MPT), a LayerNorm that under autocast casts
/// its input, weight and bias to the autocast dtype and runs with autocast off, so what it keeps
/// and returns is low precision (a plain LayerNorm runs in fp32 under autocast).
/// unfused_rmsnorm: an RMSNorm written as PyTorch ops, `(x.float() * rsqrt(mean(x²) + eps))
/// .type_as(x) * weight` (torchtitan's RMSNorm class until pytorch/torchtitan#985, Hugging Face's
/// LlamaRMSNorm): one kernel per op, with fp32 intermediates, keeping an fp32 copy of its input
/// and the normalised tensor.
enum class NormKind { rmsnorm, layernorm, low_precision_layernorm, unfused_rmsnorm };
/// A LayerNorm of either kind: weight and bias (unless norm_bias is false), mean and rstd.
inline bool is_layernorm(NormKind n) {
  return n == NormKind::layernorm || n == NormKind::low_precision_layernorm;
}
/// rope: rotary on q and k; learned: a position table; alibi: a per-head linear bias added to
/// the attention scores (no parameters, no rotary kernel).
enum class PosEmbedding { rope, learned, alibi };

/// A decoder-only transformer. Linear weights are [out, in]; a LayerNorm has weight and bias,
/// an RMSNorm only weight. The output head never has a bias.
struct TransformerConfig {
  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn_hidden = 0;
  std::int64_t vocab = 0;
  std::int64_t max_seq = 0;
  MlpKind mlp = MlpKind::swiglu;
  NormKind norm = NormKind::rmsnorm;
  PosEmbedding pos_emb = PosEmbedding::rope;
  bool qkv_bias = false;        // bias on the q, k, v projections
  bool out_proj_bias = false;   // bias on the attention output projection
  bool mlp_bias = false;        // bias on the MLP projections
  bool tie_embeddings = false;  // output head shares the token embedding
  // x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX, GPT-J) instead of two residual steps: both
  // norms read the block input, so one residual tensor fewer is saved.
  bool parallel_residual = false;
  bool norm_bias = true;  // LayerNorm only: MPT's have a weight and no bias
  AttentionKind attention = AttentionKind::flash;
  double dropout = 0.0;  // nn.Dropout probability at each site (embedding, residuals, attention)

  std::int64_t head_dim() const { return hidden / heads; }
  std::int64_t kv_dim() const { return kv_heads * head_dim(); }
};

/// Parameter counts of a transformer, by part.
struct TransformerParams {
  std::int64_t attention = 0;    // per block: q, k, v, o (+ biases)
  std::int64_t mlp = 0;          // per block
  std::int64_t block_norms = 0;  // per block: two norms
  std::int64_t token_embedding = 0;
  std::int64_t position_embedding = 0;
  std::int64_t final_norm = 0;
  std::int64_t output_head = 0;  // 0 when tied

  std::int64_t block() const { return attention + mlp + block_norms; }
  /// Everything outside the blocks: what FSDP's root group holds.
  std::int64_t root() const {
    return token_embedding + position_embedding + final_norm + output_head;
  }
};

TransformerParams count_params(const TransformerConfig& config);

/// One FSDP group of a custom model, in forward order. Compute is per micro-batch.
struct CustomGroup {
  std::string name;
  std::int64_t params = 0;
  std::optional<Flops> forward_flops;
  std::optional<Flops> backward_flops;  // default: 2 × forward
  Bytes activation_bytes = 0;           // saved for backward, per micro-batch
  std::optional<TimeNs> forward_time;   // fixed times override the cost models
  std::optional<TimeNs> backward_time;
  std::optional<TimeNs> all_gather_time;
  std::optional<TimeNs> reduce_scatter_time;
};

struct ModelSpec {
  std::string name;  // preset name, HF config path, or "custom"
  ModelFamily family = ModelFamily::transformer;
  TransformerConfig transformer;    // family == transformer
  std::vector<CustomGroup> groups;  // family == custom, in forward order

  std::int64_t total_params() const;
  /// Parameters outside the repeated blocks (the FSDP root group).
  std::int64_t root_params() const;
  /// Number of repeated blocks (transformer layers, or custom groups other than "root").
  std::int64_t block_count() const;
};

std::string_view to_string(ModelFamily family);
std::string_view to_string(MlpKind mlp);
std::string_view to_string(AttentionKind attention);
std::string_view to_string(NormKind norm);
std::string_view to_string(PosEmbedding pos_emb);

}  // namespace shardscope
