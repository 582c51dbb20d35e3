// The key table is the one source of what a scenario may hold: every key in it is read by the
// loader (a wrong value is reported under that key, not as unknown), every bound is enforced, and
// docs/scenario.md is what the table generates.
#include "shardscope/core/scenario_keys.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "shardscope/core/scenario.hpp"

namespace shardscope {
namespace {

const std::string kDocs = SHARDSCOPE_DOCS_DIR;

std::vector<Problem> problems_of(std::string_view text, const std::vector<std::string>& overrides) {
  try {
    scenario_from_text(text, overrides);
  } catch (const ValidationError& e) {
    return e.problems();
  }
  return {};
}

// A scenario in which `key` is read: custom groups for model.groups[], fsdp1 for its knobs.
std::string base_for(std::string_view key) {
  if (key.starts_with("model.groups"))
    return "model: {family: custom, groups: [{name: root, params: 1, forward_flops: 1}]}\n";
  for (const char* fsdp1 : {"fsdp.sharding_strategy", "fsdp.backward_prefetch",
                            "fsdp.forward_prefetch:", "fsdp.limit_all_gathers",
                            "fsdp.mixed_precision.keep_low_precision_grads"}) {
    if (std::string(key) + ":" == fsdp1 || key == fsdp1)
      return "model: {preset: tiny}\nfsdp: {api: fsdp1}\n";
  }
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

TEST(ScenarioKeys, RejectedKeysSayWhy) {
  const auto problems =
      problems_of("model: {preset: tiny}\nfsdp: {mixed_precision: {buffer_dtype: fp32}}\n", {});
  ASSERT_EQ(problems.size(), 1U);
  EXPECT_EQ(problems[0].key, "fsdp.mixed_precision.buffer_dtype");
  EXPECT_NE(problems[0].message.find("not modelled"), std::string::npos);
}

TEST(ScenarioKeys, DocsAreGeneratedFromTheTable) {
  std::ifstream in(kDocs + "/scenario.md");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), scenario_keys_markdown())
      << "regenerate: shardscope keys --markdown > docs/scenario.md";
}

TEST(ScenarioKeys, PathsNormaliseListIndices) {
  EXPECT_EQ(normalise_key_path("model.groups[3].name"), "model.groups[].name");
  EXPECT_EQ(normalise_key_path("model.groups.3.name"), "model.groups[].name");
  EXPECT_NE(find_scenario_key("model.groups[].params"), nullptr);
  EXPECT_EQ(find_scenario_key("model.grops"), nullptr);
}

}  // namespace
}  // namespace shardscope
