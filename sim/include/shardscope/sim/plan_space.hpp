#pragma once
// What `shardscope plan` searches: for each FSDP API, a product of dimensions (micro-batch ×
// gradient accumulation for the fixed global batch, checkpointing, loss, sharding and HSDP shard
// size, resharding, prefetch, wrap granularity, offload, reduce dtype, a separate reduce-scatter
// group, expandable segments), each a list of choices that set scenario keys. A configuration is
// one choice per dimension of one part; its index runs over the parts in order, row-major inside
// a part (first dimension slowest).
//
// Two facts about the dimensions let the planner skip work without losing exactness:
//  * a `compute` dimension changes the compute ops; the others do not, so every configuration of
//    one compute class (one choice per compute dimension) has the same forward, backward and
//    recompute work, whose time on the compute stream bounds its step time from below;
//  * `memory_at_least[i]` lists the choices that choice i never needs less memory than (a larger
//    micro-batch, less checkpointing, keeping parameters unsharded, no offload), other knobs
//    equal, so a configuration above one that does not fit does not fit either.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/scenario.hpp"

namespace shardscope::sim {

using Setting = std::pair<std::string, std::string>;  // scenario key, YAML scalar

struct PlanChoice {
  std::string label;              // "2 × 4", "selective_op", "HSDP 8 × 8"
  std::vector<Setting> settings;  // what it sets
};

struct PlanDimension {
  std::string name;  // "micro-batch × accumulation", "checkpointing", ...
  bool compute = false;
  std::vector<PlanChoice> choices;
  std::vector<std::vector<std::size_t>> memory_at_least;  // per choice; empty: no rule
  /// Its choices only tune how FSDP schedules the same training (KeySearch::tuning):
  /// configurations that differ only in tuning dimensions are one strategy.
  bool tuning = false;
  /// Its choices change only the caching allocator's decisions (KeySearch::memory_only):
  /// configurations that differ only in such dimensions share a schedule and its step time.
  bool memory_only = false;
};

struct PlanPart {
  std::string api;  // "fsdp2" or "fsdp1"
  std::vector<PlanDimension> dimensions;
  /// Scenario keys removed from the base before a configuration's settings apply: the other
  /// API's knobs (an FSDP2 scenario's reshard_after_forward would make every FSDP1 one invalid)
  /// and the mesh, which the sharding dimension decides.
  std::vector<std::string> cleared;
  std::size_t size() const;
};

struct PlanSpace {
  std::vector<PlanPart> parts;
  std::vector<Setting> common;  // set on every configuration (--fix of a key no dimension sets)
  std::size_t size() const;
};

/// One configuration: its part and a choice per dimension of that part.
struct PlanConfig {
  std::size_t part = 0;
  std::vector<std::size_t> choices;
};
PlanConfig decode(const PlanSpace& space, std::size_t index);
std::size_t encode(const PlanSpace& space, const PlanConfig& config);
/// The strategy of configuration `index`: the index of its configuration with every tuning
/// dimension at its first choice. Equal for configurations that differ only in tuning.
std::size_t strategy_of(const PlanSpace& space, std::size_t index);
/// The configuration whose schedule and step time `index` shares: its index with every
/// memory_only dimension at its first choice.
std::size_t timing_of(const PlanSpace& space, std::size_t index);
/// The settings of a configuration: the common ones, the part's API, then each dimension's.
std::vector<Setting> settings_of(const PlanSpace& space, const PlanConfig& config);

/// "micro-batch × accumulation=1 × 8, checkpointing=none, ...": each dimension's choice.
std::string configuration_text(const PlanSpace& space, const PlanConfig& config);

/// The base scenario tree with a configuration applied: the part's cleared keys removed, then
/// its settings set. Throws ValidationError for a setting the tree cannot take.
ConfigTree configuration_tree(const ConfigTree& base, const PlanSpace& space, std::size_t index);

struct PlanInputs {
  /// The fixed global batch in tokens per optimizer step; default: the scenario's
  /// (seq_len × micro_batch × grad_accum × world size).
  std::optional<std::int64_t> global_batch_tokens;
  std::string api = "either";  // fsdp2, fsdp1 or either
  std::vector<Setting> fixed;  // --fix key=value: pins a knob
  /// --allow key=v1,v2: keeps only these choices of a searched knob (what an --emit target can
  /// express, the mixed-precision choices a user accepts).
  std::vector<std::pair<std::string, std::vector<std::string>>> allowed;
  int max_micro_batch = 64;
};

/// The default space for a scenario. `--fix` narrows the dimensions that set its key to the
/// choices with that value (an error when none has it) or, for a key no dimension sets, is set
/// on every configuration; `--allow` narrows to several values of a searched key. Throws
/// ValidationError for a global batch the world cannot split, an unknown API or a fixed value no
/// choice has.
PlanSpace default_plan_space(const Scenario& base, const PlanInputs& inputs);

/// What a plan starts from: the scenario tree without its mesh (the sharding dimension decides
/// it, so a scenario's own mesh does not make another cluster size invalid) and with every --fix
/// of a key no dimension sets (a fixed model, cluster size or sequence length changes the space
/// itself: the batch splits, the shard sizes), the scenario that tree reads as, and its space.
struct PlanBase {
  ConfigTree tree;
  Scenario scenario;
  PlanSpace space;
};
/// Throws ValidationError as read_scenario and default_plan_space do.
PlanBase plan_base(ConfigTree tree, const std::string& file, const PlanInputs& inputs);

}  // namespace shardscope::sim
