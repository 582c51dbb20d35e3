#include "plan_evaluate.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>

#include "shardscope/core/device_memory.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/sim/memory_replay.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/step_floor.hpp"
#include "shardscope/sim/worker_pool.hpp"
#include "stopwatch.hpp"

namespace shardscope::sim::planning {

// Configuration `index` simulated in full: what a ranked entry shows. Throws ValidationError for
// knobs that do not combine.
analysis::Summary simulated_summary(const ConfigTree& base, const std::string& file,
                                    const PlanSpace& space, std::size_t index, bool critical_path) {
  PipelineOptions options;
  options.origin = file;
  options.sim.record_memory_samples = false;
  options.sim.record_critical_path = critical_path;
  return simulate_scenario(configuration_scenario(base, file, space, index), options).summary;
}

namespace {

// The exhaustive search's evaluation: every configuration simulated in full, the reference the
// pruned search is tested against.
Evaluated simulated(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                    std::size_t index, Bytes budget) {
  Evaluated e;
  e.index = index;
  e.done = true;
  try {
    const analysis::Summary summary = simulated_summary(base, file, space, index, false);
    e.valid = true;
    e.step_time = summary.step_time;
    e.peak_reserved = summary.peak_reserved.value();
    e.fits = summary.out_of_memory.empty() && e.peak_reserved <= budget;
  } catch (const ValidationError& error) {
    e.problems = error.problems();  // knobs that do not combine (a mesh the reshard size splits)
  }
  return e;
}

// The pruned search's memory pass over `alike`, configurations of one timing_of: they differ only
// in knobs that change the caching allocator's decisions, so they share one schedule and one step
// time. One whose parameters, optimizer states and saved activations alone are over `budget`
// (resident_state_floor) is settled before anything is lowered; the schedule is lowered once.
// Once the search knows a reach (finite `reach`), a schedule whose step_time_floor is beyond it
// cannot rank whether it fits or not: its members are `beyond`, their memory never replayed.
// Otherwise each remaining member's memory is replayed with its own allocator settings
// (replay_memory: exactly the simulation's peaks); those that fit get the schedule's floor and are
// timed later, in the order of their floors (time_alike).
std::vector<Evaluated> evaluate_alike(const ConfigTree& base, const std::string& file,
                                      const PlanSpace& space, const std::vector<std::size_t>& alike,
                                      Bytes budget, double reach) {
  std::vector<Evaluated> out(alike.size());
  std::vector<std::optional<Scenario>> scenarios(alike.size());
  const auto invalid = [&](std::size_t i, const ValidationError& error) {
    out[i].valid = out[i].fits = false;
    out[i].problems = error.problems();
  };
  for (std::size_t i = 0; i < alike.size(); ++i) {
    const Stopwatch read;
    out[i].index = alike[i];
    out[i].done = true;
    try {
      Scenario scenario = configuration_scenario(base, file, space, alike[i]);
      out[i].valid = true;
      if (resident_state_floor(scenario) > budget) {
        out[i].screened = out[i].unlowered = true;
      } else {
        scenarios[i] = std::move(scenario);
      }
    } catch (const ValidationError& error) {
      invalid(i, error);
    }
    out[i].seconds = read.seconds();
  }
  const auto first =
      std::find_if(scenarios.begin(), scenarios.end(), [](const auto& s) { return s.has_value(); });
  if (first == scenarios.end()) return out;
  const Scenario& stands_for = **first;
  // The lowering and the floor serve every member lowered: each bears an equal share of them.
  const auto lowered = static_cast<double>(std::count_if(
      scenarios.begin(), scenarios.end(), [](const auto& s) { return s.has_value(); }));
  const Stopwatch since_read;
  double replays = 0;  // of that time, the members' own replays
  const auto share_out = [&] {
    const double each = (since_read.seconds() - replays) / lowered;
    for (std::size_t i = 0; i < alike.size(); ++i)
      if (scenarios[i]) out[i].seconds += each;
  };
  try {
    const Schedule schedule = lower(stands_for);
    // While the reach is unknown most schedules fit nothing: their floor is not worth computing.
    std::optional<TimeNs> floor;
    if (std::isfinite(reach)) {
      floor = step_time_floor(schedule, CostModel(stands_for));
      if (static_cast<double>(*floor) > reach) {
        for (std::size_t i = 0; i < alike.size(); ++i) {
          out[i].beyond = scenarios[i].has_value();
          out[i].floor = out[i].beyond ? *floor : 0;
        }
        share_out();
        return out;
      }
    }
    // The members share the cluster, so the memory outside the allocator (CUDA context, NCCL).
    const Bytes outside = memory_outside_allocator(stands_for.cluster, schedule).total();
    bool any_fits = false;
    for (std::size_t i = 0; i < alike.size(); ++i) {
      if (!scenarios[i]) continue;
      const Stopwatch replay;
      const AllocatorParams& params = scenarios[i]->allocator;
      const MemoryOutcome memory = replay_memory(
          schedule, allocator_capacity(stands_for.cluster.gpu.memory, params, outside), params,
          budget);
      out[i].fits = !memory.out_of_memory && memory.peak_reserved <= budget;
      out[i].screened = !out[i].fits;
      out[i].peak_reserved = memory.peak_reserved;
      any_fits = any_fits || out[i].fits;
      const double replayed = replay.seconds();  // one reading, for the member and the total
      out[i].seconds += replayed;
      replays += replayed;
    }
    if (any_fits && !floor) floor = step_time_floor(schedule, CostModel(stands_for));
    for (std::size_t i = 0; i < alike.size(); ++i)
      out[i].floor = floor && scenarios[i] ? *floor : 0;
    share_out();
  } catch (const ValidationError& error) {  // the lowering refused the knobs
    share_out();
    for (std::size_t i = 0; i < alike.size(); ++i) {
      if (scenarios[i]) invalid(i, error);
    }
  }
  return out;
}

}  // namespace

// The step time of configuration `index` and of every other configuration of its timing_of,
// simulated without memory (their memory was replayed). Throws ValidationError for an op too long
// to simulate.
TimeNs time_alike(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                  std::size_t index) {
  const Scenario scenario = configuration_scenario(base, file, space, index);
  return simulate_step_time(lower(scenario), CostModel(scenario));
}

// The configurations of one wave, `to_run`, evaluated on `threads` threads; results in their order.
// The exhaustive search simulates each; the pruned one replays the memory of the configurations of
// one timing_of together (evaluate_alike).
std::vector<Evaluated> evaluate_wave(const ConfigTree& base, const std::string& file,
                                     const PlanSpace& space, const std::vector<std::size_t>& to_run,
                                     const PlanOptions& options, double reach, unsigned threads,
                                     const std::function<bool()>& cancelled) {
  // Positions in `to_run` by timing, in the order of their first member.
  std::vector<std::vector<std::size_t>> groups;
  std::map<std::size_t, std::size_t> group_of;
  for (std::size_t i = 0; i < to_run.size(); ++i) {
    const std::size_t key = options.exhaustive ? to_run[i] : timing_of(space, to_run[i]);
    const auto [it, added] = group_of.emplace(key, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<Evaluated> out(to_run.size());
  if (groups.empty()) return out;
  std::atomic<std::size_t> next{0};
  const auto helpers = static_cast<unsigned>(std::min<std::size_t>(threads, groups.size()) - 1);
  WorkerPool::shared().run(helpers, [&] {
    for (std::size_t g = next++; g < groups.size(); g = next++) {
      if (cancelled()) return;
      if (options.exhaustive) {
        const std::size_t i = groups[g].front();
        const Stopwatch simulating;
        out[i] = simulated(base, file, space, to_run[i], options.memory_budget);
        out[i].seconds = simulating.seconds();
        continue;
      }
      std::vector<std::size_t> alike;
      for (std::size_t i : groups[g]) alike.push_back(to_run[i]);
      auto evaluated = evaluate_alike(base, file, space, alike, options.memory_budget, reach);
      for (std::size_t k = 0; k < groups[g].size(); ++k)
        out[groups[g][k]] = std::move(evaluated[k]);
    }
  });
  return out;
}

}  // namespace shardscope::sim::planning
