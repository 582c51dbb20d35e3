#include "generation_compute.hpp"

#include <algorithm>

#include "shardscope/core/group_compute.hpp"
#include "transformer_kernels.hpp"

namespace shardscope {

Bytes kv_cache_bytes(const Scenario& s, std::int64_t positions) {
  const auto& c = s.model.transformer;
  return 2 * s.training.generation.batch * positions * c.kv_dim() *
         bytes_per_element(compute_dtype(s));
}

Bytes prefill_cache_bytes(const Scenario& s) {
  const auto& c = s.model.transformer;
  const GenerationSpec& g = s.training.generation;
  if (g.kv_cache == KvCache::preallocated) return kv_cache_bytes(s, g.prompt_tokens + g.new_tokens);
  if (!detail::fused_qkv(c)) return kv_cache_bytes(s, g.prompt_tokens);
  return g.batch * g.prompt_tokens * (c.hidden + 2 * c.kv_dim()) *
         bytes_per_element(compute_dtype(s));
}

GenerationForward generation_forward(const Scenario& s, std::int64_t step) {
  const auto& c = s.model.transformer;
  const GenerationSpec& g = s.training.generation;
  const DType dtype = compute_dtype(s);
  const Bytes e = bytes_per_element(dtype);
  const std::optional<DType> cast_from = autocast_cast_source(s);
  const bool prefill = step == 0;
  const std::int64_t q_len = prefill ? g.prompt_tokens : 1;
  const detail::BlockShape shape{c,     g.batch,   q_len,
                                 dtype, cast_from, prefill ? 0 : g.prompt_tokens + step};
  GenerationForward f;
  f.tokens = shape.tokens();
  f.keys = shape.keys();
  f.embed = detail::embed_forward_kernels(shape);
  f.block = detail::block_forward_kernels(shape);
  // The cache update reads this forward's keys and values and writes them: in place into a
  // StaticCache (index_copy_); a DynamicCache concatenates them onto the cache so far
  // (torch.cat), reading that too and writing the whole anew.
  const Bytes written = kv_cache_bytes(s, q_len);
  const Bytes previous =
      prefill || g.kv_cache == KvCache::preallocated ? 0 : kv_cache_bytes(s, shape.keys() - 1);
  const Bytes update = 2 * (previous + written);
  f.block.push_back({"kv_cache.update", 1, MemoryBound{update, 0}});
  // Each sequence's last position only: a head of `batch` rows.
  const detail::BlockShape last{c, g.batch, 1, dtype, cast_from};
  f.head = detail::output_forward_kernels(last, {LossRecipe::upcast_fp32, last.tokens()});
  f.head.insert(f.head.begin(),
                {"final_norm", 1, MemoryBound{2 * last.tokens() * c.hidden * e, 0}});
  // generate's logits[:, -1, :].float(), softmax (or the processors' top-k/top-p) and the pick:
  // read the logits, write fp32, read and write the probabilities, read them to pick.
  const std::int64_t rows = g.batch * c.vocab;
  f.sampling = {{"sampling", 1, MemoryBound{rows * (e + 4 + 4 + 4 + 4), 0}}};
  f.hidden = f.tokens * c.hidden * e;
  f.logits = rows * e;
  // Attention's inputs (q, k, v) and, under math attention, its scores twice (the masked copy);
  // the MLP's intermediates: whichever is larger. The block op holds its input and its output
  // besides, so the MLP's moment counts one residual-stream tensor less than a training
  // forward's (block_mlp_transient_bytes): the caller's input, the residual after attention and
  // the MLP's tensors are what is live there.
  const Bytes from = cast_from ? bytes_per_element(*cast_from) : 0;
  Bytes attention = f.tokens * e * (c.hidden + 2 * c.kv_dim());
  if (c.attention == AttentionKind::math)
    attention += 2 * g.batch * c.heads * q_len * shape.keys() * std::max<Bytes>(e, 4);
  const Bytes mlp =
      block_mlp_transient_bytes(c, f.tokens, e, from) - f.tokens * c.hidden * (from > 0 ? from : e);
  f.block_transient = std::max(attention, mlp);
  return f;
}

}  // namespace shardscope
