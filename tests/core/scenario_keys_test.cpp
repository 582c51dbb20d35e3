// The key table is the one source of what a scenario may hold: every key in it is read by the
// loader (a wrong value is reported under that key, not as unknown), every bound is enforced, the
// enums are spelled by their keys' choices, a key of one FSDP API is refused under the other with
// what to write instead, a picker's value reads back, and docs/scenario.md is what the table
// generates.
#include "shardscope/core/scenario_keys.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/scenario_test_util.hpp"
#include "shardscope/core/model_presets.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope {
namespace {

const std::string kDocs = SHARDSCOPE_DOCS_DIR;

using testing::problems_of;

// A scenario in which `key` is read: custom groups for model.groups[], its API for an FSDP knob.
std::string base_for(std::string_view key) {
  if (key.starts_with("model.groups"))
    return "model: {family: custom, groups: [{name: root, params: 1, forward_flops: 1}]}\n";
  if (key_of(key).api == FsdpApi::fsdp1) return "model: {preset: tiny}\nfsdp: {api: fsdp1}\n";
  return "model: {preset: tiny}\n";
}

TEST(ScenarioKeys, EveryKeyInTheTableIsReadByTheLoader) {
  for (const auto& key : scenario_keys()) {
    if (key.type == KeyType::section || key.type == KeyType::list) continue;
    std::string path(key.path);
    if (const auto at = path.find("[]"); at != std::string::npos) path.replace(at, 2, "[0]");
    SCOPED_TRACE(path);
    // A mapping is the wrong type for every leaf: the loader must report it under the key.
    const auto problems = problems_of(base_for(key.path), {path + "={x: 1}"});
    const bool reported = std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
      return p.key == path && p.message != "unknown key";
    });
    EXPECT_TRUE(reported) << (problems.empty() ? std::string("no problem")
                                               : problems.front().to_string());
  }
}

TEST(ScenarioKeys, NumericBoundsAreEnforcedAtBothEnds) {
  for (const auto& key : scenario_keys()) {
    if (key.type != KeyType::integer || key.path.find("[]") != std::string_view::npos) continue;
    SCOPED_TRACE(std::string(key.path));
    const std::string below =
        fmt::format("{}={}", key.path, static_cast<std::int64_t>(key.min) - 1);
    const std::string above =
        fmt::format("{}={}", key.path, static_cast<std::int64_t>(key.max) + 1);
    for (const auto& set : {below, above}) {
      const auto problems = problems_of(base_for(key.path), {set});
      EXPECT_TRUE(std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
        return p.key == key.path && p.message.find("out of range") != std::string::npos;
      })) << set;
    }
  }
}

// The planner judges --fix values with key_value_problems before it searches: it must agree with
// the loader at both ends of every integer key's range and accept the range's ends.
TEST(ScenarioKeys, OneKeyValueIsJudgedAsTheLoaderJudgesIt) {
  for (const auto& key : scenario_keys()) {
    if (key.type != KeyType::integer || key.path.find("[]") != std::string_view::npos) continue;
    SCOPED_TRACE(std::string(key.path));
    const auto lo = static_cast<std::int64_t>(key.min), hi = static_cast<std::int64_t>(key.max);
    for (const auto value : {lo - 1, hi + 1}) {
      const auto problems = key_value_problems(fmt::format("{}={}", key.path, value));
      ASSERT_EQ(problems.size(), 1U) << value;
      EXPECT_EQ(problems[0].key, key.path);
      EXPECT_NE(problems[0].message.find("out of range"), std::string::npos);
    }
    EXPECT_TRUE(key_value_problems(fmt::format("{}={}", key.path, lo)).empty());
    EXPECT_TRUE(key_value_problems(fmt::format("{}={}", key.path, hi)).empty());
    EXPECT_FALSE(key_value_problems(fmt::format("{}=abc", key.path)).empty());
  }
  for (const auto& key : scenario_keys()) {
    if (key.type != KeyType::choice || key.path.find("[]") != std::string_view::npos) continue;
    SCOPED_TRACE(std::string(key.path));
    EXPECT_FALSE(key_value_problems(fmt::format("{}=no_such_choice", key.path)).empty());
  }
  const auto unknown = key_value_problems("training.lss=fused");
  ASSERT_EQ(unknown.size(), 1U);
  EXPECT_EQ(unknown[0].message, "not a scenario key");
}

// The SM count sets a GEMM's waves (kernel_shape_model.hpp): read, and bounded like the others.
TEST(ScenarioKeys, SmCountIsRead) {
  EXPECT_EQ(scenario_from_text("model: {preset: tiny}\ncluster: {gpu: {sm_count: 108}}\n", {})
                .cluster.gpu.sm_count,
            108);
  const auto problems = problems_of("model: {preset: tiny}\ncluster: {gpu: {sm_count: 0}}\n", {});
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_EQ(problems[0].key, "cluster.gpu.sm_count");
}

// Every field of MixedPrecisionPolicy, MixedPrecision, CPUOffloadPolicy and CPUOffload is a key
// that is read (issue: a configuration copied from real FSDP code validates).
TEST(ScenarioKeys, EveryFieldOfPyTorchsPrecisionAndOffloadPoliciesIsAKey) {
  for (const char* field :
       {"param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs", "buffer_dtype",
        "keep_low_precision_grads", "cast_root_forward_inputs", "module_classes_to_ignore"}) {
    const ScenarioKey* key = find_scenario_key(std::string("fsdp.mixed_precision.") + field);
    EXPECT_NE(key, nullptr) << field;
  }
  for (const char* field : {"params", "pin_memory"}) {
    const ScenarioKey* key = find_scenario_key(std::string("fsdp.cpu_offload.") + field);
    EXPECT_NE(key, nullptr) << field;
  }
  const Scenario fsdp2 = scenario_from_text(
      "model: {preset: tiny}\nfsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32, "
      "output_dtype: bf16, cast_forward_inputs: false}}\n",
      {});
  EXPECT_EQ(fsdp2.fsdp.mixed_precision.output_dtype, DType::bf16);
  EXPECT_FALSE(casts_forward_inputs(fsdp2.fsdp.mixed_precision, FsdpApi::fsdp2));
  const Scenario fsdp1 = scenario_from_text(
      "model: {preset: tiny}\nfsdp: {api: fsdp1, mixed_precision: {param_dtype: bf16, "
      "buffer_dtype: fp32, cast_root_forward_inputs: false, "
      "module_classes_to_ignore: '_BatchNorm, SyncBatchNorm'}}\n",
      {});
  const auto& mp = fsdp1.fsdp.mixed_precision;
  EXPECT_EQ(mp.buffer_dtype, DType::fp32);
  EXPECT_FALSE(mp.cast_root_forward_inputs);
  EXPECT_FALSE(casts_forward_inputs(mp, FsdpApi::fsdp1));  // FSDP1's default
  EXPECT_EQ(mp.module_classes_to_ignore, (std::vector<std::string>{"_BatchNorm", "SyncBatchNorm"}));
}

// The combinations real PyTorch refuses are refused with its reason
// (tests/pytorch/mixed_precision_oracle.py runs each); what it runs but shardscope does not model
// says so; the API's other fields are refused under the wrong API.
TEST(ScenarioKeys, MixedPrecisionCombinationsPyTorchRefusesAreRefusedWithItsReason) {
  const auto message = [](const std::string& mp, const std::string& extra = "") {
    const auto problems = problems_of(
        "model: {preset: tiny}\ntraining: {" + extra + "}\nfsdp: {mixed_precision: {" + mp + "}}\n",
        {});
    return problems.empty() ? std::string() : problems[0].key + ": " + problems[0].message;
  };
  EXPECT_NE(
      message("param_dtype: bf16, output_dtype: fp32").find("output_dtype: PyTorch refuses this"),
      std::string::npos);
  EXPECT_NE(message("param_dtype: bf16, output_dtype: fp32")
                .find("expected m1 and m2 to have the same dtype"),
            std::string::npos);
  EXPECT_EQ(message("param_dtype: bf16, output_dtype: fp32, output_dtype_modules: root"), "");
  EXPECT_EQ(message("param_dtype: bf16, output_dtype: bf16"), "");  // no copy anywhere
  EXPECT_NE(
      message("param_dtype: bf16, output_dtype: fp32, output_dtype_modules: root", "loss: chunked")
          .find("expected m1 and m2"),
      std::string::npos);
  EXPECT_NE(message("output_dtype: bf16", "autocast: bf16").find("not modelled"),
            std::string::npos);
  EXPECT_EQ(message("output_dtype: fp32", "autocast: bf16"), "");  // blocks already fp32
  EXPECT_NE(message("cast_root_forward_inputs: false").find("fsdp1"), std::string::npos);
  const auto fsdp1 = problems_of(
      "model: {preset: tiny}\nfsdp: {api: fsdp1, mixed_precision: {output_dtype: fp32}}\n", {});
  ASSERT_EQ(fsdp1.size(), 1U);
  EXPECT_NE(fsdp1[0].allowed.find("no output_dtype"), std::string::npos) << fsdp1[0].allowed;
  const auto classes = problems_of(
      "model: {preset: tiny}\nfsdp: {api: fsdp1, mixed_precision: {module_classes_to_ignore: "
      "RMSNorm}}\n",
      {});
  ASSERT_EQ(classes.size(), 1U);
  EXPECT_NE(classes[0].message.find("'RMSNorm' is not a batch-norm class"), std::string::npos);
}

TEST(ScenarioKeys, DocsAreGeneratedFromTheTable) {
  std::ifstream in(kDocs + "/scenario.md");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), scenario_keys_markdown())
      << "regenerate: shardscope keys --markdown > docs/scenario.md";
}

// The i-th choice of a key names its enum's i-th value: the last value of each enum is spelled as
// PyTorch and the scenario files spell it, and no key lists a choice its enum lacks.
template <typename E>
void expect_last_choice(std::string_view path, E last, std::string_view spelling) {
  SCOPED_TRACE(std::string(path));
  EXPECT_EQ(choice_name(path, last), spelling);
  EXPECT_EQ(split_choices(key_of(path).choices).size(), static_cast<std::size_t>(last) + 1);
  EXPECT_EQ(parse_choice<E>(path, spelling), last);
}

TEST(ScenarioKeys, EveryEnumIsSpelledByItsKeysChoices) {
  expect_last_choice("model.family", ModelFamily::custom, "custom");
  expect_last_choice("fsdp.mixed_precision.output_dtype_modules", OutputCastModules::root, "root");
  expect_last_choice("model.mlp", MlpKind::gelu_new, "gelu_new");
  expect_last_choice("model.norm", NormKind::unfused_rmsnorm, "unfused_rmsnorm");
  expect_last_choice("model.pos_emb", PosEmbedding::alibi, "alibi");
  expect_last_choice("model.attention", AttentionKind::triton, "triton");
  expect_last_choice("training.optimizer", Optimizer::sgd, "sgd");
  expect_last_choice("training.synchronize", Synchronize::after_step, "after_step");
  expect_last_choice("training.loss", LossRecipe::chunked, "chunked");
  expect_last_choice("fsdp.api", FsdpApi::fsdp1, "fsdp1");
  expect_last_choice("fsdp.sharding_strategy", ShardingStrategy::hybrid_shard_zero2,
                     "_HYBRID_SHARD_ZERO2");
  expect_last_choice("fsdp.backward_prefetch", BackwardPrefetch::none, "none");
  expect_last_choice("fsdp.requires_gradient_sync", SyncSchedule::last_microbatch,
                     "last_microbatch");
  expect_last_choice("fsdp.requires_all_reduce", SyncSchedule::last_microbatch, "last_microbatch");
  expect_last_choice("fsdp.checkpoint.state_dict_type", StateDictType::local, "LOCAL_STATE_DICT");
  // The names the reports print are the same table's.
  EXPECT_EQ(to_string(BackwardPrefetch::backward_post), "BACKWARD_POST");
  EXPECT_EQ(to_string(ShardingStrategy::shard_grad_op), "SHARD_GRAD_OP");
  EXPECT_EQ(parse_optimizer("adam"), Optimizer::adam);
  EXPECT_EQ(parse_loss_recipe("fused"), LossRecipe::fused);
  EXPECT_EQ(parse_loss_recipe("FUSED"), std::nullopt);
}

TEST(ScenarioKeys, AKnobOfOneApiIsRefusedUnderTheOtherWithWhatToWriteInstead) {
  int knobs = 0;
  for (const auto& key : scenario_keys()) {
    if (!key.api) continue;
    SCOPED_TRACE(std::string(key.path));
    ++knobs;
    EXPECT_FALSE(key.instead.empty());
    const auto other = *key.api == FsdpApi::fsdp2 ? FsdpApi::fsdp1 : FsdpApi::fsdp2;
    // Any value: the API check comes first and names the key whatever it holds.
    const auto problems =
        problems_of("model: {preset: tiny}\n",
                    {fmt::format("fsdp.api={}", to_string(other)), fmt::format("{}=1", key.path)});
    EXPECT_TRUE(std::any_of(problems.begin(), problems.end(), [&](const Problem& p) {
      return p.key == key.path &&
             p.message == fmt::format("is an {} knob, but fsdp.api is {}", to_string(*key.api),
                                      to_string(other)) &&
             p.allowed == key.instead;
    }));
  }
  EXPECT_EQ(knobs, 24);  // FSDP2's sixteen and FSDP1's eight (docs/scenario.md)
}

// Every key a picker shows has its resolved value, and that value written back as an override
// reads as the same scenario, for every example.
TEST(ScenarioKeys, APickersValueReadsBackUnchanged) {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SHARDSCOPE_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    ++examples;
    SCOPED_TRACE(entry.path().filename().string());
    const Scenario s = load_scenario(entry.path());
    for (const auto& key : scenario_keys()) {
      if (key.label.empty()) continue;
      SCOPED_TRACE(std::string(key.path));
      ASSERT_NE(key.value_of, nullptr);
      if (!key_applies(key, s.fsdp.api)) continue;
      const std::string value = key.value_of(s);
      // A custom or Hugging Face model is named by its name, not by a preset.
      if (key.path == "model.preset" && !find_model_preset(value)) continue;
      const Scenario again = load_scenario(entry.path(), {fmt::format("{}={}", key.path, value)});
      EXPECT_EQ(key.value_of(again), value);
    }
  }
  EXPECT_GE(examples, 6);  // FSDP2, FSDP1 hybrid, CPU offload, HSDP, custom groups
}

// The planner's values for a key are values the scenario reader accepts.
TEST(ScenarioKeys, ThePlannersValuesAreValidValues) {
  for (const auto& key : scenario_keys()) {
    if (key.search.values.empty()) continue;
    EXPECT_FALSE(key.label.empty()) << key.path << ": the planner names its dimension by the label";
    for (const auto value : split_choices(key.search.values)) {
      const std::string set = fmt::format("{}={}", key.path, value);
      EXPECT_TRUE(problems_of(base_for(key.path), {set}).empty()) << set;
    }
  }
}

TEST(ScenarioKeys, PathsNormaliseListIndices) {
  EXPECT_EQ(normalise_key_path("model.groups[3].name"), "model.groups[].name");
  EXPECT_EQ(normalise_key_path("model.groups.3.name"), "model.groups[].name");
  EXPECT_NE(find_scenario_key("model.groups[].params"), nullptr);
  EXPECT_EQ(find_scenario_key("model.grops"), nullptr);
}

}  // namespace
}  // namespace shardscope
