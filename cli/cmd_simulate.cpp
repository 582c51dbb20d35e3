#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "commands.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/sim/pipeline.hpp"
#include "shardscope/sim/rank_simulation.hpp"
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

namespace {

std::string waits_text(const sim::RankClass& c) {
  if (c.waited_total == 0) return "none";
  std::string out;
  for (const auto& [kind, t] : c.waited)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", kind, format_duration(t));
  return out;
}

// Every rank replayed with its own GPU speed: the classes, what each waited for, the straggler.
void print_ranks(const sim::RankSimulation& r, TimeNs symmetric) {
  fmt::print("\nevery rank replayed ({} ranks in {} classes, each replayed once on one clock)\n",
             r.world_size, r.classes.size());
  // The links' column only where a link is slow.
  const bool links = std::any_of(r.classes.begin(), r.classes.end(),
                                 [](const sim::RankClass& c) { return c.link_time_factor != 1.0; });
  const auto links_text = [&](const sim::RankClass& c) {
    return links ? fmt::format("{:>9}", fmt::format("× {:.2f}", c.link_time_factor)) : "";
  };
  fmt::print("  {:<24}{:>9}{}{:>12}{:>14}  {:<21}{}\n", "ranks", "GPU time",
             links ? fmt::format("{:>9}", "links") : "", "step time", "lost waiting",
             "last to be ready", "collectives held for other ranks (sum)");
  // Every class in rank order where they fit; else (jitter makes every rank one) the straggler
  // first, then those last to be ready most often, up to kRows.
  constexpr std::size_t kRows = 8;
  std::vector<std::size_t> order(r.classes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (order.size() > kRows) order = sim::most_waited_for(r, kRows);
  for (std::size_t index : order) {
    const auto& c = r.classes[index];
    fmt::print("  {:<24}{:>9}{}{:>12}{:>14}  {:<21}{}\n",
               fmt::format("{} ({})", sim::rank_ranges(c.ranks), c.ranks.size()),
               fmt::format("× {:.2f}", c.gpu_time_factor), links_text(c),
               format_duration(c.step_time),
               format_duration(std::max<TimeNs>(0, c.step_time - c.alone_step_time)),
               fmt::format("{} of {}", c.arrived_last, c.collectives), waits_text(c));
  }
  if (r.classes.size() > order.size())
    fmt::print("  {:<24}(and {} more classes)\n", "", r.classes.size() - order.size());
  fmt::print("  {:<24}{} ({:+.1f} % against every rank as modelled, {})\n", "job step time",
             format_duration(r.step_time),
             100.0 * (static_cast<double>(r.step_time) / static_cast<double>(symmetric) - 1.0),
             format_duration(symmetric));
  if (r.iteration_times.size() > 1) {
    const auto& t = r.iteration_times;
    fmt::print("  {:<24}p50 {}, p95 {}, p99 {}, max {} (over {} iterations after the first)\n",
               "step time distribution", format_duration(sim::percentile(t, 50)),
               format_duration(sim::percentile(t, 95)), format_duration(sim::percentile(t, 99)),
               format_duration(sim::percentile(t, 100)), t.size());
  }
  const auto& s = r.classes[r.straggler];
  if (r.classes.size() > 1 && s.arrived_last > 0) {
    fmt::print(
        "  {:<24}ranks {} (GPU time × {:.2f}{}): the last to be ready at {} of {} "
        "collectives\n",
        "straggler", sim::rank_ranges(s.ranks), s.gpu_time_factor,
        s.link_time_factor != 1.0 ? fmt::format(", links × {:.2f}", s.link_time_factor) : "",
        s.arrived_last, s.collectives);
  }
}

}  // namespace

int run_simulate(const SimulateArgs& args) {
  check_run_outputs(args.scenario, args.outputs);
  check_variation_args(args.variation);
  if (!args.rank_timelines.empty() && !std::filesystem::is_directory(args.rank_timelines)) {
    throw ValidationError({Problem{"--rank-timelines", args.rank_timelines, "is not a directory",
                                   "an existing directory"}});
  }
  const auto run = simulate_input(args.scenario);
  // Ranks and nodes in this world, before anything is printed.
  const VariationSpec spec = variation_of(run.scenario, args.variation);
  const bool per_rank = spec.any();
  if (!per_rank && !args.rank_timelines.empty()) {
    throw ValidationError({Problem{"--rank-timelines", args.rank_timelines,
                                   "every rank is alike: there is one timeline (--timeline)",
                                   "a variation: --slow-rank, --slow-node, --slow-link, --jitter, "
                                   "--issue-delay, --gpu-sigma or variation.* keys"}});
  }
  const sim::RankVariation variation =
      sim::rank_variation(spec, run.schedule.world_size, run.scenario.cluster.gpus_per_node);
  fmt::print("{}", analysis::summary_table(run.summary));
  if (const auto& profile = run.scenario.cluster.gpu.device_profile)
    print_profile_coverage(run.schedule, *profile);
  if (per_rank) {
    const auto ranks = sim::simulate_ranks(run.scenario, run.schedule, variation);
    print_ranks(ranks, run.summary.step_time);
    // --json and --timeline are the straggler's (the rank the job waits for); --trace has every
    // class, each as the process of its lowest rank.
    std::vector<Timeline> lanes;
    const auto add_lane = [&](const sim::RankClass& c) {
      lanes.push_back(c.result.timeline);
      lanes.back().provenance = run.timeline().provenance;  // the same job, another rank
      lanes.back().provenance.rank = c.ranks.front();
      lanes.back().memory_tight_margin = run.timeline().memory_tight_margin;
    };
    add_lane(ranks.classes[ranks.straggler]);
    for (std::size_t c = 0; c < ranks.classes.size(); ++c)
      if (c != ranks.straggler) add_lane(ranks.classes[c]);
    write_run_outputs(args.outputs, analysis::summarize(lanes.front()), lanes.front(),
                      std::span<const Timeline>(lanes).subspan(1));
    for (const Timeline& lane : lanes) {
      if (args.rank_timelines.empty()) break;
      write_output((std::filesystem::path(args.rank_timelines) /
                    fmt::format("rank-{}.json", lane.provenance.rank))
                       .string(),
                   timeline_to_json(lane));
    }
  } else {
    write_run_outputs(args.outputs, run.summary, run.timeline());
  }
  if (run.summary.fit == analysis::Fit::does_not_fit) {
    fmt::print(stderr, "does not fit: {}\n",
               run.summary.out_of_memory.empty() ? "peak reserved memory exceeds the GPU"
                                                 : run.summary.out_of_memory);
    return kExitDoesNotFit;
  }
  return kExitOk;
}

}  // namespace shardscope::cli
