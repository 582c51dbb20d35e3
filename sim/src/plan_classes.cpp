#include "plan_classes.hpp"

#include <algorithm>
#include <map>

#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/memory_replay.hpp"

namespace shardscope::sim::planning {

namespace {

// Forward, backward and recompute time of the last iteration on the compute stream: they run one
// after another inside the step, so no configuration of the class has a shorter step.
TimeNs compute_bound(const Scenario& scenario) {
  const Schedule schedule = lower(scenario);
  const CostModel costs(scenario);
  TimeNs bound = 0;
  for (std::size_t i = first_op_of(schedule, last_iteration(schedule)); i < schedule.ops.size();
       ++i) {
    const Op& op = schedule.ops[i];
    if (op.kind != OpKind::forward && op.kind != OpKind::backward && op.kind != OpKind::recompute)
      continue;
    if (schedule.streams[static_cast<std::size_t>(op.stream)].kind != StreamKind::compute) continue;
    bound += costs.cost(schedule, op).duration;
  }
  return bound;
}

// The classes of every part; members listed in index order.
std::vector<ComputeClass> compute_classes(const PlanSpace& space) {
  std::vector<ComputeClass> classes;
  std::size_t offset = 0;
  for (std::size_t p = 0; p < space.parts.size(); ++p) {
    const auto& dims = space.parts[p].dimensions;
    std::map<std::vector<std::size_t>, std::size_t> by_key;
    for (std::size_t i = 0; i < space.parts[p].size(); ++i) {
      const PlanConfig c = decode(space, offset + i);
      std::vector<std::size_t> key;
      for (std::size_t d = 0; d < dims.size(); ++d) {
        if (dims[d].compute) key.push_back(c.choices[d]);
      }
      auto [it, added] = by_key.emplace(key, classes.size());
      if (added) classes.push_back({p, {}, kNoBound});
      classes[it->second].members.push_back(offset + i);
    }
    offset += space.parts[p].size();
  }
  return classes;
}

// Members tried for a class's representative: the first that validates stands for the class.
constexpr std::size_t kRepresentativeTries = 64;

// The estimated schedule size and saved activations of the class's first member that validates.
// Reading a scenario is cheap next to lowering it, so this sizes the work before any lowering. A
// schedule above kMaxScheduleOps is refused before it is built: no work.
void size_class(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                ComputeClass& cls) {
  for (std::size_t i = 0; i < cls.members.size() && i < kRepresentativeTries; ++i) {
    try {
      const Scenario scenario = configuration_scenario(base, file, space, cls.members[i]);
      const auto ops = estimated_schedule_ops(scenario);
      cls.ops = ops > kMaxScheduleOps ? 0 : ops;
      cls.saved = saved_activation_bytes(scenario);
      return;
    } catch (const ValidationError&) {
    }
  }
}

}  // namespace

// The compute classes with their estimated schedule sizes, and the work they add up to.
std::vector<ComputeClass> sized_classes(const ConfigTree& base, const std::string& file,
                                        const PlanSpace& space, PlanWork& work) {
  auto classes = compute_classes(space);
  work = PlanWork{};
  work.configurations = space.size();
  work.classes = classes.size();
  for (auto& cls : classes) {
    size_class(base, file, space, cls);
    work.ops += cls.ops * static_cast<std::int64_t>(1 + cls.members.size());
    work.largest_schedule = std::max(work.largest_schedule, cls.ops);
  }
  return classes;
}

// Members read for a class's floor_share, spread over every dimension: the j-th sample is member
// j × a large odd stride, modulo the class size (evenly spaced members would hold the fastest
// varying knobs, offloading among them, at one value).
constexpr std::size_t kFloorSample = 16;
constexpr std::size_t kSampleStride = 2'654'435'761;

double sampled_floor_share(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                           const ComputeClass& cls, Bytes budget) {
  const std::size_t n = std::min(kFloorSample, cls.members.size());
  std::size_t within = 0;
  for (std::size_t j = 0; j < n; ++j) {
    try {
      const std::size_t at = (j * kSampleStride) % cls.members.size();
      const Scenario scenario = configuration_scenario(base, file, space, cls.members[at]);
      if (resident_state_floor(scenario) <= budget) ++within;
    } catch (const ValidationError&) {
    }
  }
  return n ? static_cast<double>(within) / static_cast<double>(n) : 0.0;
}

TimeNs class_bound(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                   const ComputeClass& cls) {
  // The first member that lowers stands for the class (all share its compute ops).
  for (std::size_t i = 0; i < cls.members.size() && i < kRepresentativeTries; ++i) {
    try {
      return compute_bound(configuration_scenario(base, file, space, cls.members[i]));
    } catch (const ValidationError&) {
    }
  }
  return kNoBound;
}

// How far up the memory rules a configuration sits along the layout dimensions: every
// configuration it is above has a smaller depth, so waves of increasing depth meet the lower one
// first.
std::size_t memory_depth(const PlanSpace& space, const PlanConfig& c) {
  std::size_t depth = 0;
  const auto& dims = space.parts[c.part].dimensions;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (!dims[d].memory_at_least.empty()) depth += dims[d].memory_at_least[c.choices[d]].size();
  }
  return depth;
}

// Whether a configuration this one is at least as large as (one knob lower) did not fit.
bool above_one_that_did_not_fit(const PlanSpace& space, const PlanConfig& c,
                                const std::unordered_set<std::size_t>& not_fitting) {
  const auto& dims = space.parts[c.part].dimensions;
  PlanConfig lower = c;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].memory_at_least.empty()) continue;
    for (std::size_t j : dims[d].memory_at_least[c.choices[d]]) {
      lower.choices[d] = j;
      if (not_fitting.count(encode(space, lower))) return true;
    }
    lower.choices[d] = c.choices[d];
  }
  return false;
}

}  // namespace shardscope::sim::planning
