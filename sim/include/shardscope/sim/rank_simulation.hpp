#pragma once
// sim::simulate_ranks: every rank of the world replayed, each with its own GPU speed, and every
// collective held until the last rank of its communicator instance is ready for it.
//
// Ranks that cannot differ are one class, replayed once: ranks start in a class per GPU time
// factor, and a class splits while its ranks' communicator instances hold different mixes of
// classes (a refinement to a fixed point). A symmetric world is one class and costs one replay.
//
// The classes are replayed together on one clock (simulate_together), one engine each: a
// collective starts on every class of its instance when the last of them is ready for it.
//
// What it models: a rank's GPU running slower (SimOptions::gpu_time_factor: clock, power,
// thermals), each GPU op's time varying (jitter), the CPU thread away after issuing an op (issue
// delays), a node's network links slower (a collective across nodes that include it runs its
// bandwidth part at that pace), and every collective waiting for its slowest participant.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/sim/engine.hpp"

namespace shardscope::sim {

/// What makes the ranks of one job differ, rank by rank (rank_variation resolves a scenario's
/// VariationSpec into it).
struct RankVariation {
  std::map<int, double> gpu_time_factor =
      {};  // rank → its GPU ops take this × their time (1: none)
  // Each GPU op of each rank takes max(0, 1 + jitter·N(0, 1)) × its time, drawn per rank from
  // `seed` (as `run --backend host --jitter` draws). With jitter no two ranks are alike: every rank
  // is replayed on its own.
  double jitter = 0.0;
  // node → its network links move bytes this × as long (VariationSpec::slow_links).
  std::map<int, double> link_time_factor = {};
  // Mean of the exponential time the CPU thread is away after each op it issues, drawn per rank
  // and op (VariationSpec::issue_delay); like jitter, it makes every rank its own.
  TimeNs issue_delay = 0;
  std::uint64_t seed = 1;
};

/// A scenario's variation rank by rank: slow nodes and ranks with their gpu_sigma draws, slow
/// links, jitter, issue delays and the seed.
RankVariation rank_variation(const VariationSpec& spec, int world_size, int gpus_per_node);

/// Ranks identical in speed and in whom they wait for, replayed once.
struct RankClass {
  std::vector<int> ranks;  // ascending
  double gpu_time_factor = 1.0;
  double link_time_factor = 1.0;  // its node's network links (RankVariation::link_time_factor)
  SimulationResult result;  // its replay: OpRecord::ready < start where it waited for other ranks
  TimeNs step_time = 0;     // its last iteration (analysis::Summary::step_time)
  TimeNs alone_step_time = 0;  // the same replayed with nobody to wait for
  // The last iteration: how long its collectives were held for other ranks, by op kind name,
  // summed over collectives (what a profiler shows as NCCL kernels waiting for their peers). The
  // lags of consecutive collectives overlap, so this is not the time lost: that is
  // step_time − alone_step_time.
  std::map<std::string, TimeNs> waited;
  TimeNs waited_total = 0;
  int collectives = 0;   // collectives of the last iteration
  int arrived_last = 0;  // of them, those it was the last class of its instance to be ready for
  std::vector<OpId>
      last_ready;  // every collective (all iterations) it was the last to be ready for
};

struct RankSimulation {
  int world_size = 1;
  std::vector<RankClass> classes;  // by their lowest rank
  TimeNs step_time = 0;            // the job's: the slowest class's
  std::size_t straggler = 0;       // the class the others waited for most often (arrived_last)
  // The job's iterations after the first (the first too when there is one): from the end of the
  // one before (or 0) to the end of its last op on any rank.
  std::vector<TimeNs> iteration_times;
};

/// The nearest-rank percentile `p` (0 < p ≤ 100) of `times`; 0 when empty.
TimeNs percentile(std::vector<TimeNs> times, double p);

/// Every rank of `schedule` on `scenario`'s hardware (nodes of scenario.cluster.gpus_per_node
/// ranks). Throws Error for a factor outside (0, 100], a rank or node outside the world, jitter
/// outside [0, 1] or a negative issue delay.
RankSimulation simulate_ranks(const Scenario& scenario, const Schedule& schedule,
                              const RankVariation& variation, const SimOptions& options = {});

/// At most `count` classes, those the others waited for most first: by how often each was the
/// last of its instance to be ready, ties by lowest rank (the straggler is the first).
std::vector<std::size_t> most_waited_for(const RankSimulation& r, std::size_t count);

/// "0-7, 16, 18-23": ranks as ranges.
std::string rank_ranges(const std::vector<int>& ranks);

}  // namespace shardscope::sim
