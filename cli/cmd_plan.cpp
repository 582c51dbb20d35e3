#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <string>

#include "commands.hpp"
#include "progress.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/planner.hpp"

namespace shardscope::cli {
namespace {

std::atomic<bool> g_cancel{false};
extern "C" void on_plan_interrupt(int) {
  g_cancel.store(true);
}

// --memory-budget, or the capacity less --margin ("5%" or a size).
Bytes memory_budget(const PlanArgs& args, Bytes capacity, std::vector<Problem>& problems) {
  if (!args.memory_budget.empty()) {
    const auto budget = parse_bytes(args.memory_budget);
    if (budget && *budget > 0) return *budget;
    problems.push_back({"--memory-budget", args.memory_budget, "not a size", "e.g. 72GiB"});
    return 0;
  }
  const std::string& m = args.margin;
  if (!m.empty() && m.back() == '%') {
    try {
      std::size_t used = 0;
      const double pct = std::stod(m.substr(0, m.size() - 1), &used);
      if (used + 1 == m.size() && pct >= 0 && pct < 100)
        return static_cast<Bytes>(static_cast<double>(capacity) * (1 - pct / 100));
    } catch (const std::exception&) {
    }
  } else if (const auto size = parse_bytes(m); size && *size >= 0 && *size < capacity) {
    return capacity - *size;
  }
  problems.push_back({"--margin", m, "not a percentage below 100 or a size below the capacity",
                      "e.g. 5% or 4GiB"});
  return 0;
}

}  // namespace

int run_plan(const PlanArgs& args) {
  check_outputs(args.scenario, {{"--json", args.json_path}});
  const ConfigTree tree = load_scenario_tree(args.scenario);
  const Scenario base = read_scenario(tree, args.scenario.path,
                                      std::filesystem::path(args.scenario.path).parent_path());
  std::vector<Problem> problems;
  sim::PlanInputs inputs;
  inputs.api = args.api;
  if (args.global_batch_tokens > 0) inputs.global_batch_tokens = args.global_batch_tokens;
  if (args.global_batch_sequences > 0)
    inputs.global_batch_tokens = args.global_batch_sequences * base.training.seq_len;
  for (const auto& f : args.fix) {
    const auto eq = f.find('=');
    if (eq == std::string::npos || eq == 0) {
      problems.push_back({"--fix", f, "not KEY=VALUE", "e.g. --fix training.loss=fused"});
      continue;
    }
    inputs.fixed.emplace_back(f.substr(0, eq), f.substr(eq + 1));
  }
  sim::PlanOptions options;
  // What the caching allocator may reserve (device memory less the CUDA context, times any
  // memory fraction), as the simulator reports it.
  sim::PipelineOptions quick;
  quick.sim.record_memory_samples = false;
  quick.sim.record_critical_path = false;
  const Bytes capacity = sim::simulate_scenario(base, quick).summary.capacity;
  options.memory_budget = memory_budget(args, capacity, problems);
  throw_if_any(std::move(problems));
  const sim::PlanSpace space = sim::default_plan_space(base, inputs);
  options.top = args.top;
  options.threads = args.threads;
  Progress progress("plan", space.size());
  options.progress = [&](std::size_t settled, std::size_t) { progress.update(settled); };
  options.cancel = &g_cancel;
  auto previous = std::signal(SIGINT, on_plan_interrupt);
  const auto result = sim::plan(tree, args.scenario.path, space, options);
  std::signal(SIGINT, previous);
  if (result.cancelled)
    fmt::print(stderr, "plan: interrupted; the ranking covers only what was simulated\n");
  fmt::print("{}", sim::plan_table(space, result));
  if (!args.json_path.empty()) write_output(args.json_path, sim::plan_json(space, result));
  return result.cancelled ? kExitFailure : kExitOk;
}

}  // namespace shardscope::cli
