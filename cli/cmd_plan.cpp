#include <fmt/format.h>

#include <string>

#include "commands.hpp"
#include "interrupt.hpp"
#include "progress.hpp"
#include "shardscope/core/device_memory.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/planner.hpp"

namespace shardscope::cli {
namespace {

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
  // What the caching allocator may reserve (device memory less the CUDA context and NCCL's
  // buffers, times any memory fraction): the capacity a simulation of the scenario compares with.
  const Bytes capacity = allocator_capacity(base.cluster, base.allocator, lower(base));
  options.memory_budget = memory_budget(args, capacity, problems);
  throw_if_any(std::move(problems));
  const sim::PlanSpace space = sim::default_plan_space(base, inputs);
  options.top = args.top;
  options.threads = args.threads;
  Progress progress("plan", space.size());
  options.progress = [&](std::size_t settled, std::size_t) { progress.update(settled); };
  const sim::PlanResult result = [&] {
    const InterruptFlag ctrl_c;
    options.cancel = ctrl_c.flag();
    return sim::plan(tree, args.scenario.path, space, options);
  }();
  if (result.cancelled)
    fmt::print(stderr, "plan: interrupted; the ranking covers only what was simulated\n");
  fmt::print("{}", sim::plan_table(space, result));
  if (!args.json_path.empty()) write_output(args.json_path, sim::plan_json(space, result));
  return result.cancelled ? kExitFailure : kExitOk;
}

}  // namespace shardscope::cli
