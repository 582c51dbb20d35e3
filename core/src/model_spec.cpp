#include "shardscope/core/model_spec.hpp"

#include "shardscope/core/scenario_keys.hpp"

namespace shardscope {

TransformerParams count_params(const TransformerConfig& c) {
  TransformerParams p;
  const std::int64_t h = c.hidden;
  const std::int64_t kv = c.kv_dim();
  p.attention = h * h + 2 * h * kv + h * h;  // q, k, v, o
  if (c.qkv_bias) p.attention += h + 2 * kv;
  if (c.out_proj_bias) p.attention += h;
  const std::int64_t f = c.ffn_hidden;
  if (c.mlp == MlpKind::swiglu) {
    p.mlp = 3 * h * f;  // w1 (gate), w3 (up), w2 (down)
    if (c.mlp_bias) p.mlp += 2 * f + h;
  } else {
    p.mlp = 2 * h * f;
    if (c.mlp_bias) p.mlp += f + h;
  }
  const std::int64_t norm = is_layernorm(c.norm) && c.norm_bias ? 2 * h : h;
  p.block_norms = 2 * norm;
  p.token_embedding = c.vocab * h;
  p.position_embedding = c.pos_emb == PosEmbedding::learned ? c.max_seq * h : 0;
  p.final_norm = norm;
  p.output_head = c.tie_embeddings ? 0 : c.vocab * h;
  return p;
}

std::int64_t ModelSpec::total_params() const {
  if (family == ModelFamily::transformer) {
    const auto p = count_params(transformer);
    return p.block() * transformer.layers + p.root();
  }
  std::int64_t total = 0;
  for (const auto& g : groups) total += g.params;
  return total;
}

std::int64_t ModelSpec::root_params() const {
  if (family == ModelFamily::transformer) return count_params(transformer).root();
  for (const auto& g : groups) {
    if (g.name == "root") return g.params;
  }
  return 0;
}

std::int64_t ModelSpec::block_count() const {
  if (family == ModelFamily::transformer) return transformer.layers;
  std::int64_t n = 0;
  for (const auto& g : groups) n += g.name == "root" ? 0 : 1;
  return n;
}

std::string_view to_string(ModelFamily family) {
  return choice_name("model.family", family);
}
std::string_view to_string(AttentionKind attention) {
  return choice_name("model.attention", attention);
}

std::string_view to_string(MlpKind mlp) {
  return choice_name("model.mlp", mlp);
}
std::string_view to_string(NormKind norm) {
  return choice_name("model.norm", norm);
}
std::string_view to_string(PosEmbedding pos_emb) {
  return choice_name("model.pos_emb", pos_emb);
}

}  // namespace shardscope
