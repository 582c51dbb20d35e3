#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/sim/metrics.hpp"
#include "shardscope/traces/chrome_trace.hpp"

namespace shardscope::cli {

int run_simulate(const SimulateArgs& args) {
  const Scenario scenario = load_scenario_args(args.scenario);
  const Schedule schedule = lower(scenario);
  const sim::CostModel costs(scenario);
  sim::SimOptions options;
  options.allocator.expandable_segments = args.expandable_segments;
  const auto result = sim::simulate(schedule, costs, options);
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
  if (!args.trace_path.empty()) write_output(args.trace_path, traces::chrome_trace_json(result.timeline, &schedule), " (open it in ui.perfetto.dev)");
  return kExitOk;
}

}  // namespace shardscope::cli
