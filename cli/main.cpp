// shardscope: plan, simulate and run PyTorch FSDP training steps.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <string_view>

#include "commands.hpp"
#include "shardscope/core/config_reader.hpp"
#include "shardscope/core/error.hpp"

namespace {

using namespace shardscope::cli;

constexpr std::array<std::string_view, 6> kCommands{"presets", "keys",     "validate",
                                                    "lower",   "simulate", "sweep"};

void add_scenario_args(CLI::App* cmd, ScenarioArgs& args) {
  cmd->add_option("scenario", args.path, "scenario file (.yaml, .yml or .json)")->required();
  cmd->add_option("--set", args.overrides,
                  "override a key: --set fsdp.reshard_after_forward=false (repeatable)")
      ->type_name("KEY=VALUE");
}

void print_problems(const shardscope::ValidationError& e) {
  const auto& problems = e.problems();
  fmt::print(stderr, "error: {} problem{}:\n", problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems) fmt::print(stderr, "  {}\n", p.to_string());
}

}  // namespace

int main(int argc, char** argv) {
  // An unknown subcommand gets a "did you mean" before CLI11 sees it.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string_view cmd = argv[1];
    if (std::find(kCommands.begin(), kCommands.end(), cmd) == kCommands.end()) {
      std::vector<std::string> names(kCommands.begin(), kCommands.end());
      const auto guess = shardscope::closest_match(cmd, names);
      fmt::print(stderr, "error: unknown command '{}'{}\n", cmd,
                 guess.empty() ? "" : fmt::format("; did you mean '{}'?", guess));
      fmt::print(
          stderr,
          "commands: presets, keys, validate, lower, simulate, sweep; see shardscope --help\n");
      return kExitBadInput;
    }
  }

  CLI::App app{"shardscope: plan, simulate and run PyTorch FSDP training steps"};
  app.set_version_flag("--version", std::string("shardscope ") + SHARDSCOPE_VERSION);
  app.require_subcommand(1);

  app.add_subcommand("presets", "list model and cluster presets with their key numbers");
  KeysArgs keys_args;
  auto* keys = app.add_subcommand(
      "keys", "every scenario key: type, unit, range, default and what it models");
  keys->add_option("prefix", keys_args.prefix,
                   "only keys starting with this (e.g. fsdp.mixed_precision)");
  keys->add_flag("--markdown", keys_args.markdown, "as Markdown (docs/scenario.md)");
  ScenarioArgs validate_args;
  auto* validate = app.add_subcommand("validate", "check a scenario and print what it describes");
  add_scenario_args(validate, validate_args);

  LowerArgs lower_args;
  auto* lower = app.add_subcommand(
      "lower", "lower a scenario into the schedule IR PyTorch's FSDP would issue");
  add_scenario_args(lower, lower_args.scenario);
  lower->add_option("--json", lower_args.json_path, "write the IR as JSON (shardscope.schedule/1)")
      ->type_name("FILE");
  lower->add_flag("--order", lower_args.order, "print the CPU issue order, one op per line");

  SimulateArgs sim_args;
  auto* simulate = app.add_subcommand("simulate",
                                      "simulate a scenario or a schedule IR (lower --json): step "
                                      "time, throughput, memory, overlap");
  add_scenario_args(simulate, sim_args.scenario);
  simulate->add_option("--model", sim_args.scenario.model_preset, "use this model preset")
      ->type_name("PRESET");
  simulate->add_option("--cluster", sim_args.scenario.cluster_preset, "use this cluster preset")
      ->type_name("PRESET");
  simulate->add_option("--nodes", sim_args.scenario.nodes, "number of nodes")
      ->check(CLI::Range(1, 100'000));
  simulate->add_option("--gpus-per-node", sim_args.scenario.gpus_per_node, "GPUs per node")
      ->check(CLI::Range(1, 256));
  simulate
      ->add_option("--json", sim_args.outputs.json_path, "write the summary (shardscope.summary/1)")
      ->type_name("FILE");
  simulate
      ->add_option("--timeline", sim_args.outputs.timeline_path,
                   "write the timeline (shardscope.timeline/2)")
      ->type_name("FILE");
  simulate->add_option("--trace", sim_args.outputs.trace_path, "write a Chrome/Perfetto trace")
      ->type_name("FILE");
  simulate->add_flag("--expandable-segments", sim_args.expandable_segments,
                     "model PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");

  SweepArgs sweep_args;
  auto* sweep = app.add_subcommand("sweep", "simulate every combination of settings on all cores");
  add_scenario_args(sweep, sweep_args.scenario);
  sweep->add_option("--grid", sweep_args.grid, "an axis: key=v1,v2,... (repeatable)")
      ->required()
      ->type_name("KEY=V1,V2");
  sweep
      ->add_option("--memory-budget", sweep_args.memory_budget,
                   "reserved memory a configuration may use")
      ->type_name("SIZE");
  sweep->add_option("--csv", sweep_args.csv_path, "write all results as CSV")->type_name("FILE");
  sweep
      ->add_option("--json", sweep_args.json_path, "write all results as JSON (shardscope.sweep/1)")
      ->type_name("FILE");
  sweep->add_option("--threads", sweep_args.threads, "worker threads (default: all cores)")
      ->check(CLI::Range(1, 1024));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }

  try {
    if (app.got_subcommand("presets")) return run_presets();
    if (app.got_subcommand("keys")) return run_keys(keys_args);
    if (app.got_subcommand("validate")) return run_validate(validate_args);
    if (app.got_subcommand("lower")) return run_lower(lower_args);
    if (app.got_subcommand("simulate")) return run_simulate(sim_args);
    if (app.got_subcommand("sweep")) return run_sweep(sweep_args);
  } catch (const shardscope::ValidationError& e) {
    print_problems(e);
    return kExitBadInput;
  } catch (const shardscope::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitFailure;
  }
  return kExitFailure;
}
