#include "shardscope/core/group_compute.hpp"

#include <array>

namespace shardscope {
namespace {

struct BlockMatmuls {
  std::array<std::int64_t, 7> out_dims;  // output features of each matmul in forward order
  std::array<std::int64_t, 7> in_dims;
  std::size_t count;
};

BlockMatmuls block_matmuls(const TransformerConfig& c) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  if (c.mlp == MlpKind::swiglu)
    return {{h, kv, kv, h, f, f, h}, {h, h, h, h, h, h, f}, 7};  // wq wk wv wo w1 w3 w2
  return {{h, kv, kv, h, f, h}, {h, h, h, h, h, f}, 6};          // wq wk wv wo fc1 fc2
}

Flops block_matmul_flops(const TransformerConfig& c, std::int64_t tokens) {
  const auto mm = block_matmuls(c);
  Flops flops = 0;
  for (std::size_t i = 0; i < mm.count; ++i) {
    flops += 2.0 * static_cast<double>(tokens) * static_cast<double>(mm.out_dims[i]) *
             static_cast<double>(mm.in_dims[i]);
  }
  return flops;
}

// Causal attention: QKᵀ and AV over half of the s × s score matrix.
Flops block_attention_flops(const TransformerConfig& c, std::int64_t tokens, std::int64_t seq) {
  return 2.0 * static_cast<double>(tokens) * static_cast<double>(seq) *
         static_cast<double>(c.hidden);
}

// Memory-bound kernels of one block's forward: two norms (computed in fp32), RoPE on q and k,
// the MLP activation and gating, two residual adds.
Bytes block_elementwise_bytes(const TransformerConfig& c, std::int64_t tokens, Bytes elem) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  const std::int64_t act = c.mlp == MlpKind::swiglu ? 5 * f : 2 * f;
  return tokens * elem * (4 * h + 2 * (h + kv) + act + 6 * h + 4 * h) + tokens * 4 * 4 * h;
}

// Matmuls torchtitan's selective-op policy does not keep: every second one (wk, wo, w3 / wk, wo,
// fc2).
Flops sac_recompute_flops(const TransformerConfig& c, std::int64_t tokens) {
  const auto mm = block_matmuls(c);
  Flops flops = 0;
  for (std::size_t i = 1; i < mm.count; i += 2) {
    flops += 2.0 * static_cast<double>(tokens) * static_cast<double>(mm.out_dims[i]) *
             static_cast<double>(mm.in_dims[i]);
  }
  return flops;
}

bool block_fully_checkpointed(const TrainingSpec& t, std::int64_t block) {
  if (t.activation_checkpointing == ActivationCheckpointing::full) return true;
  if (t.activation_checkpointing == ActivationCheckpointing::every_n)
    return (block + 1) % t.checkpoint_every == 0;
  return false;
}

}  // namespace

DType compute_dtype(const Scenario& s) {
  return s.fsdp.mixed_precision.param_dtype.value_or(DType::fp32);
}

Bytes block_activation_bytes(const TransformerConfig& c, std::int64_t tokens, Bytes elem) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  const std::int64_t mlp = c.mlp == MlpKind::swiglu ? 4 * f : 2 * f;
  const std::int64_t norm_stats =
      c.norm == NormKind::layernorm ? 4 : 2;  // mean+rstd or rstd, two norms
  return tokens * elem * (6 * h + 2 * kv + mlp) + tokens * 4 * (c.heads + norm_stats);
}

Bytes block_saved_bytes(const TransformerConfig& c, std::int64_t tokens, Bytes elem,
                        ActivationCheckpointing ac) {
  const std::int64_t h = c.hidden, kv = c.kv_dim(), f = c.ffn_hidden;
  switch (ac) {
    case ActivationCheckpointing::none:
    case ActivationCheckpointing::every_n:
      return block_activation_bytes(c, tokens, elem);
    case ActivationCheckpointing::full:
      return tokens * elem * h;
    case ActivationCheckpointing::selective_op: {
      // block input + attention output (+ fp32 log-sum-exp) + kept matmul outputs (wq, wv, w1, w2 |
      // wq, wv, fc1)
      const std::int64_t kept = c.mlp == MlpKind::swiglu ? h + kv + f + h : h + kv + f;
      return tokens * elem * (h + h + kept) + tokens * 4 * c.heads;
    }
  }
  return 0;
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
  if (s.model.family == ModelFamily::custom) {
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].custom_index < 0) continue;  // implicit root: no compute
      const auto& cg = s.model.groups[static_cast<std::size_t>(groups[i].custom_index)];
      ComputePart part;
      part.label = cg.name;
      part.forward_flops = cg.forward_flops.value_or(0);
      part.backward_flops = cg.backward_flops.value_or(2 * part.forward_flops);
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
  const double td = static_cast<double>(t);
  // Every block is the same: its costs once (a sweep lowers thousands of 126-block models).
  const Flops attn = block_attention_flops(c, t, s.training.seq_len);
  const Flops fwd = block_matmul_flops(c, t) + attn;
  const Bytes all = block_activation_bytes(c, t, elem);
  const Bytes elementwise = block_elementwise_bytes(c, t, elem);
  const Bytes sac_saved = block_saved_bytes(c, t, elem, ActivationCheckpointing::selective_op);
  const Flops sac_recompute = sac_recompute_flops(c, t);
  const Bytes full_saved = block_saved_bytes(c, t, elem, ActivationCheckpointing::full);
  // Gradients flowing through one block: hidden-sized, kv-sized and ffn-sized pairs.
  const WorkspaceSizes block_workspace{t * elem * 2 * c.hidden, t * elem * 2 * c.kv_dim(),
                                       t * elem * 2 * c.ffn_hidden};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    if (g.is_root) {
      ComputePart embed;
      embed.label = "embed";
      embed.position = ComputePosition::before_children;
      embed.forward_memory_bytes = t * c.hidden * elem;
      embed.backward_flops =
          td * static_cast<double>(c.hidden);  // scatter-add into the embedding gradient
      ComputePart head;
      head.label = "head+loss";
      head.position = ComputePosition::after_children;
      const double vocab = static_cast<double>(c.vocab);
      head.forward_flops = 2.0 * td * static_cast<double>(c.hidden) * vocab + 5.0 * td * vocab;
      head.backward_flops = 4.0 * td * static_cast<double>(c.hidden) * vocab + 3.0 * td * vocab;
      head.saved_bytes =
          t * c.vocab * 4 + 2 * t * c.hidden * elem;  // fp32 log_softmax output, norm in/out
      head.saved_category = BufferCategory::logits;
      head.forward_workspace = {t * c.vocab * elem, t * c.vocab * 4};  // logits and their fp32 copy
      head.backward_workspace = {t * c.vocab * 4, t * c.vocab * 4,
                                 t * c.vocab * elem};  // nll, log_softmax grads, cast
      head.forward_memory_bytes =
          t * c.vocab * (elem + 4 + 4 + 4);  // write logits, cast, log_softmax
      head.backward_memory_bytes = t * c.vocab * (4 + 4 + 4 + 4 + elem);
      add_part(i, std::move(embed));
      add_part(i, std::move(head));
      continue;
    }
    ComputePart part;
    part.label = g.block_count == 1 ? "block" : "blocks";
    for (std::int64_t b = g.first_block; b < g.first_block + g.block_count; ++b) {
      part.forward_flops += fwd;
      part.forward_attention_flops += attn;
      part.backward_flops += 2 * (fwd - attn) + 2.5 * attn;
      part.backward_attention_flops += 2.5 * attn;
      part.forward_memory_bytes += elementwise;
      part.backward_memory_bytes += 2 * elementwise;
      if (block_fully_checkpointed(s.training, b)) {
        part.saved_bytes += full_saved;
        part.recompute_flops += fwd;
        part.recompute_memory_bytes += elementwise;
        part.recompute_bytes += all;
      } else if (s.training.activation_checkpointing == ActivationCheckpointing::selective_op) {
        part.saved_bytes += sac_saved;
        part.recompute_flops += sac_recompute;
        part.recompute_memory_bytes += elementwise;  // norms, RoPE and activations are not kept
        part.recompute_bytes += all - sac_saved;
      } else {
        part.saved_bytes += all;
      }
    }
    if (g.block_count > 0) part.backward_workspace = block_workspace;
    add_part(i, std::move(part));
  }
  return out;
}

}  // namespace shardscope
