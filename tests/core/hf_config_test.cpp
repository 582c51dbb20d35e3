#include "shardscope/core/hf_config.hpp"

#include <gtest/gtest.h>

#include "shardscope/core/model_presets.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {
namespace {

const std::string kData = SHARDSCOPE_TEST_DATA_DIR;

TEST(HfConfig, LlamaConfigMatchesThePreset) {
  const auto imported = load_hf_config(kData + "/hf/llama-3.1-8b.json");
  ModelSpec m;
  m.transformer = imported;
  EXPECT_EQ(m.total_params(), find_model_preset("llama3.1-8b")->total_params());
  EXPECT_EQ(imported.kv_heads, 8);
  EXPECT_EQ(imported.mlp, MlpKind::swiglu);
}

TEST(HfConfig, Gpt2ConfigHasLearnedPositionsBiasesAndTiedHead) {
  const auto c = load_hf_config(kData + "/hf/gpt2.json");
  EXPECT_EQ(c.pos_emb, PosEmbedding::learned);
  EXPECT_TRUE(c.tie_embeddings);
  ModelSpec m;
  m.transformer = c;
  EXPECT_EQ(m.total_params(), 124'439'808);  // GPT-2 small, as Hugging Face reports it
  EXPECT_DOUBLE_EQ(c.dropout, 0.1);          // GPT2Config's default when the file gives none
  EXPECT_EQ(c.mlp, MlpKind::gelu_new);       // activation_function: NewGELUActivation
  EXPECT_FALSE(c.parallel_residual);
}

TEST(HfConfig, GptNeoXHasAParallelResidualAndAFusedGelu) {
  const auto c = load_hf_config(kData + "/hf/pythia-1.4b.json");
  EXPECT_TRUE(c.parallel_residual);
  EXPECT_EQ(c.mlp, MlpKind::gelu);
  EXPECT_EQ(c.pos_emb, PosEmbedding::rope);
  EXPECT_FALSE(c.tie_embeddings);
  ModelSpec m;
  m.transformer = c;
  EXPECT_EQ(m.total_params(), 1'414'647'808);  // Pythia-1.4B, as Hugging Face reports it
}

TEST(HfConfig, MptHasAlibiAndNoBiasAnywhere) {
  const auto c = load_hf_config(kData + "/hf/mpt-7b.json");
  EXPECT_EQ(c.pos_emb, PosEmbedding::alibi);
  EXPECT_EQ(c.ffn_hidden, 4 * 4096);
  EXPECT_FALSE(c.qkv_bias || c.out_proj_bias || c.mlp_bias || c.norm_bias);
  EXPECT_TRUE(c.tie_embeddings);
  ModelSpec m;
  m.transformer = c;
  EXPECT_EQ(m.total_params(), 6'649'286'656);  // MPT-7B, as Hugging Face reports it
}

// llm-foundry's MPT builds the norm norm_type names (LPLayerNorm by default in its configs);
// transformers' MptModel, which a config without it describes, a LayerNorm.
TEST(HfConfig, MptNormTypeNamesTheNormLlmFoundryBuilds) {
  const auto with = [](const std::string& norm_type, std::vector<Problem>& problems) {
    const std::string text = R"({"model_type": "mpt", "d_model": 64, "n_layers": 2,
        "n_heads": 4, "vocab_size": 100)" +
                             norm_type + "}";
    return transformer_from_hf_config(parse_config_text(text, "config.json"), "config.json",
                                      problems);
  };
  std::vector<Problem> problems;
  EXPECT_EQ(with("", problems).norm, NormKind::layernorm);
  EXPECT_EQ(with(R"(, "norm_type": "low_precision_layernorm")", problems).norm,
            NormKind::low_precision_layernorm);
  EXPECT_EQ(with(R"(, "norm_type": "layernorm")", problems).norm, NormKind::layernorm);
  EXPECT_TRUE(problems.empty());
  with(R"(, "norm_type": "triton_rmsnorm")", problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, "norm_type");
  EXPECT_NE(problems[0].to_string().find("'triton_rmsnorm' is not a norm shardscope models"),
            std::string::npos);
}

TEST(HfConfig, DropoutIsTheLargestProbabilityTheConfigGives) {
  std::vector<Problem> problems;
  const auto llama = transformer_from_hf_config(
      parse_config_text(R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "vocab_size": 100, "intermediate_size": 128, "attention_dropout": 0.05})",
                        "c.json"),
      "c.json", problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_DOUBLE_EQ(llama.dropout, 0.05);
  const auto gpt2 = transformer_from_hf_config(
      parse_config_text(R"({"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
          "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0})",
                        "c.json"),
      "c.json", problems);
  EXPECT_DOUBLE_EQ(gpt2.dropout, 0.0);
  transformer_from_hf_config(
      parse_config_text(R"({"n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
          "resid_pdrop": 2})",
                        "c.json"),
      "c.json", problems);
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_EQ(problems[0].key, "resid_pdrop");
}

TEST(HfConfig, Qwen2HasQkvBiasOnly) {
  const auto c = load_hf_config(kData + "/hf/qwen2-0.5b.json");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.out_proj_bias);
  ModelSpec m;
  m.transformer = c;
  EXPECT_EQ(m.total_params(), 494'032'768);  // Qwen2-0.5B (tied), as Hugging Face reports it
}

std::vector<Problem> import_problems(const std::string& json) {
  std::vector<Problem> problems;
  transformer_from_hf_config(parse_config_text(json, "config.json"), "config.json", problems);
  return problems;
}

bool names(const std::vector<Problem>& problems, std::string_view key, std::string_view text) {
  return std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
    return p.key == key && p.message.find(text) != std::string::npos;
  });
}

// An architecture shardscope does not model is refused naming the key, never read as a dense
// model of another size (Mixtral 8x7B's config validated as a 7.24 B dense model).
TEST(HfConfig, AnUnmodelledArchitectureIsRefusedNamingTheKey) {
  const std::string dense = R"("hidden_size": 4096, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
      "intermediate_size": 14336, "model_type": "mixtral")";
  const auto mixtral =
      import_problems("{" + dense + R"(, "num_local_experts": 8, "num_experts_per_tok": 2})");
  EXPECT_TRUE(names(mixtral, "num_local_experts", "is a mixture of experts (Mixtral)"));
  EXPECT_TRUE(names(mixtral, "num_experts_per_tok", "mixture of experts"));
  EXPECT_TRUE(names(import_problems("{" + dense + R"(, "kv_lora_rank": 512})"), "kv_lora_rank",
                    "multi-head latent attention"));
  EXPECT_TRUE(names(import_problems("{" + dense + R"(, "sliding_window": 4096})"), "sliding_window",
                    "sliding-window attention"));
  EXPECT_TRUE(names(import_problems("{" + dense + R"(, "head_dim": 256})"), "head_dim",
                    "a head dimension other than"));
  EXPECT_TRUE(names(import_problems("{" + dense + R"(, "frobnication": 3})"), "frobnication",
                    "is not read by shardscope"));
  // Switched off, or equal to what is modelled: no problem.
  EXPECT_TRUE(import_problems("{" + dense +
                              R"(, "sliding_window": 4096, "use_sliding_window": false,
          "head_dim": 128, "num_local_experts": 0, "quantization_config": null})")
                  .empty());
}

// A complete config as the Hub serves it (meta-llama/Llama-3.1-8B): every key read or known to
// be irrelevant to a training step.
TEST(HfConfig, AFullHubConfigHasNoUnknownKey) {
  const auto problems = import_problems(R"({"architectures": ["LlamaForCausalLM"],
      "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
      "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
      "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
      "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
      "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
      "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_cache": true,
      "vocab_size": 128256})");
  for (const auto& p : problems) ADD_FAILURE() << p.to_string();
}

TEST(HfConfig, MissingKeysAreProblems) {
  const auto tree = parse_config_text(R"({"hidden_size": 64})", "c.json");
  std::vector<Problem> problems;
  transformer_from_hf_config(tree, "c.json", problems);
  EXPECT_GE(problems.size(), 3u);  // layers, heads, vocab (and intermediate size)
}

TEST(HfConfig, ScenarioResolvesThePathRelativeToTheScenarioFile) {
  const auto s = load_scenario(kData + "/scenarios/hf_import.yaml");
  EXPECT_EQ(s.model.total_params(), 8'030'261'248);
}

}  // namespace
}  // namespace shardscope
