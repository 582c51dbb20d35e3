#pragma once
// Fields of shardscope's JSON files. Reading integers: nlohmann's get<T>() converts a float to an
// integer with a static_cast (undefined for 1e300) and wraps integers that T cannot hold; these
// helpers accept only integers T holds, and otherwise throw nlohmann::json::type_error, which every
// reader already turns into a problem naming the field. Writing: an unknown value is null.

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardscope {

/// The value, or null where it is unknown.
template <typename T>
nlohmann::ordered_json json_or_null(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

template <typename T>
T json_integer(const nlohmann::json& j) {
  constexpr auto kMin = static_cast<std::int64_t>(std::numeric_limits<T>::min());
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  if (j.is_number_unsigned()) {
    if (const auto v = j.get<std::uint64_t>(); v <= kMax) return static_cast<T>(v);
  } else if (j.is_number_integer()) {
    if (const auto v = j.get<std::int64_t>();
        v >= kMin && (v < 0 || static_cast<std::uint64_t>(v) <= kMax)) {
      return static_cast<T>(v);
    }
  }
  throw nlohmann::json::type_error::create(
      302, fmt::format("expected an integer in {}..{}, got {}", kMin, kMax, j.dump()), nullptr);
}

template <typename T>
std::vector<T> json_integers(const nlohmann::json& j) {
  if (!j.is_array()) {
    throw nlohmann::json::type_error::create(
        302, fmt::format("expected a list of integers, got {}", j.dump()), nullptr);
  }
  std::vector<T> out;
  out.reserve(j.size());
  for (const auto& item : j) out.push_back(json_integer<T>(item));
  return out;
}

/// The document's "schema" text, or empty when it has none (or one that is not text). Never throws:
/// nlohmann's value("schema", "") throws when the field is present with another type.
inline std::string json_schema(const nlohmann::json& root) {
  if (!root.is_object()) return {};
  const auto it = root.find("schema");
  return it != root.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace shardscope
