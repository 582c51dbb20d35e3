#pragma once
// A scenario = model + cluster + training + FSDP policy (+ how ranks differ), loaded from YAML/JSON
// with overrides.

#include <filesystem>
#include <string>
#include <vector>

#include "shardscope/core/allocator_params.hpp"
#include "shardscope/core/cluster_spec.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/fsdp_policy.hpp"
#include "shardscope/core/model_spec.hpp"
#include "shardscope/core/training_spec.hpp"
#include "shardscope/core/variation_spec.hpp"

namespace shardscope {

struct Scenario {
  std::string source;  // file it came from ("" for in-memory)
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  FsdpPolicy fsdp;
  AllocatorParams allocator;
  VariationSpec variation;  // how ranks differ; empty: every rank alike
};

/// Reads a scenario from a tree (after overrides). Throws ValidationError listing every problem:
/// unknown keys with "did you mean", wrong types, impossible values and cross-field conflicts.
/// `file` names the origin in problems; relative paths inside (model.hf_config) resolve against
/// `base_dir`.
Scenario read_scenario(const ConfigTree& tree, const std::string& file,
                       const std::filesystem::path& base_dir = {});

/// A scenario file's tree with `--set key=value` overrides applied, not yet read. Refuses
/// (ValidationError naming the file) another kind of file given as a scenario, with what reads
/// it: one of shardscope's own (a schema key: an IR, a timeline, a summary) or a PyTorch profiler
/// trace.
ConfigTree load_scenario_tree(const std::filesystem::path& path,
                              const std::vector<std::string>& overrides = {});

/// Loads a file and applies `--set key=value` overrides before reading.
Scenario load_scenario(const std::filesystem::path& path,
                       const std::vector<std::string>& overrides = {});

/// The problems of one `key=value` judged by the key table alone (the key's type, physical range
/// and choices), as the scenario reader judges it; how it combines with other keys is not judged.
/// An unknown key is a problem. The planner checks its --fix values with it before searching.
std::vector<Problem> key_value_problems(std::string_view assignment);

/// A scenario from YAML/JSON text (tests, GUI).
Scenario scenario_from_text(std::string_view text, const std::vector<std::string>& overrides = {});

}  // namespace shardscope
