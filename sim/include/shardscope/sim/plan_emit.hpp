#pragma once
// `shardscope plan --emit`: the chosen configuration as code a user pastes into a training script.
//
//  * fsdp2: a Python module with `fully_shard` calls (MixedPrecisionPolicy, OffloadPolicy,
//    reshard_after_forward, grouped blocks), explicit prefetch, the activation-checkpoint wrapping,
//    the loss and a train step with gradient accumulation;
//  * fsdp1: the same around the FullyShardedDataParallel constructor (sharding strategy, device
//    mesh, ModuleWrapPolicy, MixedPrecision, CPUOffload, prefetch, limit_all_gathers);
//  * torchtitan: the TOML job-config keys (torchtitan/config/job_config.py);
//  * scenario: the plan's scenario with the configuration applied, as a scenario YAML that
//    `shardscope simulate` reads back to the same prediction (any API; no constraints).
//
// Every searched knob appears once, as a literal in a call or a module-level constant the code
// uses, so a reader (tests/cli/plan_readback.py) recovers the configuration from the code itself.
// A target cannot express every configuration (torchtitan has no explicit prefetch, FSDP1 wraps
// one block per unit), so `emit_constraints` narrows the plan's space to what it can before the
// search; the emitted plan is then the best one the target can run.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/sim/planner.hpp"

namespace shardscope::sim {

enum class EmitTarget { fsdp2, fsdp1, torchtitan, scenario };
inline constexpr std::string_view kEmitTargetNames = "fsdp2, fsdp1, torchtitan, scenario";
std::optional<EmitTarget> parse_emit_target(std::string_view text);
std::string_view to_string(EmitTarget target);

/// The FSDP API a target's code uses ("either" for a scenario, which can say both).
std::string_view emit_api(EmitTarget target);

/// The choices a target can express, as --allow narrowings of the plan space (key, values).
std::vector<std::pair<std::string, std::vector<std::string>>> emit_constraints(EmitTarget target);

/// What a target cannot write for any configuration of `base` (settings the plan does not
/// search, such as training.fp8): checked before a plan's search, and again by emit_plan.
std::vector<Problem> emit_problems(EmitTarget target, const Scenario& base);

/// What the emitted file says about where it came from and what it predicts.
struct EmitContext {
  std::string
      command;  // what made the plan: the full command line ("shardscope plan S --top 3 ...")
  std::size_t rank = 1;  // of the plan's ranking
  analysis::Summary summary;
  Bytes memory_budget = 0;
};

/// The code for `scenario`, the chosen configuration applied to the plan's base scenario. Throws
/// ValidationError when the scenario uses a knob the target cannot express (a configuration
/// outside emit_constraints).
std::string emit_plan(EmitTarget target, const Scenario& scenario, const EmitContext& context);

/// A configuration's scenario tree as a YAML file to be written at `output`: a header with the
/// command, the configuration and the prediction, then the tree. Keys naming a file relative to
/// the scenario (ScenarioKey::names_a_file) are rewritten relative to `output`'s folder, where
/// they were relative to `file`'s.
std::string emit_scenario(const ConfigTree& tree, const std::string& file,
                          const std::string& output, const std::string& configuration,
                          const EmitContext& context);

/// The file for ranked configuration `rank` (1-based, within result.ranked) of a plan of `space`
/// over `base`, the scenario tree read as `file`, to be written at `output`: its scenario, its
/// prediction and the budget; `command` is what made the plan (EmitContext::command).
std::string emit_ranked(EmitTarget target, const ConfigTree& base, const std::string& file,
                        const PlanSpace& space, const PlanResult& result, std::size_t rank,
                        const std::string& command, const std::string& output);

}  // namespace shardscope::sim
