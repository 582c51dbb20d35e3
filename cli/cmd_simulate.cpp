#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/traces/chrome_trace.hpp"

namespace shardscope::cli {

sim::PipelineResult simulate_input(const ScenarioArgs& input) {
  sim::PipelineOptions pipeline;
  pipeline.origin = input.path;
  pipeline.overrides = override_list(input);
  if (is_schedule_file(input.path)) {
    if (!input.overrides.empty() || !input.model_preset.empty() || input.nodes > 0 ||
        input.gpus_per_node > 0) {
      throw ValidationError({Problem{
          input.path, "",
          "is a schedule IR: --set, --model, --nodes and --gpus-per-node apply to scenarios",
          "only --cluster (the hardware to cost the IR on)"}});
    }
    Schedule schedule = load_schedule_file(input.path);
    Scenario scenario = scenario_for_schedule(schedule, input);
    return sim::simulate_schedule(std::move(scenario), std::move(schedule), pipeline);
  }
  return sim::simulate_scenario(load_scenario_args(input), pipeline);
}

void print_profile_coverage(const Schedule& schedule, const DeviceProfile& profile) {
  const ProfileCoverage c = profile_coverage(schedule, profile);
  fmt::print(
      "  {:<28}{} of {} compute ops fully measured ({} GEMM/attention shapes not in it; "
      "those run on the roofline), profile of {}\n",
      "device profile", c.covered_ops, c.compute_ops, c.missing_shapes, profile.device);
}

void write_run_outputs(const RunOutputs& outputs, const analysis::Summary& summary,
                       const Timeline& timeline, std::span<const Timeline> other_ranks) {
  if (!outputs.json_path.empty())
    write_output(outputs.json_path, analysis::summary_to_json(summary));
  if (!outputs.timeline_path.empty())
    write_output(outputs.timeline_path, timeline_to_json(timeline));
  if (!outputs.trace_path.empty()) {
    std::vector<Timeline> ranks{timeline};
    ranks.insert(ranks.end(), other_ranks.begin(), other_ranks.end());
    write_output(outputs.trace_path, traces::chrome_trace_json(ranks),
                 " (open it in ui.perfetto.dev)");
  }
}

void check_run_outputs(const ScenarioArgs& input, const RunOutputs& outputs) {
  check_outputs(input, {{"--json", outputs.json_path},
                        {"--timeline", outputs.timeline_path},
                        {"--trace", outputs.trace_path}});
}

int run_simulate(const SimulateArgs& args) {
  check_run_outputs(args.scenario, args.outputs);
  const auto run = simulate_input(args.scenario);
  fmt::print("{}", analysis::summary_table(run.summary));
  if (const auto& profile = run.scenario.cluster.gpu.device_profile)
    print_profile_coverage(run.schedule, *profile);
  write_run_outputs(args.outputs, run.summary, run.timeline());
  if (run.summary.fit == analysis::Fit::does_not_fit) {
    fmt::print(stderr, "does not fit: {}\n",
               run.summary.out_of_memory.empty() ? "peak reserved memory exceeds the GPU"
                                                 : run.summary.out_of_memory);
    return kExitDoesNotFit;
  }
  return kExitOk;
}

}  // namespace shardscope::cli
