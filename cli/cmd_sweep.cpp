#include <fmt/format.h>

#include "commands.hpp"
#include "interrupt.hpp"
#include "progress.hpp"
#include "shardscope/sim/planner.hpp"
#include "shardscope/sim/sweep.hpp"

namespace shardscope::cli {

int run_sweep(const SweepArgs& args) {
  std::vector<Problem> problems;
  std::vector<sim::SweepAxis> axes;
  for (const auto& g : args.grid) {
    if (auto axis = sim::parse_sweep_axis(g, problems)) axes.push_back(std::move(*axis));
  }
  sim::check_sweep_axes(axes, problems);
  std::optional<Bytes> budget;
  if (!args.memory_budget.empty())
    budget = size_flag("--memory-budget", args.memory_budget, problems);
  throw_if_any(std::move(problems));
  check_outputs(args.scenario, {{"--csv", args.csv_path}, {"--json", args.json_path}});
  const ConfigTree tree = load_scenario_tree(args.scenario);
  // A broken base scenario fails here, once and clearly, rather than at every grid point.
  const Scenario base = read_scenario(tree, args.scenario.path,
                                      std::filesystem::path(args.scenario.path).parent_path());
  if (budget) warn_budget_above_capacity("--memory-budget", *budget, sim::plan_capacity(base));

  const std::size_t total = sim::grid_size(axes);
  Progress progress("sweep", total);
  sim::SweepOptions options;
  options.threads = args.threads;
  options.memory_budget = budget;
  options.progress = [&](std::size_t done, std::size_t) { progress.update(done); };
  std::vector<sim::SweepPoint> points;
  const bool interrupted = [&] {
    const InterruptFlag ctrl_c;
    options.cancel = ctrl_c.flag();
    points = sim::sweep(tree, args.scenario.path, axes, options);
    return ctrl_c.raised();
  }();
  if (interrupted)
    fmt::print(stderr, "sweep: interrupted; {} of {} configurations done\n", points.size(), total);

  std::string header;
  for (const auto& a : axes) header += fmt::format("{:<24} ", a.key);
  fmt::print("{:>4}  {}{:>16} {:>12} {:>13}  {}\n", "rank", header, "tokens/s/GPU", "step",
             "reserved", "");
  std::size_t rank = 0, fitting = 0, pareto = 0;
  for (const auto& p : points) {
    std::string cells;
    for (const auto& v : p.values) cells += fmt::format("{:<24} ", v);
    ++rank;
    if (!p.error.empty()) {
      fmt::print("{:>4}  {}invalid: {}\n", rank, cells, p.error);
      continue;
    }
    fitting += p.fits;
    pareto += p.pareto;
    fmt::print("{:>4}  {}{:>16.0f} {:>12} {:>13}  {}{}\n", rank, cells,
               p.summary.tokens_per_s_per_gpu.value(), format_duration(p.summary.step_time),
               format_bytes(p.summary.peak_reserved.value()),
               p.fit_note.empty() ? std::string(p.fits ? "fits" : "does not fit")
               : p.fits           ? fmt::format("fits ({})", p.fit_note)
                                  : fmt::format("does not fit: {}", p.fit_note),
               p.pareto ? "  * Pareto" : "");
  }
  fmt::print(
      "{} configurations, {} fit{}, {} on the Pareto front (throughput vs reserved memory)\n",
      points.size(), fitting, budget ? fmt::format(" in {}", format_bytes(*budget)) : std::string(),
      pareto);
  if (!args.csv_path.empty()) write_output(args.csv_path, sim::sweep_csv(axes, points));
  if (!args.json_path.empty()) write_output(args.json_path, sim::sweep_json(axes, points, total));
  return interrupted ? kExitFailure : kExitOk;
}

}  // namespace shardscope::cli
