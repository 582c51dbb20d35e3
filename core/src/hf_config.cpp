#include "shardscope/core/hf_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <set>
#include <sstream>

#include "json_lines.hpp"
#include "shardscope/core/output_file.hpp"
#include "shardscope/core/scenario_keys.hpp"

namespace shardscope {
namespace {

// Keys of a Hugging Face config that do not change what shardscope models of a training step:
// metadata, token ids, numerics of the same ops (epsilons, RoPE frequencies, init) and inference
// switches. Anything neither read nor listed here, nor in kUnmodelled, fails the import.
constexpr std::array kIrrelevant{"_name_or_path",
                                 "architectures",
                                 "auto_map",
                                 "transformers_version",
                                 "torch_dtype",
                                 "dtype",
                                 "bos_token_id",
                                 "eos_token_id",
                                 "pad_token_id",
                                 "sep_token_id",
                                 "decoder_start_token_id",
                                 "id2label",
                                 "label2id",
                                 "task_specific_params",
                                 "problem_type",
                                 "finetuning_task",
                                 "tokenizer_class",
                                 "prefix",
                                 "initializer_range",
                                 "initializer_factor",
                                 "init_device",
                                 "init_config",
                                 "rms_norm_eps",
                                 "layer_norm_eps",
                                 "layer_norm_epsilon",
                                 "norm_eps",
                                 "rope_theta",
                                 "rope_scaling",
                                 "rotary_emb_base",
                                 "rotary_pct",
                                 "partial_rotary_factor",
                                 "use_cache",
                                 "pretraining_tp",
                                 "output_attentions",
                                 "output_hidden_states",
                                 "return_dict",
                                 "use_return_dict",
                                 "torchscript",
                                 "gradient_checkpointing",
                                 "scale_attn_weights",
                                 "scale_attn_by_inverse_layer_idx",
                                 "reorder_and_upcast_attn",
                                 "summary_activation",
                                 "summary_first_dropout",
                                 "summary_proj_to_labels",
                                 "summary_type",
                                 "summary_use_proj",
                                 "classifier_dropout",
                                 "logit_scale",
                                 "verbose",
                                 "learned_pos_emb",
                                 "norm_type",
                                 "use_sliding_window",
                                 "max_window_layers",
                                 "attn_config",
                                 "use_bias"};

// Keys whose presence means an architecture shardscope does not model; the import fails naming
// them rather than reading a different, dense model of the wrong size.
struct Unmodelled {
  const char* key;
  const char* what;
};
constexpr std::array kUnmodelled{
    Unmodelled{"num_local_experts", "a mixture of experts (Mixtral)"},
    Unmodelled{"num_experts", "a mixture of experts (Qwen-MoE, OLMoE)"},
    Unmodelled{"n_routed_experts", "a mixture of experts (DeepSeek)"},
    Unmodelled{"num_experts_per_tok", "a mixture of experts: tokens routed to experts"},
    Unmodelled{"moe_intermediate_size", "a mixture of experts"},
    Unmodelled{"router_aux_loss_coef", "a mixture of experts: the router's load-balancing loss"},
    Unmodelled{"output_router_logits", "a mixture of experts: the router's logits"},
    Unmodelled{"n_shared_experts", "a mixture of experts with shared experts"},
    Unmodelled{"shared_expert_intermediate_size", "a mixture of experts with shared experts"},
    Unmodelled{"kv_lora_rank", "multi-head latent attention (DeepSeek-V2/V3)"},
    Unmodelled{"q_lora_rank", "multi-head latent attention (DeepSeek-V2/V3)"},
    Unmodelled{"is_encoder_decoder", "an encoder-decoder model"},
    Unmodelled{"quantization_config", "a quantized model (weights in int4/int8/fp8)"},
    Unmodelled{"layer_types",
               "a mix of layer kinds (sliding and full attention, linear attention)"},
    Unmodelled{"num_nextn_predict_layers", "multi-token prediction layers"},
};

class HfKeys {
 public:
  HfKeys(const ConfigTree& config, std::string origin, std::vector<Problem>& problems)
      : config_(config), origin_(std::move(origin)), problems_(problems) {}

  /// Every key of the config that was neither read, nor is listed as irrelevant, nor allowed by
  /// `unmodelled_allows`: a problem naming it (and what it is, for a known unmodelled one).
  void check_the_rest() const {
    for (const auto& [key, value] : config_.items()) {
      if (read_.contains(key) ||
          std::find(kIrrelevant.begin(), kIrrelevant.end(), key) != kIrrelevant.end())
        continue;
      if (const auto why = unmodelled(key, value)) {
        if (!why->empty())
          problems_.push_back({origin_, key,
                               fmt::format("is {}, which shardscope does not model", *why),
                               "a dense decoder-only transformer"});
        continue;
      }
      problems_.push_back({origin_, key,
                           "is not read by shardscope and may change the model (it is neither "
                           "used nor known to be irrelevant)",
                           "remove it if it does not change the architecture"});
    }
  }

  // The first of `names` present as an integer, within the bounds of the scenario key it sets
  // (`scenario_key`, e.g. "model.hidden"): an HF file gets the same physical limits as a scenario.
  std::optional<std::int64_t> integer(std::initializer_list<const char*> names,
                                      std::string_view scenario_key) const {
    read_.insert(names.begin(), names.end());
    for (const char* name : names) {
      auto it = config_.find(name);
      if (it == config_.end() || !it->is_number_integer()) continue;
      const auto value = it->get<std::int64_t>();
      const ScenarioKey* key = find_scenario_key(scenario_key);
      if (key && (static_cast<double>(value) < key->min || static_cast<double>(value) > key->max)) {
        problems_.push_back(
            {origin_, name, fmt::format("{} is out of range", value), key_range_text(*key)});
        return std::nullopt;
      }
      return value;
    }
    return std::nullopt;
  }
  std::int64_t required(std::initializer_list<const char*> names,
                        std::string_view scenario_key) const {
    const std::size_t before = problems_.size();
    if (auto v = integer(names, scenario_key); v && *v > 0) return *v;
    if (problems_.size() == before) {
      problems_.push_back({origin_, *names.begin(), "missing or not a positive integer",
                           fmt::format("one of: {}", fmt::join(names, ", "))});
    }
    return 1;
  }
  // The largest of `names` present as a probability in [0, 0.99] (model.dropout's range).
  std::optional<double> largest_probability(std::initializer_list<const char*> names) const {
    read_.insert(names.begin(), names.end());
    std::optional<double> largest;
    for (const char* name : names) {
      auto it = config_.find(name);
      if (it == config_.end() || !it->is_number()) continue;
      const double p = it->get<double>();
      if (p < 0 || p > 0.99) {
        problems_.push_back(
            {origin_, name, fmt::format("{} is not a dropout probability", p), "0 to 0.99"});
        continue;
      }
      largest = std::max(largest.value_or(0.0), p);
    }
    return largest;
  }
  /// A key read by the caller itself.
  void mark_read(const char* name) const { read_.insert(name); }

  std::optional<bool> boolean(const char* name) const {
    read_.insert(name);
    auto it = config_.find(name);
    if (it != config_.end() && it->is_boolean()) return it->get<bool>();
    return std::nullopt;
  }
  std::string text(const char* name) const {
    read_.insert(name);
    auto it = config_.find(name);
    return it != config_.end() && it->is_string() ? it->get<std::string>() : std::string();
  }

 private:
  // nullopt: not an unmodelled key; "": present but harmless here (a null or false value, a
  // sliding window the config switches off, a head_dim equal to hidden ÷ heads); else what it is.
  std::optional<std::string> unmodelled(const std::string& key, const ConfigTree& value) const {
    if (key == "sliding_window") {
      const auto use = config_.find("use_sliding_window");
      const bool off = use != config_.end() && use->is_boolean() && !use->get<bool>();
      if (value.is_null() || off) return "";
      return std::string("sliding-window attention (Mistral, Gemma)");
    }
    if (key == "head_dim") {
      const auto hidden = config_.find("hidden_size"), heads = config_.find("num_attention_heads");
      if (value.is_number_integer() && hidden != config_.end() && heads != config_.end() &&
          hidden->is_number_integer() && heads->is_number_integer() &&
          heads->get<std::int64_t>() > 0 &&
          value.get<std::int64_t>() * heads->get<std::int64_t>() == hidden->get<std::int64_t>())
        return "";
      return std::string("a head dimension other than hidden_size ÷ num_attention_heads");
    }
    for (const auto& u : kUnmodelled) {
      if (key != u.key) continue;
      if (value.is_null() || (value.is_boolean() && !value.get<bool>()) ||
          (value.is_number() && value.get<double>() == 0))
        return "";
      return std::string(u.what);
    }
    return std::nullopt;
  }

  const ConfigTree& config_;
  std::string origin_;
  std::vector<Problem>& problems_;
  mutable std::set<std::string, std::less<>> read_;  // every key name looked for
};

}  // namespace

TransformerConfig transformer_from_hf_config(const ConfigTree& config, const std::string& origin,
                                             std::vector<Problem>& problems) {
  TransformerConfig c;
  if (!config.is_object()) {
    problems.push_back({origin, "", "a Hugging Face config must be a JSON object", ""});
    return c;
  }
  const HfKeys keys(config, origin, problems);
  const std::string model_type = keys.text("model_type");
  const bool gpt2_style = config.contains("n_embd");
  const bool neox_style = model_type == "gpt_neox";
  const bool mpt_style = model_type == "mpt";

  c.hidden = keys.required({"hidden_size", "n_embd", "d_model"}, "model.hidden");
  c.layers =
      keys.required({"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, "model.layers");
  c.heads = keys.required({"num_attention_heads", "n_head", "n_heads"}, "model.heads");
  c.kv_heads = keys.integer({"num_key_value_heads"}, "model.kv_heads").value_or(c.heads);
  c.vocab = keys.required({"vocab_size"}, "model.vocab");
  c.max_seq = keys.integer({"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len"},
                           "model.max_seq")
                  .value_or(2048);

  if (mpt_style) {
    // transformers' MptConfig/MptModel: fused Wqkv, up_proj/down_proj of expansion_ratio × d_model
    // with GELU, LayerNorms and linears without bias (no_bias), ALiBi, tied embeddings.
    const auto ratio = keys.integer({"expansion_ratio"}, "model.ffn_hidden").value_or(4);
    c.ffn_hidden = ratio * c.hidden;
    c.mlp = MlpKind::gelu;
    // llm-foundry's MPT (what mosaicml's configs load through auto_map) builds the norm its
    // norm_type names, in model.norm's spelling; its default, low_precision_layernorm, is
    // LPLayerNorm. transformers' own MptModel builds nn.LayerNorm whatever the config says: a
    // config without it is that.
    const std::string norm = keys.text("norm_type");
    if (norm.empty()) {
      c.norm = NormKind::layernorm;
    } else if (const auto kind = parse_choice<NormKind>("model.norm", norm)) {
      c.norm = *kind;
    } else {
      problems.push_back({origin, "norm_type",
                          fmt::format("'{}' is not a norm shardscope models", norm),
                          std::string(key_of("model.norm").choices)});
    }
    c.pos_emb = PosEmbedding::alibi;
    const bool bias = !keys.boolean("no_bias").value_or(true);
    c.qkv_bias = c.out_proj_bias = c.mlp_bias = c.norm_bias = bias;
    c.tie_embeddings = keys.boolean("tie_word_embeddings").value_or(true);
  } else if (gpt2_style || neox_style) {
    c.ffn_hidden =
        keys.integer({"n_inner", "intermediate_size"}, "model.ffn_hidden").value_or(4 * c.hidden);
    // GPT2Config's activation_function defaults to gelu_new (NewGELUActivation, elementwise);
    // GPTNeoXConfig's hidden_act to gelu (nn.GELU). gelu_pytorch_tanh is F.gelu, fused.
    const std::string act = gpt2_style ? keys.text("activation_function") : keys.text("hidden_act");
    c.mlp = (gpt2_style && act.empty()) || act == "gelu_new" ? MlpKind::gelu_new : MlpKind::gelu;
    c.norm = NormKind::layernorm;
    c.pos_emb = gpt2_style ? PosEmbedding::learned : PosEmbedding::rope;
    c.qkv_bias = c.out_proj_bias = c.mlp_bias = true;
    c.tie_embeddings = keys.boolean("tie_word_embeddings").value_or(gpt2_style);
    // GPTNeoXConfig's use_parallel_residual defaults to true.
    c.parallel_residual = neox_style && keys.boolean("use_parallel_residual").value_or(true);
  } else {
    c.ffn_hidden = keys.required({"intermediate_size"}, "model.ffn_hidden");
    const std::string act = keys.text("hidden_act");
    c.mlp = (act.empty() || act == "silu" || act == "swiglu") ? MlpKind::swiglu : MlpKind::gelu;
    c.norm = NormKind::rmsnorm;
    c.pos_emb = PosEmbedding::rope;
    const bool attention_bias = keys.boolean("attention_bias").value_or(false);
    c.qkv_bias = attention_bias || model_type == "qwen2";  // Qwen2: q/k/v bias, no o bias
    c.out_proj_bias = attention_bias;
    c.mlp_bias = keys.boolean("mlp_bias").value_or(false);
    c.tie_embeddings = keys.boolean("tie_word_embeddings").value_or(false);
  }
  // One dropout probability for every site: the largest the config gives. GPT-2's config class
  // defaults resid_pdrop, embd_pdrop and attn_pdrop to 0.1 (transformers' GPT2Config); the
  // others default to no dropout.
  c.dropout =
      gpt2_style
          ? keys.largest_probability({"resid_pdrop", "embd_pdrop", "attn_pdrop"}).value_or(0.1)
          : keys.largest_probability({"attention_dropout", "hidden_dropout", "resid_pdrop",
                                      "attn_pdrop", "emb_pdrop", "embd_pdrop"})
                .value_or(0.0);
  if (mpt_style) {
    // MPT keeps its attention options in attn_config (alibi, the kernel, attn_pdrop): its
    // attention dropout is one more site.
    keys.mark_read("attn_config");
    const auto attn = config.find("attn_config");
    if (attn != config.end() && attn->is_object()) {
      const auto p = attn->find("attn_pdrop");
      if (p != attn->end() && p->is_number() && p->get<double>() > 0 && p->get<double>() <= 0.99)
        c.dropout = std::max(c.dropout, p->get<double>());
    }
  }
  if (c.heads > 0 && c.hidden % c.heads != 0) {
    problems.push_back({origin, "num_attention_heads",
                        fmt::format("{} does not divide hidden size {}", c.heads, c.hidden), ""});
  }
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0) {
    problems.push_back({origin, "num_key_value_heads",
                        fmt::format("{} does not divide {} heads", c.kv_heads, c.heads), ""});
  }
  keys.check_the_rest();
  return c;
}

TransformerConfig load_hf_config(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw ValidationError(
        {Problem{path.string(), "", "cannot read the Hugging Face config", "a config.json file"}});
  }
  return hf_config_from_text(read_text_file(path), path.string());
}

TransformerConfig hf_config_from_text(std::string_view text, const std::string& origin) {
  const ConfigTree tree = detail::parse_json(text, origin);
  std::vector<Problem> problems;
  auto config = transformer_from_hf_config(tree, origin, problems);
  throw_if_any(std::move(problems));
  return config;
}

}  // namespace shardscope
