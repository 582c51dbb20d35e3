// `shardscope run`: the scenario's schedule executed on a backend, measured op by op, summarized
// like `simulate` and compared with the simulation.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>

#include "commands.hpp"
#include "shardscope/exec/host_job.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/rank_simulation.hpp"

namespace shardscope::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop(int) {
  g_stop.store(true);
}

void check_args(const RunArgs& args, const Schedule& schedule) {
  std::vector<Problem> problems;
  if (args.nproc_per_node > 0 && args.nproc_per_node != schedule.world_size) {
    problems.push_back({"--nproc-per-node", std::to_string(args.nproc_per_node),
                        fmt::format("the scenario has {} GPUs", schedule.world_size),
                        "as many processes as the scenario's world (nodes × gpus_per_node)"});
  }
  throw_if_any(std::move(problems));
}

void print_run_report(const exec::HostJobResult& result, const analysis::Summary& measured,
                      const analysis::Summary& simulated) {
  fmt::print("{}", analysis::summary_table(measured));
  const auto by_step = [](const exec::RankStep& a, const exec::RankStep& b) {
    return a.step_time < b.step_time;
  };
  const auto by_compute = [](const exec::RankStep& a, const exec::RankStep& b) {
    return a.compute_busy < b.compute_busy;
  };
  if (!result.ranks.empty()) {
    const auto [fastest, slowest] =
        std::minmax_element(result.ranks.begin(), result.ranks.end(), by_step);
    fmt::print("  {:<28}{} to {}\n", "step time over ranks", format_duration(fastest->step_time),
               format_duration(slowest->step_time));
    // Ranks wait for each other at every collective, so the straggler shows in its compute time.
    const auto [least, most] =
        std::minmax_element(result.ranks.begin(), result.ranks.end(), by_compute);
    fmt::print("  {:<28}{} to {} (slowest: rank {})\n", "compute over ranks",
               format_duration(least->compute_busy), format_duration(most->compute_busy),
               most - result.ranks.begin());
  }
  fmt::print("  {:<28}{} on this process's ranks, {} elements, all as expected\n",
             "collectives checked", result.collectives_checked, result.elements_checked);
  print_against_simulation(measured, simulated);
}

// FNV-1a over the arguments, each ended by a NUL.
std::uint64_t command_hash(const std::vector<std::string>& argv) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& a : argv) {
    for (const char c : a) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    h *= 0x100000001b3ULL;  // the separator: {"ab"} and {"a", "b"} differ
  }
  return h;
}

}  // namespace

sim::PipelineResult plan_run(const RunArgs& args) {
  return simulate_input(with_iterations(args.scenario, args));
}

TimeNs simulated_duration(const sim::PipelineResult& planned, OpId id) {
  const auto& rec = planned.simulation.ops[static_cast<std::size_t>(id)];
  return rec.end - rec.start;
}

exec::RunOptions run_options(const sim::PipelineResult& planned, const RunArgs& args,
                             bool reports) {
  exec::RunOptions run;
  run.facts = planned.timeline().facts;
  run.memory_capacity = planned.timeline().memory_capacity;
  run.scenario = args.scenario.path;
  run.overrides = planned.timeline().provenance.overrides;
  run.job = planned.timeline().provenance.job;
  run.stop = &g_stop;
  if (reports) {
    run.on_iteration = [iterations = planned.schedule.iterations](int i) {
      fmt::print(stderr, "run: iteration {} of {}\n", i + 1, iterations);
    };
  }
  return run;
}

bool run_interruptible(const std::function<void()>& body) {
  auto previous = std::signal(SIGINT, on_stop);
  try {
    body();
  } catch (const exec::Interrupted&) {
    std::signal(SIGINT, previous);
    fmt::print(stderr, "run: interrupted; nothing written\n");
    return false;
  }
  std::signal(SIGINT, previous);
  return true;
}

void print_against_simulation(const analysis::Summary& measured,
                              const analysis::Summary& simulated) {
  const double delta = simulated.step_time > 0
                           ? 100.0 * static_cast<double>(measured.step_time - simulated.step_time) /
                                 static_cast<double>(simulated.step_time)
                           : 0.0;
  fmt::print("  {:<28}{} measured, {} simulated ({:+.2f} %)\n", "against the simulation",
             format_duration(measured.step_time), format_duration(simulated.step_time), delta);
}

// The argv a spawned rank runs: this one without --nproc-per-node.
std::vector<std::string> child_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--nproc-per-node") {
      ++i;
      continue;
    }
    if (argv[i].rfind("--nproc-per-node=", 0) == 0) continue;
    out.push_back(argv[i]);
  }
  return out;
}

std::optional<exec::JobEnv> job_of_this_process(const RunArgs& args) {
  auto job = exec::job_from_environment([](const char* name) { return std::getenv(name); });
  if (job) {
    const std::string command = fmt::format("command {:016x}", command_hash(args.argv));
    job->identity = job->identity.empty() ? command : job->identity + " " + command;
  }
  return job;
}

ScenarioArgs with_iterations(ScenarioArgs input, const RunArgs& args) {
  if (args.iterations > 0)
    input.overrides.push_back(fmt::format("training.iterations={}", args.iterations + args.warmup));
  return input;
}

int run_run(const RunArgs& args) {
  if (args.backend == "cuda") return run_cuda(args);
  if (args.backend != "host")
    throw ValidationError({Problem{"--backend", args.backend, "unknown backend", "host, cuda"}});
  if (!args.comm.empty())
    throw ValidationError(
        {Problem{"--comm", args.comm, "is a cuda backend option", "--backend cuda"}});
  check_variation_args(args.variation);
  const auto job = job_of_this_process(args);
  const auto timeout = std::chrono::milliseconds(std::llround(args.timeout_s * 1000));
  if (args.nproc_per_node > 0 && !job) {
    // Lower once here so a bad scenario or a wrong process count fails before any process starts.
    const auto planned = plan_run(args);
    check_args(args, planned.schedule);
    variation_of(planned.scenario, args.variation);  // ranks and nodes in the world
    return exec::spawn_local_ranks(
        child_argv(args.argv), args.nproc_per_node, [](int rank, int status) {
          if (status != 0) fmt::print(stderr, "run: rank {} exited with status {}\n", rank, status);
        });
  }
  const bool reports = !job || job->rank == 0;
  if (reports) {
    check_run_outputs(args.scenario, args.outputs);
  }
  const auto planned = plan_run(args);
  check_args(args, planned.schedule);
  const VariationSpec spec = variation_of(planned.scenario, args.variation);
  const sim::RankVariation variation = sim::rank_variation(spec, planned.schedule.world_size,
                                                           planned.scenario.cluster.gpus_per_node);

  // The host backend takes each op's simulated time on its stream and the CPU issue cost.
  const sim::CostModel costs(planned.scenario);
  exec::HostJobOptions options;
  options.backend.cost = [&](OpId id, const Op& op) {
    const sim::OpCost c = costs.cost(planned.schedule, op);
    return exec::HostCost{simulated_duration(planned, id), c.cpu, c.latency};
  };
  options.backend.time_scale = args.time_scale;
  options.backend.jitter = variation.jitter;
  options.backend.seed = variation.seed;
  options.backend.issue_delay = variation.issue_delay;
  options.slow_links = variation.link_time_factor;
  options.gpus_per_node = planned.scenario.cluster.gpus_per_node;
  options.backend.timeout = timeout;
  options.rendezvous_timeout = timeout;
  options.backend.memory_capacity = planned.timeline().memory_capacity;
  options.backend.allocator = planned.scenario.allocator;
  // The named slow ranks and nodes with their --gpu-sigma draws: the factors simulate uses.
  options.slow_ranks = variation.gpu_time_factor;
  options.run = run_options(planned, args, reports);
  exec::HostJobResult result;
  const bool finished = run_interruptible([&] {
    result = job ? exec::run_host_process(planned.schedule, *job, options)
                 : exec::run_host_threads(planned.schedule, options);
  });
  if (!finished) return kExitFailure;
  if (!reports) return kExitOk;
  const auto measured = analysis::summarize(result.timeline);
  print_run_report(result, measured, planned.summary);
  if (spec.any()) {  // the same variation simulated: every rank replayed
    const TimeNs predicted =
        sim::simulate_ranks(planned.scenario, planned.schedule, variation).step_time;
    fmt::print(
        "  {:<28}{} measured, {} simulated with the same variation ({:+.2f} %)\n",
        "against every rank replayed", format_duration(measured.step_time),
        format_duration(predicted),
        100.0 * (static_cast<double>(measured.step_time) / static_cast<double>(predicted) - 1.0));
  }
  write_run_outputs(args.outputs, measured, result.timeline, result.other_ranks);
  return kExitOk;
}

}  // namespace shardscope::cli
