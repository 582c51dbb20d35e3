#include "shardscope/core/param_groups.hpp"

#include <fmt/format.h>

namespace shardscope {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

void add_norm(std::vector<ParamShape>& shapes, const TransformerConfig& c) {
  shapes.push_back({c.hidden, 1});
  if (is_layernorm(c.norm) && c.norm_bias) shapes.push_back({c.hidden, 1});
}

}  // namespace

std::vector<ParamShape> block_param_shapes(const TransformerConfig& c) {
  const std::int64_t h = c.hidden;
  const std::int64_t kv = c.kv_dim();
  const std::int64_t f = c.ffn_hidden;
  std::vector<ParamShape> s;
  add_norm(s, c);  // attention norm
  s.push_back({h, h});
  s.push_back({kv, h});
  s.push_back({kv, h});
  if (c.qkv_bias) {
    s.push_back({h, 1});
    s.push_back({kv, 1});
    s.push_back({kv, 1});
  }
  s.push_back({h, h});
  if (c.out_proj_bias) s.push_back({h, 1});
  add_norm(s, c);  // ffn norm
  if (c.mlp == MlpKind::swiglu) {
    s.push_back({f, h});
    s.push_back({f, h});
    s.push_back({h, f});
    if (c.mlp_bias) {
      s.push_back({f, 1});
      s.push_back({f, 1});
      s.push_back({h, 1});
    }
  } else {
    s.push_back({f, h});
    s.push_back({h, f});
    if (c.mlp_bias) {
      s.push_back({f, 1});
      s.push_back({h, 1});
    }
  }
  return s;
}

std::vector<ParamShape> root_param_shapes(const TransformerConfig& c) {
  std::vector<ParamShape> s;
  s.push_back({c.vocab, c.hidden});
  if (c.pos_emb == PosEmbedding::learned) s.push_back({c.max_seq, c.hidden});
  add_norm(s, c);
  if (!c.tie_embeddings) s.push_back({c.vocab, c.hidden});
  return s;
}

std::int64_t sharded_numel(const std::vector<ParamShape>& shapes, std::int64_t world, FsdpApi api) {
  std::int64_t total = 0;
  if (api == FsdpApi::fsdp2) {
    for (const auto& p : shapes) total += ceil_div(p.dim0, world) * p.rest;
    return total;
  }
  for (const auto& p : shapes) total += p.numel();
  return ceil_div(total, world);
}

std::vector<GroupLayout> param_groups(const Scenario& s) {
  std::vector<GroupLayout> groups;
  const std::int64_t world = std::max<std::int64_t>(1, s.fsdp.mesh_shard);
  const FsdpApi api = s.fsdp.api;
  if (s.model.family == ModelFamily::transformer) {
    const auto& c = s.model.transformer;
    const auto block = block_param_shapes(c);
    const auto root = root_param_shapes(c);
    GroupLayout r;
    r.name = "root";
    r.is_root = true;
    for (const auto& p : root) r.numel += p.numel();
    r.sharded_numel = sharded_numel(root, world, api);
    groups.push_back(r);
    std::int64_t block_numel = 0;
    for (const auto& p : block) block_numel += p.numel();
    const std::int64_t per = std::max<std::int64_t>(1, s.fsdp.blocks_per_group);
    groups.reserve(static_cast<std::size_t>(1 + (c.layers + per - 1) / per));
    std::int64_t shards_of = 0, shards = 0;  // sharded numel of the last block count seen
    for (std::int64_t first = 0; first < c.layers; first += per) {
      GroupLayout g;
      g.first_block = first;
      g.block_count = std::min(per, c.layers - first);
      g.name = g.block_count == 1 ? fmt::format("layers.{}", first)
                                  : fmt::format("layers.{}-{}", first, first + g.block_count - 1);
      g.numel = block_numel * g.block_count;
      if (g.block_count != shards_of) {
        std::vector<ParamShape> shapes;
        for (std::int64_t b = 0; b < g.block_count; ++b)
          shapes.insert(shapes.end(), block.begin(), block.end());
        shards = sharded_numel(shapes, world, api);
        shards_of = g.block_count;
      }
      g.sharded_numel = shards;
      groups.push_back(std::move(g));
    }
    return groups;
  }
  // Custom: the listed groups in forward order, each one flat tensor. A group named "root" is the
  // FSDP root module where it is listed; without one, a parameterless root wraps everything.
  bool has_root = false;
  for (const auto& cg : s.model.groups) has_root |= cg.name == "root";
  if (!has_root) {
    GroupLayout r;
    r.name = "root";
    r.is_root = true;
    groups.push_back(r);
  }
  std::int64_t block = 0;
  for (std::size_t i = 0; i < s.model.groups.size(); ++i) {
    const auto& cg = s.model.groups[i];
    GroupLayout g;
    g.name = cg.name;
    g.is_root = cg.name == "root";
    g.numel = cg.params;
    g.sharded_numel = sharded_numel({{cg.params, 1}}, world, api);
    g.custom_index = static_cast<std::int64_t>(i);
    if (!g.is_root) {
      g.first_block = block++;
      g.block_count = 1;
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace shardscope
