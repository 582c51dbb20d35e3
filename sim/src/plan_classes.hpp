#pragma once
// The planner's compute classes (sim-internal, planner.cpp): configurations that share their
// compute dimensions, the step-time bound their compute ops give each of them, their estimated
// schedule size and saved activations, and the memory rules between configurations.

#include <string>
#include <unordered_set>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/sim/planner.hpp"

namespace shardscope::sim::planning {

inline constexpr TimeNs kNoBound = 0;  // a class whose bound could not be computed is never skipped

struct ComputeClass {
  std::size_t part = 0;
  std::vector<std::size_t> members;  // configuration indices, in index order
  TimeNs bound = kNoBound;
  std::int64_t ops = 0;  // estimated ops of one member's schedule (0: none of them validates)
  // What one forward pass saves for backward (saved_activation_bytes): the compute dimensions
  // decide it, so it is every member's. Above the budget, no member fits.
  Bytes saved = 0;
  // The share of a sample of its members whose resident_state_floor is within the budget: those
  // the search lowers (unless a memory rule skips them), for the progress's estimate of the work.
  double floor_share = 1;
};

/// The compute classes of `space` with their estimated schedule sizes and saved activations,
/// and the work they add up to (`work`).
std::vector<ComputeClass> sized_classes(const ConfigTree& base, const std::string& file,
                                        const PlanSpace& space, PlanWork& work);

/// The step-time bound of every member of `cls`: the compute ops of the last iteration of its
/// first member that lowers, at idle cost. kNoBound when none lowers.
TimeNs class_bound(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                   const ComputeClass& cls);

/// The share of a sample of `cls`'s members whose resident_state_floor is within `budget`.
double sampled_floor_share(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                           const ComputeClass& cls, Bytes budget);

/// How far up the memory rules a configuration sits along the layout dimensions: every
/// configuration it is above has a smaller depth, so waves of increasing depth meet the lower one
/// first.
std::size_t memory_depth(const PlanSpace& space, const PlanConfig& c);

/// Whether a configuration that `c` needs at least the memory of (one knob lower) did not fit.
bool above_one_that_did_not_fit(const PlanSpace& space, const PlanConfig& c,
                                const std::unordered_set<std::size_t>& not_fitting);

}  // namespace shardscope::sim::planning
