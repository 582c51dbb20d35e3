#pragma once
// A whole host run: every rank of a schedule as threads of this process, or this process's rank
// of a multi-process job (torchrun, Slurm, Open MPI, --nproc-per-node) joined over TCP with the
// world in POSIX shared memory. Every rank checks it runs the same schedule (hash) in a world of
// the schedule's size before anything runs.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "shardscope/core/timeline.hpp"
#include "shardscope/exec/executor.hpp"
#include "shardscope/exec/host_backend.hpp"
#include "shardscope/exec/launcher.hpp"

namespace shardscope::exec {

/// The most ranks a host run takes (each is a thread per stream, or a process).
inline constexpr int kMaxHostRanks = 64;

struct HostJobOptions {
  HostBackendOptions backend;        // rank, world, epoch and slow_factor are set per rank
  std::map<int, double> slow_ranks;  // rank → duration factor (--slow-rank R:F)
  std::map<int, double> slow_links;  // node → its links' factor (variation.slow_links)
  int gpus_per_node = 8;             // how ranks map to nodes, for slow_links
  RunOptions run;
  std::int64_t max_chunk_bytes =
      std::int64_t{64} * 1024;  // collective data per rank (HostWorldLayout)
  std::chrono::milliseconds rendezvous_timeout{60'000};
};

/// One rank's steady-state iteration. Every rank waits for the others at each collective, so the
/// step times of a job differ by little even when one rank is slow; the slow rank is the one whose
/// compute stream was busy longest.
struct RankStep {
  TimeNs step_time = 0;
  TimeNs compute_busy = 0;
};

struct HostJobResult {
  Timeline timeline;                     // rank 0's (the rank this process reports)
  std::vector<Timeline> other_ranks;     // ranks 1.. of a threads job (a process job: none)
  std::vector<RankStep> ranks;           // every rank's, by rank (rank 0 of a process job)
  std::int64_t collectives_checked = 0;  // on this process's ranks
  std::int64_t elements_checked = 0;
};

/// Every rank of `schedule` as threads. Throws ExecError from the rank that failed first.
HostJobResult run_host_threads(const Schedule& schedule, const HostJobOptions& options);

/// This process's rank of `job`. Rank 0's result has every rank's step time; throws ExecError
/// (its own failure) or Error (another rank's, reported by rank 0).
HostJobResult run_host_process(const Schedule& schedule, const JobEnv& job,
                               const HostJobOptions& options);

}  // namespace shardscope::exec
