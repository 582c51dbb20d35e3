#pragma once
// sim::simulate: replays a schedule on one rank (all ranks are symmetric) and returns the
// timeline, memory over time and what bound each op's start.
//
// Deterministic: time is integer nanoseconds; at each step the next event is the earliest of the
// CPU's next issue and the earliest activity completion; simultaneous completions are handled in
// op order. Resources:
//   * the CPU issues ops in IR order, paying each op's launch (and FSDP hook) cost; it blocks on
//     cpu_wait and runs CPU-stream work (e.g. the optimizer step under CPU offload) itself;
//   * a stream runs its ops in issue order, each after its dependencies;
//   * a communicator runs its collectives in issue order (one NCCL stream per process group);
//   * activities on one resource (GPU SMs, NVLink, NIC, PCIe each way) share it equally, and a
//     running collective holds one SM per channel: a GPU op beside it runs at its contended
//     rate (OpCost::contended, in proportion to the SMs held; the throughput it loses scaled by a
//     calibration's contention_scale; docs/simulator.md, "SMs held by collectives").
// Buffers are allocated and freed when their op is issued (CPU time), through the caching
// allocator model; that order decides the peaks. The timeline's memory samples are then placed at
// the GPU start of the op that changed memory, so they line up with the ops that use it.

#include <optional>
#include <vector>

#include "shardscope/core/caching_allocator.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/cost_model.hpp"

namespace shardscope::sim {

struct SimOptions {
  AllocatorParams allocator;
  bool record_memory_samples = true;  // off in sweeps: peaks are still tracked
  bool record_critical_path =
      true;  // off in sweeps: what bound each op's start (OpRecord::binding, predecessor)
  // This rank's GPU: every op on the GPU resource takes this many times its modelled time (a
  // straggler's clock, power or thermal limit). Collectives and host copies run at the links'.
  double gpu_time_factor = 1.0;
  // By op id, or empty: a further factor on that op's time when it runs on the GPU (the per-rank
  // replay's jitter draws).
  std::vector<double> op_time_factors;
  // By communicator id, or empty: its collectives' bandwidth-bound part (duration less latency)
  // takes this × as long (a slow link in the communicator's ring: the per-rank replay).
  std::vector<double> comm_time_factors;
  // By op id, or empty: extra CPU time after the CPU issues it (the issuing thread descheduled),
  // which delays what it issues next.
  std::vector<TimeNs> issue_delays;
};

/// Why an op started when it did (its critical predecessor). `peers`: it waited for another
/// rank (simulate_together); the critical path goes on on that rank.
enum class Binding { issue, stream, dependency, communicator, peers };

struct OpRecord {
  TimeNs issue = 0;
  TimeNs ready = 0;  // when this rank alone would have started it (≤ start; < start: waited)
  TimeNs start = 0;
  TimeNs end = 0;
  Binding binding = Binding::issue;
  OpId predecessor = kNone;  // the op whose end (or issue) set `start`
};

/// Everything a reader needs is in the Timeline: the facts, the exact peaks, the CPU's busy time
/// per iteration, allocator retries, the first allocation that did not fit and (unless
/// SimOptions::record_critical_path is off) the exact critical path. `ops` is the engine's own
/// record, for tests and for pricing an executor's ops.
struct SimulationResult {
  std::vector<OpRecord> ops;  // by op id; binding and predecessor only with record_critical_path
  Timeline timeline;
};

SimulationResult simulate(const Schedule& schedule, const CostModel& costs,
                          const SimOptions& options = {});

/// The step time alone, as analysis::summarize(simulate(...).timeline).step_time gives it, at a
/// fraction of the cost: no buffer is allocated and no Timeline is built. Memory never delays an
/// op in this model, so the time is the same (the planner's search takes each configuration's
/// memory from replay_memory, which equals the simulation's). Memory samples and the critical
/// path are not recorded, whatever `options` say.
TimeNs simulate_step_time(const Schedule& schedule, const CostModel& costs,
                          SimOptions options = {});

/// Several ranks of one job on one clock, one engine per entry of `options` (each with its own
/// GPU speed): a collective starts on every engine of its instance when the last of them is ready
/// for it (OpRecord::ready is when each was). `instance[e][k]`: the group id (unique across
/// communicators) of engine e's instance of communicator k; every engine of a group must issue
/// the group's collectives. Results by engine.
std::vector<SimulationResult> simulate_together(const Schedule& schedule, const CostModel& costs,
                                                const std::vector<SimOptions>& options,
                                                const std::vector<std::vector<int>>& instance);

}  // namespace shardscope::sim
