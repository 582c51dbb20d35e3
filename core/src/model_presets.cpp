#include "shardscope/core/model_presets.hpp"

#include <array>

namespace shardscope {
namespace {

constexpr TransformerConfig llama(std::int64_t hidden, std::int64_t layers, std::int64_t heads,
                                  std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab,
                                  std::int64_t max_seq) {
  TransformerConfig c;
  c.hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.ffn_hidden = ffn;
  c.vocab = vocab;
  c.max_seq = max_seq;
  return c;  // SwiGLU, RMSNorm, RoPE, no bias, untied: the Llama defaults
}

constexpr TransformerConfig gpt(std::int64_t hidden, std::int64_t layers, std::int64_t heads,
                                std::int64_t vocab, std::int64_t max_seq) {
  TransformerConfig c;
  c.hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = heads;
  c.ffn_hidden = 4 * hidden;
  c.vocab = vocab;
  c.max_seq = max_seq;
  c.mlp = MlpKind::gelu;
  c.norm = NormKind::layernorm;
  c.pos_emb = PosEmbedding::learned;
  c.qkv_bias = c.out_proj_bias = c.mlp_bias = true;
  c.tie_embeddings = true;
  return c;
}

// The model of PyTorch's FSDP2 memory test (test_fully_shard_memory.py): LayerNorm, bias only in
// the MLP, GELU, learned positions, untied output.
constexpr TransformerConfig pytorch_test_transformer() {
  TransformerConfig c;
  c.hidden = 768;
  c.layers = 3;
  c.heads = 12;
  c.kv_heads = 12;
  c.ffn_hidden = 3072;
  c.vocab = 32;
  c.max_seq = 16;
  c.mlp = MlpKind::gelu;
  c.norm = NormKind::layernorm;
  c.pos_emb = PosEmbedding::learned;
  c.mlp_bias = true;
  return c;
}

constexpr TransformerConfig tiny() {
  TransformerConfig c = llama(256, 4, 8, 4, 688, 1024, 512);
  return c;
}

constexpr std::array kPresets{
    ModelPreset{"llama3.1-8b", "Llama 3.1 8B (Meta)",
                llama(4096, 32, 32, 8, 14336, 128256, 131072)},
    ModelPreset{"llama3.1-70b", "Llama 3.1 70B (Meta)",
                llama(8192, 80, 64, 8, 28672, 128256, 131072)},
    ModelPreset{"llama3.1-405b", "Llama 3.1 405B (Meta)",
                llama(16384, 126, 128, 8, 53248, 128256, 131072)},
    ModelPreset{"llama2-7b", "Llama 2 7B (Meta)", llama(4096, 32, 32, 32, 11008, 32000, 4096)},
    ModelPreset{"llama2-13b", "Llama 2 13B (Meta)", llama(5120, 40, 40, 40, 13824, 32000, 4096)},
    ModelPreset{"llama2-70b", "Llama 2 70B (Meta)", llama(8192, 80, 64, 8, 28672, 32000, 4096)},
    ModelPreset{"gpt3-175b", "GPT-3 175B (Brown et al. 2020), tied embeddings",
                gpt(12288, 96, 96, 50257, 2048)},
    ModelPreset{"pytorch-fsdp2-test", "PyTorch's FSDP2 memory-test transformer (3 blocks, dim 768)",
                pytorch_test_transformer()},
    ModelPreset{"tiny", "tiny Llama-style model for tests (4 blocks, dim 256)", tiny()},
};

}  // namespace

std::span<const ModelPreset> model_presets() {
  return kPresets;
}

std::optional<ModelSpec> find_model_preset(std::string_view name) {
  for (const auto& p : kPresets) {
    if (p.name == name) {
      ModelSpec spec;
      spec.name = std::string(p.name);
      spec.family = ModelFamily::transformer;
      spec.transformer = p.config;
      return spec;
    }
  }
  return std::nullopt;
}

}  // namespace shardscope
