#include "shardscope/core/config_reader.hpp"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>

namespace shardscope {
namespace {

TEST(ConfigTree, YamlScalarsKeepTheirTypes) {
  const auto t = parse_config_text("a: true\nb: 12\nc: 1.5\nd: bf16\ne: '12'\nf: ~\n", "x");
  EXPECT_TRUE(t["a"].is_boolean());
  EXPECT_TRUE(t["b"].is_number_integer());
  EXPECT_TRUE(t["c"].is_number_float());
  EXPECT_TRUE(t["d"].is_string());
  EXPECT_TRUE(t["e"].is_string());  // quoted stays a string
  EXPECT_TRUE(t["f"].is_null());
}

// config_to_yaml (what `plan --emit scenario` writes) reads back as the tree it was made of: every
// example scenario, and strings YAML would read as something else.
TEST(ConfigTree, WrittenYamlReadsBackAsTheSameTree) {
  std::vector<ConfigTree> trees;
  for (const auto& entry : std::filesystem::directory_iterator(SHARDSCOPE_EXAMPLES_DIR)) {
    if (entry.path().extension() == ".yaml") trees.push_back(load_config_file(entry.path()));
  }
  ASSERT_GE(trees.size(), 5U);
  trees.push_back(parse_config_text(R"({"a": "true", "b": "1e3", "c": "", "d": "x: y", "e": "-",
      "f": "null", "g": [{"h": 1, "i": [1, 2.5, "s"]}, {"j": {}}], "k": [], "l": {"m": -0.1},
      "n": "two words", "o": "#", "p": [[1, 2], ["q"]], "r": "yes", "s": "80GiB"})",
                                    "tricky"));
  for (const ConfigTree& tree : trees) {
    const std::string yaml = config_to_yaml(tree);
    EXPECT_EQ(parse_config_text(yaml, "written"), tree) << yaml;
  }
}

TEST(ConfigTree, SyntaxErrorsNameTheLine) {
  try {
    parse_config_text("a: [1, 2\nb: 3\n", "bad.yaml");
    FAIL() << "expected a syntax error";
  } catch (const ValidationError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_EQ(e.problems()[0].file, "bad.yaml");
    EXPECT_NE(e.problems()[0].message.find("line"), std::string::npos);
  }
}

// Override values that are plain words skip the YAML parser: each must come out as YAML reads it.
TEST(ConfigTree, PlainOverrideValuesReadAsYamlReadsThem) {
  for (const std::string text :
       {"true",   "True",  "FALSE", "null",         "Null",   "NULL",
        "12",     "007",   "1.5",   "1e5",          "2.5e-3", "9223372036854775808",
        "0x1F",   "1_000", "bf16",  "selective_op", "80GiB",  "a.b",
        "v1.2.3", "x+y",   "inf",   "nan"}) {
    const ConfigTree yaml = parse_config_text("v: " + text + "\n", "x")["v"];
    const ConfigTree value = parse_override_value(text);
    EXPECT_EQ(value, yaml) << text;
    EXPECT_EQ(value.type(), yaml.type()) << text;
  }
  // Anything else still goes through YAML: lists, mappings, quoted text, signs, spaces.
  EXPECT_TRUE(parse_override_value("[1, 2]").is_array());
  EXPECT_TRUE(parse_override_value("{a: 1}").is_object());
  EXPECT_TRUE(parse_override_value("'12'").is_string());
  EXPECT_EQ(parse_override_value("-3"), -3);
  EXPECT_EQ(parse_override_value(" 4 "), 4);
}

TEST(ConfigTree, OverridesCreateKeysAndIndexLists) {
  auto t = parse_config_text("model: {groups: [{name: a, params: 1}]}\n", "x");
  std::vector<Problem> problems;
  apply_override(t, "fsdp.mesh.shard=4", problems);
  apply_override(t, "model.groups.0.params=7", problems);
  apply_override(t, "model.groups[0].name=b", problems);
  apply_override(t, "fsdp.reshard_after_forward=false", problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(t["fsdp"]["mesh"]["shard"], 4);
  EXPECT_EQ(t["model"]["groups"][0]["params"], 7);
  EXPECT_EQ(t["model"]["groups"][0]["name"], "b");
  EXPECT_EQ(t["fsdp"]["reshard_after_forward"], false);
  apply_override(t, "model.groups.3.params=1", problems);
  apply_override(t, "no_equals_sign", problems);
  EXPECT_EQ(problems.size(), 2u);
}

// Plain key paths are looked up in an index of the mapping keys, paths with list indices are
// walked: both must find exactly what walking the tree part by part finds.
TEST(ConfigReader, FindsKeysByIndexAsByWalkingTheTree) {
  const auto t = parse_config_text(
      "a: {b: {c: 1, d: ~}, 'e.f': 2, '7': 3, x7: 4}\n"
      "l: [{n: 5}, {n: 6}]\n"
      "s: text\n",
      "f.yaml");
  ConfigReader r(t, "f.yaml");
  EXPECT_EQ(r.get_int("a.b.c", 0, 9), 1);
  EXPECT_FALSE(r.has("a.b.d"));          // null counts as absent
  EXPECT_EQ(r.get_int("a.7", 0, 9), 3);  // a key of digits, in a mapping
  EXPECT_EQ(r.get_int("a.x7", 0, 9), 4);
  EXPECT_EQ(r.get_int("l[1].n", 0, 9), 6);  // list index, both spellings
  EXPECT_EQ(r.get_int("l.0.n", 0, 9), 5);
  EXPECT_FALSE(r.has("l.2.n"));
  EXPECT_EQ(r.get_int("a..b.c", 0, 9), 1);  // empty parts are skipped, as when walking
  EXPECT_FALSE(r.has("s.t"));               // below a plain value
  EXPECT_FALSE(r.has("a.b.c.z"));
  EXPECT_FALSE(r.has("zz"));
  EXPECT_EQ(r.get_string("s"), "text");
  r.finish();
  // Only the dotted key is unknown: everything else was read or lies above a read key.
  ASSERT_EQ(r.problems().size(), 1u);
  EXPECT_EQ(r.problems()[0].key, "a.e.f");
  ConfigReader dotted(t, "f.yaml");
  EXPECT_FALSE(dotted.has("a.e.f"));  // a key with a dot in it is not reachable by a dotted path
}

TEST(ConfigReader, CollectsEveryProblemAndUnknownKeysWithSuggestions) {
  const auto t =
      parse_config_text("training: {seq_len: x, micro_bach: 2, optimizer: adamv}\n", "f.yaml");
  ConfigReader r(t, "f.yaml");
  constexpr std::array<std::string_view, 3> kOpts{"adamw", "adam", "sgd"};
  EXPECT_FALSE(r.get_int("training.seq_len", 1, 100));
  EXPECT_FALSE(r.get_int("training.micro_batch", 1, 100));
  EXPECT_FALSE(r.get_enum("training.optimizer", kOpts));
  r.finish();
  const auto& p = r.problems();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].key, "training.seq_len");
  EXPECT_EQ(p[1].key, "training.optimizer");
  EXPECT_NE(p[1].message.find("did you mean 'adamw'"), std::string::npos);
  EXPECT_EQ(p[2].key, "training.micro_bach");
  EXPECT_EQ(p[2].allowed, "did you mean 'training.micro_batch'?");
}

TEST(ConfigReader, SuggestsTheSectionAKeyBelongsTo) {
  const auto t = parse_config_text("model: {seq_len: 4}\ntraining: {}\n", "f.yaml");
  ConfigReader r(t, "f.yaml");
  r.get_int("training.seq_len", 1, 10);
  r.get_int("model.hidden", 1, 10);
  r.finish();
  ASSERT_EQ(r.problems().size(), 1u);
  EXPECT_EQ(r.problems()[0].allowed, "did you mean 'training.seq_len'?");
}

TEST(EditDistance, ClosestMatchRespectsADistanceLimit) {
  const std::vector<std::string> words{"validate", "presets", "lower"};
  EXPECT_EQ(closest_match("valdate", words), "validate");
  EXPECT_EQ(closest_match("zzzzzz", words), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace shardscope
