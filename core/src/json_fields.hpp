#pragma once
// Reading and writing JSON fields the schedule IR and the device profile share (private to core):
// strict field access that records every problem with its key instead of throwing at the first,
// and the fields of a kernel's shape.

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shardscope/core/error.hpp"
#include "shardscope/core/json_field.hpp"
#include "shardscope/core/kernel.hpp"

namespace shardscope::detail {

// Strict field access that records problems instead of throwing.
class Fields {
 public:
  Fields(std::string origin, std::vector<Problem>& problems)
      : origin_(std::move(origin)), problems_(problems) {}

  const nlohmann::json* get(const nlohmann::json& obj, const std::string& path, const char* key,
                            bool required = true) {
    if (!obj.is_object()) {
      problem(path, "expected an object");
      return nullptr;
    }
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) problem(path + "." + key, "missing");
      return nullptr;
    }
    return &*it;
  }
  std::int64_t integer(const nlohmann::json& obj, const std::string& path, const char* key,
                       std::int64_t min, std::int64_t max) {
    const auto* v = get(obj, path, key);
    if (!v) return min;
    if (!v->is_number_integer() || v->get<std::int64_t>() < min || v->get<std::int64_t>() > max) {
      problem(path + "." + key,
              fmt::format("expected an integer in {}..{}, got {}", min, max, v->dump()));
      return min;
    }
    return v->get<std::int64_t>();
  }
  double number(const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto* v = get(obj, path, key);
    if (!v) return 0;
    if (!v->is_number() || v->get<double>() < 0) {
      problem(path + "." + key, fmt::format("expected a number ≥ 0, got {}", v->dump()));
      return 0;
    }
    return v->get<double>();
  }
  /// A measured rate: 0 where it was not measured, else within [lowest, highest] (a physical
  /// range: nothing a device measures is 1e-300 B/s).
  double rate(const nlohmann::json& obj, const std::string& path, const char* key, double lowest,
              double highest) {
    const auto* v = get(obj, path, key);
    if (!v) return 0;
    if (!v->is_number() ||
        (v->get<double>() != 0 && (v->get<double>() < lowest || v->get<double>() > highest))) {
      problem(path + "." + key, fmt::format("expected 0 (not measured) or {:g} to {:g}, got {}",
                                            lowest, highest, v->dump()));
      return 0;
    }
    return v->get<double>();
  }
  std::string text(const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto* v = get(obj, path, key);
    if (!v) return {};
    if (!v->is_string()) {
      problem(path + "." + key, fmt::format("expected a string, got {}", v->dump()));
      return {};
    }
    return v->get<std::string>();
  }
  bool boolean(const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto* v = get(obj, path, key);
    if (!v) return false;
    if (!v->is_boolean()) {
      problem(path + "." + key, fmt::format("expected true or false, got {}", v->dump()));
      return false;
    }
    return v->get<bool>();
  }
  template <typename E>
  E enumeration(const nlohmann::json& obj, const std::string& path, const char* key,
                std::optional<E> (*parse)(std::string_view), E fallback, std::string_view allowed) {
    const std::string s = text(obj, path, key);
    if (s.empty()) return fallback;
    if (auto v = parse(s)) return *v;
    problem(path + "." + key, fmt::format("unknown value '{}'", s), std::string(allowed));
    return fallback;
  }
  std::vector<std::int32_t> id_list(const nlohmann::json& obj, const std::string& path,
                                    const char* key) {
    std::vector<std::int32_t> out;
    const auto* v = get(obj, path, key);
    if (!v) return out;
    if (!v->is_array()) {
      problem(path + "." + key, "expected a list of ids");
      return out;
    }
    for (const auto& x : *v) {
      if (!x.is_number_integer()) {
        problem(path + "." + key, fmt::format("expected integer ids, got {}", x.dump()));
        continue;
      }
      out.push_back(json_integer<std::int32_t>(x));
    }
    return out;
  }
  const nlohmann::json& array(const nlohmann::json& root, const char* key) {
    static const nlohmann::json kEmpty = nlohmann::json::array();
    const auto* v = get(root, "", key);
    if (!v) return kEmpty;
    if (!v->is_array()) {
      problem(key, "expected a list");
      return kEmpty;
    }
    return *v;
  }
  void problem(const std::string& key, std::string message, std::string allowed = {}) {
    problems_.push_back({origin_, key.starts_with('.') ? key.substr(1) : key, std::move(message),
                         std::move(allowed)});
  }

 private:
  std::string origin_;
  std::vector<Problem>& problems_;
};

/// Writes a kernel's shape fields (not its kind, label or repeat) into `j`.
struct KernelShapeJson {
  nlohmann::ordered_json& j;
  void operator()(const Gemm& g) const {
    j["m"] = g.m;
    j["n"] = g.n;
    j["k"] = g.k;
    j["batch"] = g.batch;
    j["transpose_a"] = g.transpose_a;
    j["transpose_b"] = g.transpose_b;
    j["input"] = to_string(g.input);
    j["output"] = to_string(g.output);
  }
  void operator()(const Attention& a) const {
    j["batch"] = a.batch;
    j["heads"] = a.heads;
    j["kv_heads"] = a.kv_heads;
    j["q_len"] = a.q_len;
    j["kv_len"] = a.kv_len;
    j["head_dim"] = a.head_dim;
    j["causal"] = a.causal;
    j["backward"] = a.backward;
    j["dtype"] = to_string(a.dtype);
  }
  void operator()(const MemoryBound& m) const {
    j["bytes"] = m.bytes;
    j["flops"] = m.flops;
    j["memory_kind"] = to_string(m.kind);
  }
  void operator()(const CrossEntropy& l) const {
    j["tokens"] = l.tokens;
    j["vocab"] = l.vocab;
    j["backward"] = l.backward;
    j["logits"] = to_string(l.logits);
    j["recipe"] = to_string(l.recipe);
  }
  void operator()(const OptimizerUpdate& o) const {
    j["elements"] = o.elements;
    j["optimizer"] = to_string(o.optimizer);
    j["dtype"] = to_string(o.dtype);
    j["impl"] = to_string(o.impl);
  }
};

/// The shape fields of a `kind` kernel at `p` (its kind, label and repeat are read by the caller).
KernelShape read_kernel_shape(Fields& f, const nlohmann::json& j, const std::string& p,
                              KernelKind kind);

}  // namespace shardscope::detail
