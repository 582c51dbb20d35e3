#include "shardscope/core/config_tree.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "shardscope/core/output_file.hpp"

namespace shardscope {
namespace {

bool is_int_text(const std::string& s) {
  static const std::regex kIntText(R"([-+]?[0-9]+)");
  return std::regex_match(s, kIntText);
}
bool is_float_text(const std::string& s) {
  static const std::regex kFloatText(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  return std::regex_match(s, kFloatText);
}

// A plain (unquoted) scalar's value: null, a boolean, an integer, a number or the text itself.
ConfigTree plain_scalar_to_json(const std::string& text) {
  if (text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (is_int_text(text)) {
    std::int64_t v = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), v);
    if (ec == std::errc() && ptr == text.data() + text.size()) return v;
    return text;  // out of range: keep the text, typed readers report it
  }
  if (is_float_text(text)) {
    double v = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), v);
    if (ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(v)) return v;
    return text;  // beyond a double's range (1e999, 1e-999): typed readers report the text
  }
  return text;
}

ConfigTree scalar_to_json(const YAML::Node& node) {
  if (node.Tag() == "!") return node.Scalar();  // quoted: always a string
  return plain_scalar_to_json(node.Scalar());
}

// Text YAML reads as a plain scalar of exactly that text: letters, digits and _ . + - only, not
// starting with . + or - (so no sequence entry, no .inf, no sign games) — "true", "none", "2",
// "bf16", "selective_op". The common --set and --grid value; no YAML parse needed.
bool is_simple_plain_scalar(std::string_view text) {
  if (text.empty()) return false;
  const auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  if (!word(text.front())) return false;
  return std::all_of(text.begin(), text.end(),
                     [&](char c) { return word(c) || c == '.' || c == '+' || c == '-'; });
}

// Limits on what one document may expand to. YAML aliases let a few hundred bytes name billions
// of values ("billion laughs"); a scenario has about a hundred keys, a custom model a few thousand.
constexpr std::size_t kMaxValues = 1'000'000;
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxDocumentBytes = std::size_t{16} << 20;

struct TreeBudget {
  std::size_t values = 0;
};

class TooLarge : public std::exception {};

ConfigTree yaml_to_json(const YAML::Node& node, TreeBudget& budget, int depth) {
  if (++budget.values > kMaxValues || depth > kMaxDepth) throw TooLarge();
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(node);
    case YAML::NodeType::Sequence: {
      ConfigTree out = ConfigTree::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item, budget, depth + 1));
      return out;
    }
    case YAML::NodeType::Map: {
      ConfigTree out = ConfigTree::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar())
          throw YAML::ParserException(kv.first.Mark(),
                                      "a key must be a plain name, not a list or mapping");
        out[kv.first.Scalar()] = yaml_to_json(kv.second, budget, depth + 1);
      }
      return out;
    }
  }
  return nullptr;
}

ConfigTree yaml_to_json(const YAML::Node& node, const std::string& origin) {
  TreeBudget budget;
  try {
    return yaml_to_json(node, budget, 0);
  } catch (const TooLarge&) {
    throw ValidationError({Problem{
        origin, "",
        fmt::format("the document expands to more than {} values or nests deeper than {} levels "
                    "(YAML aliases repeating a large node?)",
                    kMaxValues, kMaxDepth),
        "a scenario of at most that size"}});
  }
}

}  // namespace

ConfigTree::json_pointer key_pointer(std::string_view dotted_path) {
  ConfigTree::json_pointer pointer;
  for_each_key_part(dotted_path, [&](std::string_view part) { pointer /= std::string(part); });
  return pointer;
}

std::vector<std::string> split_key_path(std::string_view path) {
  std::vector<std::string> parts;
  for_each_key_part(path, [&](std::string_view part) { parts.emplace_back(part); });
  return parts;
}

bool is_key_index(std::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

void normalise_key_path(std::string_view path, std::string& out) {
  out.clear();
  for_each_key_part(path, [&](std::string_view part) {
    if (is_key_index(part)) {
      out += "[]";
    } else {
      if (!out.empty()) out += '.';
      out += part;
    }
  });
}

std::string normalise_key_path(std::string_view path) {
  std::string out;
  normalise_key_path(path, out);
  return out;
}

ConfigTree parse_config_text(std::string_view text, const std::string& origin) {
  try {
    if (text.size() > kMaxDocumentBytes) {
      throw ValidationError(
          {Problem{origin, "", fmt::format("is {} bytes long", text.size()),
                   fmt::format("a scenario of at most {} MiB", kMaxDocumentBytes >> 20)}});
    }
    YAML::Node node = YAML::Load(std::string(text));
    ConfigTree tree = yaml_to_json(node, origin);
    if (tree.is_null()) tree = ConfigTree::object();
    return tree;
  } catch (const YAML::Exception& e) {
    throw ValidationError({Problem{origin, "",
                                   fmt::format("syntax error at line {}, column {}: {}",
                                               e.mark.line + 1, e.mark.column + 1, e.msg),
                                   "a YAML or JSON document"}});
  }
}

namespace {

// A scalar as YAML text: plain where YAML reads it back as the same value, else JSON's quoting
// (a YAML double-quoted scalar).
std::string yaml_scalar(const ConfigTree& v) {
  if (!v.is_string()) return v.dump();
  const std::string& text = v.get_ref<const std::string&>();
  const bool plain_chars =
      !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == '+';
      });
  if (plain_chars && yaml_to_json(YAML::Load(text), "") == v) return text;
  return v.dump();
}

bool all_scalars(const ConfigTree& list) {
  return std::none_of(list.begin(), list.end(),
                      [](const ConfigTree& v) { return v.is_structured(); });
}

void write_yaml(const ConfigTree& v, int indent, std::string& out);

// `prefix` then the value: inline for scalars and flow lists, else on the lines below.
void write_yaml_entry(const std::string& prefix, const ConfigTree& v, int indent,
                      std::string& out) {
  out += prefix;
  const bool block = !v.empty() && (v.is_object() || (v.is_array() && !all_scalars(v)));
  if (block) {
    out += '\n';
    write_yaml(v, indent + 2, out);
  } else if (v.is_array()) {
    // Appends only: GCC 12 warns (-Wrestrict, a false positive) on "literal" + std::string&&.
    out += " [";
    bool first = true;
    for (const auto& item : v) {
      if (!first) out += ", ";
      out += yaml_scalar(item);
      first = false;
    }
    out += "]\n";
  } else {
    out += ' ';
    out += v.is_object() ? std::string("{}") : yaml_scalar(v);
    out += '\n';
  }
}

void write_yaml(const ConfigTree& v, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (v.is_object()) {
    for (const auto& [key, value] : v.items())
      write_yaml_entry(pad + yaml_scalar(ConfigTree(key)) + ":", value, indent, out);
  } else {
    for (const auto& item : v) {
      if (item.is_object() && !item.empty()) {
        // "- first: 1" then the item's other keys under it.
        std::string nested;
        write_yaml(item, indent + 2, nested);
        out += pad;
        out += "- ";
        out += nested.substr(static_cast<std::size_t>(indent) + 2);
      } else {
        write_yaml_entry(pad + "-", item, indent, out);
      }
    }
  }
}

}  // namespace

std::string config_to_yaml(const ConfigTree& tree) {
  std::string out;
  if (!tree.is_structured() || tree.empty())
    return yaml_scalar(tree.is_null() ? ConfigTree::object() : tree) + "\n";
  write_yaml(tree, 0, out);
  return out;
}

ConfigTree load_config_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw ValidationError({Problem{path.string(), "", "cannot read the file",
                                   "an existing .yaml, .yml or .json file"}});
  }
  require_regular_file(path);  // a FIFO or a device before its name: what it is matters more
  const auto ext = path.extension().string();
  if (ext == ".gz") {
    throw ValidationError(
        {Problem{path.string(), "", "is compressed (a trace?), not a YAML or JSON document",
                 "a plain .yaml, .yml or .json file; summarize, compare, import and calibrate "
                 "read compressed traces"}});
  }
  if (ext != ".yaml" && ext != ".yml" && ext != ".json") {
    throw ValidationError({Problem{path.string(), "", fmt::format("unknown file type '{}'", ext),
                                   "a .yaml, .yml or .json file"}});
  }
  ConfigTree tree = parse_config_text(read_text_file(path, kMaxDocumentBytes), path.string());
  if (!tree.is_object()) {
    throw ValidationError({Problem{path.string(), "", "the document is not a mapping of keys",
                                   "top-level keys: model, cluster, training, fsdp"}});
  }
  return tree;
}

ConfigTree parse_override_value(std::string_view text) {
  if (is_simple_plain_scalar(text)) return plain_scalar_to_json(std::string(text));
  try {
    YAML::Node node = YAML::Load(std::string(text));
    return yaml_to_json(node, "--set");
  } catch (const YAML::Exception&) {
    return ConfigTree(std::string(text));
  }
}

void apply_override(ConfigTree& tree, std::string_view assignment, std::vector<Problem>& problems) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    problems.push_back({"--set", std::string(assignment),
                        "an override must look like key.path=value",
                        "e.g. --set fsdp.reshard_after_forward=false"});
    return;
  }
  const std::string_view value = assignment.substr(eq + 1);
  if (value.find_first_not_of(" \t") == std::string_view::npos) {
    problems.push_back({"--set", std::string(assignment.substr(0, eq)), "has no value",
                        "key.path=value; to use the default, leave the key out"});
    return;
  }
  set_override(tree, assignment.substr(0, eq), parse_override_value(value), problems);
}

void set_override(ConfigTree& tree, std::string_view key_text, const ConfigTree& value,
                  std::vector<Problem>& problems) {
  const std::string key(key_text);
  const auto parts = split_key_path(key);
  if (parts.empty()) {
    problems.push_back({"--set", key, "empty key path", "e.g. --set training.micro_batch=2"});
    return;
  }
  ConfigTree* node = &tree;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const bool last = i + 1 == parts.size();
    if (node->is_array()) {
      std::size_t index = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (!is_key_index(part) || ec != std::errc() || end != part.data() + part.size() ||
          index >= node->size()) {
        problems.push_back(
            {"--set", key,
             fmt::format("'{}' is not an index of the list (it has {} items)", part, node->size()),
             node->empty() ? std::string("no index: the list is empty")
                           : fmt::format("0..{}", node->size() - 1)});
        return;
      }
      node = &(*node)[index];
    } else {
      if (node->is_null()) *node = ConfigTree::object();
      if (!node->is_object()) {
        problems.push_back(
            {"--set", key, fmt::format("'{}' is below a value that is not a mapping", part), ""});
        return;
      }
      node = &(*node)[part];
    }
    if (last) {
      // A section replaced by a scalar (--set fsdp.mesh=2) would silently drop its keys.
      if (node->is_object() && !node->empty() && !value.is_object()) {
        problems.push_back(
            {"--set", key,
             fmt::format("is a section with keys ({}), not a single value", node->begin().key()),
             fmt::format("set one of its keys, e.g. --set {}.{}=...", key, node->begin().key())});
        return;
      }
      *node = value;
    }
  }
}

}  // namespace shardscope
