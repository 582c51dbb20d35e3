#include "shardscope/core/config_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace shardscope {
namespace {

std::string parent_of(const std::string& normalised) {
  const auto dot = normalised.rfind('.');
  return dot == std::string::npos ? std::string() : normalised.substr(0, dot);
}

std::string leaf_of(const std::string& normalised) {
  const auto dot = normalised.rfind('.');
  return dot == std::string::npos ? normalised : normalised.substr(dot + 1);
}

// A path of non-empty mapping keys joined by dots ("cluster.gpu.peak_flops.fp32"): no brackets, no
// part of digits only (a list index), no empty part. Such a path is its own normal form and is
// spelled as the index spells it.
bool plain_key_path(std::string_view path) {
  bool part_empty = true, part_digits = true;
  for (const char c : path) {
    if (c == '.') {
      if (part_empty || part_digits) return false;
      part_empty = part_digits = true;
    } else if (is_key_separator(c)) {  // a bracket
      return false;
    } else {
      part_empty = false;
      part_digits = part_digits && c >= '0' && c <= '9';
    }
  }
  return !part_empty && !part_digits;
}

std::string type_name(const ConfigTree& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) {
    const auto& text = v.get_ref<const std::string&>();
    double ignored = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ignored);
    if (ec == std::errc::result_out_of_range && end == text.data() + text.size()) {
      return fmt::format("'{}', a number beyond what a double holds", text);
    }
    return fmt::format("the string '{}'", text);
  }
  if (v.is_array()) return "a list";
  if (v.is_object()) return "a mapping";
  return "null";
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view word, std::span<const std::string> candidates) {
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  return best_distance <= limit ? best : std::string();
}

ConfigReader::ConfigReader(const ConfigTree& root, std::string file)
    : root_(root), file_(std::move(file)) {
  // A scenario reads ~90 keys: room for them up front rather than regrowing as they come.
  known_.reserve(128);
  visited_.reserve(64);
  if (!root_.is_object()) return;
  index_.reserve(64);
  index_text_.reserve(1024);
  index_mapping(root_, -1);
}

std::string_view ConfigReader::index_path(std::int32_t entry) const {
  const IndexEntry& e = index_[static_cast<std::size_t>(entry)];
  return {index_text_.data() + e.offset, e.length};
}

// Indexes the keys of a mapping and, below them, of every mapping they hold. A key with a
// separator or only digits in it is left out: walk() could not reach it by that path either.
void ConfigReader::index_mapping(const ConfigTree& node, std::int32_t parent) {
  for (const auto& [key, value] : node.get_ref<const ConfigTree::object_t&>()) {
    if (key.empty() || is_key_index(key) || std::any_of(key.begin(), key.end(), is_key_separator))
      continue;
    const auto offset = static_cast<std::uint32_t>(index_text_.size());
    if (parent >= 0) {
      const IndexEntry& p = index_[static_cast<std::size_t>(parent)];
      index_text_.append(index_text_, p.offset, p.length);
      index_text_ += '.';
    }
    index_text_ += key;
    const auto self = static_cast<std::int32_t>(index_.size());
    index_.push_back(
        {offset, static_cast<std::uint32_t>(index_text_.size() - offset), &value, parent, false});
    index_by_path_.add(self, [this](std::int32_t e) { return index_path(e); });
    if (value.is_object()) index_mapping(value, self);
  }
}

const ConfigTree* ConfigReader::find(std::string_view path) {
  // The key (and so every mapping above it) is known.
  const bool plain = plain_key_path(path);
  if (!plain) normalise_key_path(path, scratch_);
  const std::string_view norm = plain ? path : std::string_view(scratch_);
  known_.emplace_back(norm);
  if (!plain) return walk(path);
  const std::int32_t e =
      index_by_path_.find(path, [this](std::int32_t entry) { return index_path(entry); });
  if (e < 0) return nullptr;  // the nodes above it that exist are known by its text (is_known)
  // The node and the mappings above it are visited.
  for (std::int32_t v = e; v >= 0 && !index_[static_cast<std::size_t>(v)].visited;
       v = index_[static_cast<std::size_t>(v)].parent) {
    index_[static_cast<std::size_t>(v)].visited = true;
    visited_.push_back(index_[static_cast<std::size_t>(v)].node);
  }
  const ConfigTree* node = index_[static_cast<std::size_t>(e)].node;
  return node->is_null() ? nullptr : node;
}

// Part by part, through mappings and lists: for paths with list indices (or odd spellings).
const ConfigTree* ConfigReader::walk(std::string_view path) {
  const ConfigTree* node = &root_;
  bool found = true;
  for_each_key_part(path, [&](std::string_view part) {
    if (!found) return;
    if (node->is_object()) {
      const auto it = node->find(part);
      if (it == node->end()) {
        found = false;
        return;
      }
      node = &*it;
      visited_.push_back(node);
    } else if (node->is_array()) {
      std::size_t index = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      if (ec != std::errc() || end != part.data() + part.size() || index >= node->size()) {
        found = false;
        return;
      }
      node = &(*node)[index];
      visited_.push_back(node);
    } else {
      found = false;
    }
  });
  return !found || node->is_null() ? nullptr : node;
}

bool ConfigReader::has(std::string_view path) {
  return find(path) != nullptr;
}

std::size_t ConfigReader::list_size(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return 0;
  if (!v->is_array()) {
    wrong_type(path, "a list", *v);
    return 0;
  }
  return v->size();
}

void ConfigReader::add_problem(std::string_view path, std::string message, std::string allowed) {
  problems_.push_back(Problem{file_, std::string(path), std::move(message), std::move(allowed)});
}

void ConfigReader::wrong_type(std::string_view path, std::string_view expected,
                              const ConfigTree& value) {
  add_problem(path, fmt::format("expected {}, got {}", expected, type_name(value)));
}

std::optional<bool> ConfigReader::get_bool(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    wrong_type(path, "true or false", *v);
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::int64_t> ConfigReader::get_int(std::string_view path, std::int64_t min,
                                                  std::int64_t max) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) {
    wrong_type(path, "an integer", *v);
    return std::nullopt;
  }
  const auto value = v->get<std::int64_t>();
  if (value < min || value > max) {
    add_problem(path, fmt::format("{} is out of range", value), fmt::format("{}..{}", min, max));
    return std::nullopt;
  }
  return value;
}

std::optional<double> ConfigReader::get_number(std::string_view path, double min, double max) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    wrong_type(path, "a number", *v);
    return std::nullopt;
  }
  const auto value = v->get<double>();
  if (value < min || value > max) {
    add_problem(path, fmt::format("{:g} is out of range", value),
                fmt::format("{:g}..{:g}", min, max));
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> ConfigReader::get_string(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    wrong_type(path, "a string", *v);
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::string> ConfigReader::get_enum(std::string_view path,
                                                  std::span<const std::string_view> allowed) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_string()) {
    const auto& value = v->get_ref<const std::string&>();
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  }
  const std::string allowed_text = fmt::format("allowed: {}", fmt::join(allowed, ", "));
  if (!v->is_string()) {
    add_problem(path, fmt::format("expected one of the names, got {}", type_name(*v)),
                allowed_text);
    return std::nullopt;
  }
  const auto value = v->get<std::string>();
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    std::vector<std::string> names(allowed.begin(), allowed.end());
    const std::string guess = closest_match(value, names);
    add_problem(path,
                fmt::format("'{}' is not allowed{}", value,
                            guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess)),
                allowed_text);
    return std::nullopt;
  }
  return value;
}

std::optional<DType> ConfigReader::get_dtype(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_string()) {
    if (auto d = parse_dtype(v->get<std::string>())) return d;
  }
  add_problem(path, fmt::format("{} is not a dtype", type_name(*v)),
              fmt::format("allowed: {}", kDTypeNames));
  return std::nullopt;
}

std::optional<Bytes> ConfigReader::get_bytes(std::string_view path, bool allow_zero) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  const auto acceptable = [&](Bytes b) { return b > 0 || (allow_zero && b == 0); };
  if (v->is_number_integer() && acceptable(v->get<std::int64_t>())) return v->get<std::int64_t>();
  if (v->is_string()) {
    if (auto b = parse_bytes(v->get<std::string>()); b && acceptable(*b)) return b;
  }
  add_problem(
      path,
      fmt::format("{} is not a {} size", type_name(*v), allow_zero ? "non-negative" : "positive"),
      "bytes as an integer, or with a unit: 80GiB, 96GB, 512MiB");
  return std::nullopt;
}

std::optional<TimeNs> ConfigReader::get_duration(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_string()) {
    if (auto t = parse_duration(v->get<std::string>())) return t;
  }
  add_problem(path, fmt::format("{} is not a duration", type_name(*v)),
              "a number with a unit: 800ns, 3.4us, 2ms");
  return std::nullopt;
}

std::optional<BytesPerSecond> ConfigReader::get_bandwidth(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_number() && v->get<double>() > 0) return v->get<double>();
  if (v->is_string()) {
    if (auto b = parse_bandwidth(v->get<std::string>())) return b;
  }
  add_problem(path, fmt::format("{} is not a bandwidth", type_name(*v)),
              "bytes/s, or with a unit: 450GB/s, 400Gb/s, 25GiB/s");
  return std::nullopt;
}

std::optional<FlopsPerSecond> ConfigReader::get_flops_rate(std::string_view path) {
  const ConfigTree* v = find(path);
  if (!v) return std::nullopt;
  if (v->is_number() && v->get<double>() > 0) return v->get<double>();
  if (v->is_string()) {
    if (auto f = parse_flops_rate(v->get<std::string>())) return f;
  }
  add_problem(path, fmt::format("{} is not a FLOP rate", type_name(*v)),
              "FLOP/s, or with a unit: 989TFLOP/s");
  return std::nullopt;
}

void ConfigReader::mark_subtree_known(std::string_view path) {
  find(path);
  known_subtrees_.insert(normalise_key_path(path));
}

void ConfigReader::reject_if_present(std::string_view path, std::string_view why,
                                     std::string_view instead) {
  if (find(path)) add_problem(path, std::string(why), std::string(instead));
}

// `path` is the key as the user wrote it ("model.groups[2].name"), `norm` its normalised form;
// both grow and shrink in place while walking the tree.
void ConfigReader::collect_unknown(const ConfigTree& node, std::string& path, std::string& norm) {
  if (!norm.empty() && known_subtrees_.count(norm)) return;
  const std::size_t path_size = path.size(), norm_size = norm.size();
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (!path.empty()) path += '.';
      path += key;
      if (!norm.empty()) norm += '.';
      norm += key;
      if (!std::binary_search(visited_.begin(), visited_.end(), &value) && !is_known(norm)) {
        // Candidates: known siblings first, then the same leaf anywhere.
        const std::string parent = parent_of(norm);
        std::vector<std::string> siblings;
        std::vector<std::string> elsewhere;
        for (const auto& k : known_with_parents()) {
          if (parent_of(k) == parent) siblings.push_back(leaf_of(k));
          if (leaf_of(k) == key && k != norm) elsewhere.push_back(k);
        }
        std::string hint;
        if (auto guess = closest_match(key, siblings); !guess.empty()) {
          hint = fmt::format("did you mean '{}'?",
                             parent.empty() ? guess : fmt::format("{}.{}", parent, guess));
        } else if (!elsewhere.empty()) {
          hint = fmt::format("did you mean '{}'?", elsewhere.front());
        } else if (!siblings.empty()) {
          std::sort(siblings.begin(), siblings.end());
          hint = fmt::format("keys here: {}", fmt::join(siblings, ", "));
        }
        add_problem(path, "unknown key", hint);
      } else {
        collect_unknown(value, path, norm);
      }
      path.resize(path_size);
      norm.resize(norm_size);
    }
  } else if (node.is_array()) {
    norm += "[]";
    for (std::size_t i = 0; i < node.size(); ++i) {
      fmt::format_to(std::back_inserter(path), "[{}]", i);
      collect_unknown(node[i], path, norm);
      path.resize(path_size);
    }
    norm.resize(norm_size);
  }
}

// A key is known when it was read or lies above one that was ("model" above "model.layers").
bool ConfigReader::is_known(std::string_view norm) {
  sort_known_keys();
  for (auto it = std::lower_bound(known_sorted_.begin(), known_sorted_.end(), norm);
       it != known_sorted_.end() && it->starts_with(norm); ++it) {
    if (it->size() == norm.size() || (*it)[norm.size()] == '.' || (*it)[norm.size()] == '[')
      return true;
  }
  return false;
}

// Every known key and every mapping above it, sorted: the candidates for "did you mean".
std::set<std::string, std::less<>> ConfigReader::known_with_parents() {
  sort_known_keys();
  std::set<std::string, std::less<>> out;
  for (const auto& key : known_sorted_) {
    std::string_view norm = key;
    while (!norm.empty() && out.emplace(norm).second) {
      const auto dot = norm.rfind('.');
      const auto cut = std::max(dot == std::string_view::npos ? 0 : dot,
                                norm.size() >= 2 && norm.ends_with("[]") ? norm.size() - 2 : 0);
      norm = norm.substr(0, cut);
    }
  }
  return out;
}

void ConfigReader::sort_known_keys() {
  if (known_sorted_ready_) return;
  known_sorted_ready_ = true;
  for (const auto& k : known_) known_sorted_.emplace_back(k);
  std::sort(known_sorted_.begin(), known_sorted_.end());
  known_sorted_.erase(std::unique(known_sorted_.begin(), known_sorted_.end()), known_sorted_.end());
}

void ConfigReader::finish() {
  std::sort(visited_.begin(), visited_.end());
  std::string path, norm;
  collect_unknown(root_, path, norm);
}

}  // namespace shardscope
