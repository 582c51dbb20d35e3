#pragma once
// Named models with exact shapes (and so exact parameter counts).

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "shardscope/core/model_spec.hpp"

namespace shardscope {

struct ModelPreset {
  std::string_view name;
  std::string_view description;
  TransformerConfig config;
};

std::span<const ModelPreset> model_presets();
std::optional<ModelSpec> find_model_preset(std::string_view name);

}  // namespace shardscope
