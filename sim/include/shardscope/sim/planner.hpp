#pragma once
// `shardscope plan`: the fastest configurations of a plan space that fit in memory, found exactly
// with the simulator as the objective, without simulating most of the space.
//
// The search (docs/planner.md):
//  1. Each compute class (one choice per compute dimension) is lowered once; the time of its
//     forward, backward and recompute ops on the compute stream is a lower bound on the step time
//     of every configuration in it (those ops run one after another within the step).
//  2. Classes are visited by increasing bound. Once a class's bound exceeds the k-th best step
//     time found, it and every later class are skipped: none can enter the top k.
//  3. Inside a class, configurations are simulated in waves of increasing memory (by the memory
//     rules of plan_space.hpp); a configuration above one that did not fit is not simulated.
// Results are deterministic: the skipping depends only on earlier classes and waves, never on
// thread timing. Ties rank by peak reserved, then by configuration index; configurations within
// PlanOptions::entries of an entry's fastest (plan_entries.hpp) are that entry of the ranking.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/config_tree.hpp"
#include "shardscope/sim/plan_entries.hpp"
#include "shardscope/sim/plan_space.hpp"

namespace shardscope::sim {

/// What a search does at most, known before it lowers or simulates anything: the work if neither
/// the step-time bound nor the memory rules skip a configuration. Work is counted in estimated
/// schedule ops (estimated_schedule_ops), which a lowering and a simulation take time in
/// proportion to.
struct PlanWork {
  std::size_t configurations = 0;
  std::size_t classes = 0;            // compute classes, each lowered once for its bound
  std::int64_t ops = 0;               // the bounds' lowerings plus every configuration's simulation
  std::int64_t largest_schedule = 0;  // ops of the largest schedule
};

/// Where a search stands: configurations settled (simulated or skipped) and the work, in seconds
/// of thread time (every thread's, so a second of wall time holds up to one per thread).
/// `seconds_done` is measured: reading the space into classes, their bounds, and every step of
/// the search that ran. `seconds_total` is that plus what the search now expects ahead: until the
/// search starts, the worst case (PlanWork::ops) at the bounds' cost per op; then the classes it
/// can still visit and the groups it can still time, each kind of step priced at what it has cost
/// so far per op. `estimated`: whether that expectation rests on a class the search has visited
/// to its end; before, it is a worst case or a guess, not one to extrapolate (TimeLeft). Equal
/// to seconds_done, and estimated, when the search ends.
struct PlanProgress {
  std::size_t settled = 0;
  std::size_t configurations = 0;
  double seconds_done = 0;
  double seconds_total = 0;
  bool estimated = false;
};

/// What the ranking orders by. p99: the 99th percentile of the job's step time when every rank is
/// replayed with the scenario's variation.* keys (rank_simulation.hpp), over its iterations after
/// the first. The search finds the `p99_candidates` fastest entries by step time as usual, and
/// those are ranked by their p99 (PlanResult::p99_exact says whether none outside could enter).
/// An entry then holds only configurations of one predicted step time (EntryTolerance::time 0).
enum class PlanObjective { step_time, p99 };

struct PlanOptions {
  std::size_t top = 5;
  PlanObjective objective = PlanObjective::step_time;
  std::size_t p99_candidates = 0;  // entries the p99 ranking draws from; 0: 4 × top
  Bytes memory_budget = 0;         // peak reserved a configuration may use (> 0)
  unsigned threads = 0;            // 0: all hardware threads
  bool exhaustive = false;  // simulate every configuration (the reference the tests compare to)
  /// One ranked entry holds the configurations within this of its fastest one's prediction:
  /// one strategy for the user, whatever knobs they differ in.
  EntryTolerance entries;
  /// Called once from the calling thread before the first lowering.
  std::function<void(const PlanWork&)> on_work;
  /// Called from the calling thread after each batch of class bounds and after each wave.
  std::function<void(const PlanProgress&)> progress;
  const std::atomic<bool>* cancel = nullptr;
};

struct PlannedConfig {
  /// In the space: the configuration the entry stands for (entry_choice: its fastest, or a
  /// leaner tuning of that at the same speed).
  std::size_t index = 0;
  PlanConfig config;
  std::vector<Setting> settings;
  analysis::Summary summary;  // with the critical path for the ranked ones
  std::string bottleneck;     // "compute", "exposed all-gather", ... with its share
  std::string change;         // what differs from the next ranked configuration
  /// The entry's configurations (within_entry of its fastest), ranked as one: the fastest
  /// first, then the others in ranks_before order. `no_effect` names the knobs they differ in
  /// ("reduce dtype fp32, bf16"): within the tolerance, those do not change the step time.
  std::vector<PlanMember> members;
  std::string no_effect;
  /// Under PlanObjective::p99: the job's step time over its iterations after the first, every
  /// rank replayed with the scenario's variation (nearest-rank percentiles).
  struct Percentiles {
    TimeNs p50 = 0;
    TimeNs p99 = 0;
    TimeNs max = 0;
  };
  std::optional<Percentiles> percentiles;
  /// Where `index` is not the fastest: "125.551 s at 74.14 GiB with backward_prefetch
  /// BACKWARD_POST → BACKWARD_PRE".
  std::string fastest;
};

/// A configuration that validation refused, with why.
struct InvalidConfig {
  std::size_t index = 0;  // in the space
  std::vector<Problem> problems;
};

struct PlanResult {
  std::vector<PlannedConfig> ranked;  // the top k fitting configurations, fastest first
  std::size_t space = 0;
  std::size_t classes = 0;           // compute classes
  std::size_t simulated = 0;         // configurations simulated
  std::size_t fitting = 0;           // of those, how many fit
  std::size_t invalid = 0;           // rejected by validation (knobs that do not combine)
  std::size_t skipped_by_bound = 0;  // in classes whose bound exceeded the k-th best
  /// Of those, lowered: their schedule's step-time floor (step_time_floor) is beyond the reach of
  /// the entries found, so their memory was never replayed nor their time simulated.
  std::size_t skipped_by_floor = 0;
  std::size_t skipped_by_memory = 0;  // above a configuration that did not fit
  /// Found not to fit by replaying their memory (replay_memory, exactly a simulation's) without
  /// simulating their time.
  std::size_t screened_by_memory = 0;
  /// Of those, settled before they were lowered: their parameters, optimizer states and saved
  /// activations alone are over the budget (resident_state_floor).
  std::size_t screened_before_lowering = 0;
  /// The invalid configuration of smallest index, so that a search where none is valid can say
  /// why (the same one whatever the thread count).
  std::optional<InvalidConfig> first_invalid;
  bool cancelled = false;
  Bytes memory_budget = 0;
  EntryTolerance entries;  // what the entries were grouped with (PlanOptions)
  PlanObjective objective = PlanObjective::step_time;
  std::size_t p99_candidates = 0;  // entries ranked by p99
  /// Under p99: whether no configuration outside the candidates could rank. True when the
  /// variation only slows ranks (no jitter, no sigma, every factor ≥ 1: a job's step is then never
  /// below its symmetric step) and the last ranked p99 is at most the slowest candidate's step.
  bool p99_exact = false;
};

/// What the caching allocator may reserve on one GPU of `scenario` (device memory less the CUDA
/// context and NCCL's buffers, times any memory fraction): the capacity a simulation compares with.
Bytes plan_capacity(const Scenario& scenario);
/// `capacity` less `margin` ("5%" or a size such as "4GiB"); 0 and a Problem under `flag` when the
/// margin is not a percentage below 100 or a size below the capacity.
Bytes budget_with_margin(Bytes capacity, std::string_view margin, std::string_view flag,
                         std::vector<Problem>& problems);

/// The scenario of configuration `index`: `base` with it applied, read as `file` would be.
Scenario configuration_scenario(const ConfigTree& base, const std::string& file,
                                const PlanSpace& space, std::size_t index);

/// The most a search of `space` can do (what PlanOptions::on_work is told), without lowering
/// anything: for refusing a space before its search starts.
PlanWork plan_work(const ConfigTree& base, const std::string& file, const PlanSpace& space);

/// Searches `space` over `base` (a scenario tree; `file` names it in errors and resolves paths).
PlanResult plan(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                const PlanOptions& options);

/// Throws ValidationError when configurations were simulated and every one was invalid (fixed
/// values that contradict the scenario or each other): "nothing fits the memory budget" would
/// blame the wrong thing. The problems are those of the invalid configuration of smallest index.
void throw_if_none_valid(const PlanSpace& space, const PlanResult& result);

/// What an entry of several configurations holds: how many, within which tolerance, the slowest
/// and largest of them, its leanest where that differs, and the knobs that do not change its
/// speed (empty for an entry of one).
std::string entry_text(const PlanResult& result, const PlannedConfig& entry);

/// The ranked table with units: step time, tokens/s/GPU, MFU, peak reserved and headroom,
/// bottleneck, and what changed against the next.
std::string plan_table(const PlanSpace& space, const PlanResult& result);
/// shardscope.plan/1 JSON.
std::string plan_json(const PlanSpace& space, const PlanResult& result);

}  // namespace shardscope::sim
