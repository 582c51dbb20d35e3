#pragma once
// Scenario files as a generic tree: YAML or JSON in, one nlohmann::json tree out, plus
// `--set dotted.key=value` overrides. Typed reading with every problem collected lives in
// config_reader.hpp.

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/error.hpp"

namespace shardscope {

using ConfigTree = nlohmann::json;

/// Parses YAML (a superset of JSON) text into a tree. Scalars become bool, integer, float or
/// string as YAML's core schema says; quoted scalars stay strings. Throws ValidationError with the
/// origin, line and column on a syntax error.
ConfigTree parse_config_text(std::string_view text, const std::string& origin);

/// Reads a .yaml/.yml/.json file. Throws ValidationError when unreadable or malformed.
ConfigTree load_config_file(const std::filesystem::path& path);

/// The tree as block-style YAML that parse_config_text reads back to the same tree: maps as
/// `key: value` lines (keys in the tree's order), lists of scalars in flow style, strings quoted
/// wherever YAML would read them as something else.
std::string config_to_yaml(const ConfigTree& tree);

/// Applies one "dotted.key=value" assignment (list items as `groups.2.params` or
/// `groups[2].params`). The value is parsed as YAML, so `true`, `2`, `bf16`, `[1, 2]` keep their
/// types. A malformed assignment adds a Problem instead of throwing.
void apply_override(ConfigTree& tree, std::string_view assignment, std::vector<Problem>& problems);
/// The value of an override as YAML reads it ("2" → 2, "true" → true, "[1, 2]" → a list); text
/// that is not YAML stays a string.
ConfigTree parse_override_value(std::string_view text);
/// Sets `key` (dotted, with list indices) to an already parsed value; adds a Problem when the path
/// cannot be set.
void set_override(ConfigTree& tree, std::string_view key, const ConfigTree& value,
                  std::vector<Problem>& problems);

/// Whether `c` separates the parts of a key path ("a.b[2].c").
constexpr bool is_key_separator(char c) {
  return c == '.' || c == '[' || c == ']';
}

/// Calls f(part) for each part of "a.b[2].c" or "a.b.2.c" ("a", "b", "2", "c"), without allocating.
template <typename F>
void for_each_key_part(std::string_view path, F&& f) {
  // A table lookup per character: scenario reading splits a few thousand key paths per sweep point.
  static constexpr auto kSeparator = [] {
    std::array<bool, 256> t{};
    for (int c = 0; c < 256; ++c)
      t[static_cast<std::size_t>(c)] = is_key_separator(static_cast<char>(c));
    return t;
  }();
  std::size_t begin = 0;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (!kSeparator[static_cast<unsigned char>(path[i])]) continue;
    if (i > begin) f(path.substr(begin, i - begin));
    begin = i + 1;
  }
  if (path.size() > begin) f(path.substr(begin));
}

/// "cluster.gpu.device_profile" as a JSON pointer into a tree ("/cluster/gpu/device_profile").
ConfigTree::json_pointer key_pointer(std::string_view dotted_path);

/// Splits "a.b[2].c" or "a.b.2.c" into {"a", "b", "2", "c"}.
std::vector<std::string> split_key_path(std::string_view path);

/// Whether a key part is a list index (digits only).
bool is_key_index(std::string_view part);

/// "model.groups[3].name" / "model.groups.3.name" → "model.groups[].name", into `out` (reused:
/// the config reader normalises every key it is asked for).
void normalise_key_path(std::string_view path, std::string& out);
std::string normalise_key_path(std::string_view path);

}  // namespace shardscope
