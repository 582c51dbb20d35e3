#include "shardscope/exec/host_job.hpp"

#include <fmt/format.h>

#include <exception>
#include <sstream>
#include <thread>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/rank_speed.hpp"
#include "shardscope/exec/shared_memory.hpp"

namespace shardscope::exec {
namespace {

HostWorldLayout layout_for(const Schedule& s, const HostJobOptions& options) {
  return {s.world_size, s.communicators, options.max_chunk_bytes};
}

HostBackendOptions backend_for(const Schedule& s, const HostJobOptions& options, int rank,
                               HostWorld& world, HostWorld::Clock::time_point epoch,
                               const char* ranks_as) {
  HostBackendOptions b = options.backend;
  b.rank = rank;
  b.world = &world;
  b.epoch = epoch;
  b.ranks_as = ranks_as;
  const auto slow = options.slow_ranks.find(rank);
  b.slow_factor = slow == options.slow_ranks.end() ? 1.0 : slow->second;
  b.comm_time_factors =
      link_time_factors(s, options.slow_links, rank, std::max(1, options.gpus_per_node));
  return b;
}

struct RankRun {
  Timeline timeline;
  std::int64_t collectives_checked = 0;
  std::int64_t elements_checked = 0;
};

// One rank: its backend over `world`, the executor, what its collectives checked. Rank 0 alone
// reports progress.
RankRun run_rank(const Schedule& s, const HostJobOptions& options, int rank, HostWorld& world,
                 HostWorld::Clock::time_point epoch, const char* ranks_as) {
  HostBackend backend(backend_for(s, options, rank, world, epoch, ranks_as));
  RunOptions run = options.run;
  if (rank != 0) run.on_iteration = nullptr;
  RankRun out{exec::run(s, backend, run), 0, 0};
  out.collectives_checked = backend.collectives_checked();
  out.elements_checked = backend.elements_checked();
  return out;
}

void check_world(const Schedule& s) {
  if (s.world_size > kMaxHostRanks) {
    throw ValidationError(
        {Problem{"", "cluster",
                 fmt::format("the host backend runs at most {} ranks; this schedule has {}",
                             kMaxHostRanks, s.world_size),
                 "fewer GPUs (--nodes, --gpus-per-node), or --backend cuda on real GPUs"}});
  }
}

// A rank that stopped because another failed says so; the failure itself ranks first.
bool is_consequence(const std::string& message) {
  return message.find("another rank failed") != std::string::npos ||
         message.find("another op failed") != std::string::npos;
}

RankStep rank_step(const Timeline& timeline) {
  const analysis::Summary summary = analysis::summarize(timeline, false);
  RankStep step{summary.step_time, 0};
  for (const auto& [stream, busy] : summary.stream_busy)
    if (stream == "compute" && busy) step.compute_busy = *busy;
  return step;
}

// The outcome a rank sends to rank 0 is "ok STEP_NS COMPUTE_BUSY_NS".
RankStep parse_rank_step(const std::string& text) {
  RankStep step;
  std::istringstream in(text);
  if (!(in >> step.step_time >> step.compute_busy))
    throw Error(fmt::format("a rank reported '{}' instead of its step and compute time", text));
  return step;
}

}  // namespace

HostJobResult run_host_threads(const Schedule& s, const HostJobOptions& options) {
  check_world(s);
  LocalHostWorld local(layout_for(s, options));
  const auto epoch = HostWorld::Clock::now();
  const auto ranks = static_cast<std::size_t>(s.world_size);
  std::vector<RankRun> runs(ranks);
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        runs[r] = run_rank(s, options, static_cast<int>(r), local.world(), epoch, "threads");
      } catch (...) {
        errors[r] = std::current_exception();
        local.world().abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::exception_ptr first, cause;  // the first failure, and the first that is not a consequence
  for (const auto& e : errors) {
    if (!e) continue;
    if (!first) first = e;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      if (!cause && !is_consequence(ex.what())) cause = e;
    }
  }
  if (cause) std::rethrow_exception(cause);
  if (first) std::rethrow_exception(first);
  HostJobResult result;
  for (const auto& run : runs) {
    result.ranks.push_back(rank_step(run.timeline));
    result.collectives_checked += run.collectives_checked;
    result.elements_checked += run.elements_checked;
  }
  result.timeline = std::move(runs[0].timeline);
  for (std::size_t r = 1; r < runs.size(); ++r)
    result.other_ranks.push_back(std::move(runs[r].timeline));
  return result;
}

HostJobResult run_host_process(const Schedule& s, const JobEnv& job,
                               const HostJobOptions& options) {
  check_world(s);
  if (job.world_size != s.world_size) {
    throw ValidationError(
        {Problem{"", "WORLD_SIZE",
                 fmt::format("the job has {} ranks but the schedule is for {}", job.world_size,
                             s.world_size),
                 "as many processes as the scenario has GPUs (nodes × gpus_per_node)"}});
  }
  if (job.local_world_size != job.world_size) {
    throw ValidationError({Problem{
        "", "LOCAL_WORLD_SIZE",
        fmt::format("the job spans several machines ({} of {} ranks here)", job.local_world_size,
                    job.world_size),
        "the host backend runs all ranks on one machine; --backend cuda runs across nodes"}});
  }
  Rendezvous rdv(job, options.rendezvous_timeout);
  const auto hash = schedule_hash(s);
  const auto hellos =
      rdv.gather(fmt::format("{:016x} {}", hash, job.world_size), "the schedule check");
  const HostWorldLayout layout = layout_for(s, options);
  std::optional<SharedMemory> shm;
  std::string verdict;
  if (job.rank == 0) {
    for (std::size_t r = 0; r < hellos.size() && verdict.empty(); ++r) {
      if (hellos[r] != hellos[0]) {
        verdict = fmt::format(
            "error rank {} runs a different schedule or world ('{}' against rank 0's '{}'): "
            "every rank must lower the same scenario",
            r, hellos[r], hellos[0]);
      }
    }
    if (verdict.empty()) {
      const std::string name = job.launcher == "shardscope" && !job.run_id.empty()
                                   ? launched_run_shared_memory(job.run_id)
                                   : SharedMemory::unique_name();
      shm.emplace(SharedMemory::create(name, HostWorld::region_bytes(layout)));
      verdict = "ok " + name;
    }
  }
  verdict = rdv.broadcast(verdict, "the verdict of the schedule check");
  if (verdict.rfind("ok ", 0) != 0) throw Error(verdict.substr(6));
  if (job.rank != 0)
    shm.emplace(SharedMemory::open(verdict.substr(3), HostWorld::region_bytes(layout)));
  (void)rdv.gather("mapped", "the shared memory mapping");
  if (job.rank == 0) shm->unlink();  // every rank has it mapped: nothing can leak now
  // Time 0 of every rank: when rank 0 says go (one steady clock on one machine).
  const std::string go =
      rdv.broadcast(std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       HostWorld::Clock::now().time_since_epoch())
                                       .count()),
                    "the start");
  const std::int64_t epoch_ns = std::stoll(go);

  HostWorld world(shm->data(), layout);
  const HostWorld::Clock::time_point epoch{std::chrono::nanoseconds(epoch_ns)};
  HostJobResult result;
  std::string outcome;
  std::exception_ptr failure;
  try {
    RankRun run = run_rank(s, options, job.rank, world, epoch, "processes");
    result.timeline = std::move(run.timeline);
    result.collectives_checked = run.collectives_checked;
    result.elements_checked = run.elements_checked;
    const RankStep step = rank_step(result.timeline);
    outcome = fmt::format("ok {} {}", step.step_time, step.compute_busy);
  } catch (const std::exception& e) {
    failure = std::current_exception();
    world.abort();
    outcome = fmt::format("error {}", e.what());
  }
  std::vector<std::string> outcomes;
  try {
    outcomes = rdv.gather(outcome, "the ranks' results");
    (void)rdv.broadcast("done", "the end of the run");
  } catch (const Error&) {
    // A rank that failed says why (a collective naming the rank that did not arrive), not that
    // the failed peer then did not report.
    if (failure) std::rethrow_exception(failure);
    throw;
  }
  if (failure) std::rethrow_exception(failure);
  if (job.rank == 0) {
    for (std::size_t r = 0; r < outcomes.size(); ++r) {
      if (outcomes[r].rfind("ok ", 0) != 0)
        throw Error(fmt::format("rank {} failed: {}", r, outcomes[r].substr(6)));
      result.ranks.push_back(parse_rank_step(outcomes[r].substr(3)));
    }
  }
  return result;
}

}  // namespace shardscope::exec
