#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/sim/metrics.hpp"
#include "shardscope/traces/chrome_trace.hpp"

namespace shardscope::cli {

int run_simulate(const SimulateArgs& args) {
  check_outputs(args.scenario, {{"--json", args.json_path},
                                {"--timeline", args.timeline_path},
                                {"--trace", args.trace_path}});
  Scenario scenario;
  Schedule schedule;
  if (is_schedule_file(args.scenario.path)) {
    if (!args.scenario.overrides.empty() || !args.scenario.model_preset.empty() ||
        args.scenario.nodes > 0 || args.scenario.gpus_per_node > 0) {
      throw ValidationError({Problem{
          args.scenario.path, "",
          "is a schedule IR: --set, --model, --nodes and --gpus-per-node apply to scenarios",
          "only --cluster (the hardware to cost the IR on)"}});
    }
    schedule = load_schedule_file(args.scenario.path);
    scenario = scenario_for_schedule(schedule, args.scenario);
  } else {
    scenario = load_scenario_args(args.scenario);
    schedule = lower(scenario);
  }
  const sim::CostModel costs(scenario);
  sim::SimOptions options;
  options.allocator.expandable_segments = args.expandable_segments;
  const auto result = [&] {
    try {
      return sim::simulate(schedule, costs, options);
    } catch (const ValidationError& e) {  // an op too long to simulate: name the input
      auto problems = e.problems();
      for (auto& p : problems) {
        if (p.file.empty()) p.file = args.scenario.path;
      }
      throw ValidationError(std::move(problems));
    }
  }();
  const auto summary = sim::summarize(scenario, schedule, result);
  fmt::print("{}", sim::summary_table(summary));
  if (!args.json_path.empty()) write_output(args.json_path, sim::summary_to_json(summary));
  if (!args.timeline_path.empty()) {
    auto timeline = result.timeline;
    timeline.metrics = {{"step_time_s", ns_to_s(summary.step_time)},
                        {"tokens_per_s_per_gpu", summary.tokens_per_s_per_gpu},
                        {"mfu", summary.mfu},
                        {"peak_allocated_bytes", static_cast<double>(summary.peak_allocated)},
                        {"peak_reserved_bytes", static_cast<double>(summary.peak_reserved)},
                        {"comm_exposed_s", ns_to_s(summary.comm_exposed)}};
    write_output(args.timeline_path, timeline_to_json(timeline));
  }
  if (!args.trace_path.empty())
    write_output(args.trace_path, traces::chrome_trace_json(result.timeline, &schedule),
                 " (open it in ui.perfetto.dev)");
  if (!summary.fits) {
    fmt::print(stderr, "does not fit: {}\n",
               summary.out_of_memory.empty() ? "peak reserved memory exceeds the GPU"
                                             : summary.out_of_memory);
    return kExitDoesNotFit;
  }
  return kExitOk;
}

}  // namespace shardscope::cli
