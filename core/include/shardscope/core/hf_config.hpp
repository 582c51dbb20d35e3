#pragma once
// Imports a Hugging Face `config.json` into a transformer shape.
// Llama/Mistral/Qwen2-style keys (hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, intermediate_size, vocab_size, max_position_embeddings, tie_word_embeddings,
// attention_bias, mlp_bias) and GPT-2 (n_embd, n_layer, n_head, n_inner, n_positions) and
// GPT-NeoX (use_parallel_residual, rotary_pct) styles.

#include <filesystem>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/model_spec.hpp"

namespace shardscope {

/// Converts a parsed config.json. Adds problems (naming `origin`) for missing or unusable keys.
TransformerConfig transformer_from_hf_config(const ConfigTree& config, const std::string& origin,
                                             std::vector<Problem>& problems);

/// Parses and converts config.json text; throws ValidationError (naming `origin`) on any problem.
TransformerConfig hf_config_from_text(std::string_view text, const std::string& origin);

/// Reads and converts the file; throws ValidationError on any problem.
TransformerConfig load_hf_config(const std::filesystem::path& path);

}  // namespace shardscope
