// shardscope: plan, simulate and run PyTorch FSDP training steps.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <exception>
#include <new>
#include <string_view>

#include "commands.hpp"
#include "shardscope/core/config_reader.hpp"
#include "shardscope/core/error.hpp"

namespace {

using namespace shardscope::cli;

// A number within [min, max]. CLI11's own Range says "Value 2 not in range 0.000000 to 1.000000";
// this says "2 is outside 0..1" (CLI11 puts the flag's name before it).
template <typename T>
CLI::Validator within(T min, T max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        double value = 0;  // as a real number first, so that 1e999 is out of range
        if (!CLI::detail::lexical_cast(text, value))
          return fmt::format("'{}' is not a number", text);
        if (!(value >= static_cast<double>(min) && value <= static_cast<double>(max)))
          return fmt::format("{} is outside the allowed {}..{}", text, min, max);
        if (T as_t{}; !CLI::detail::lexical_cast(text, as_t))
          return fmt::format("{} is not a whole number", text);
        return {};
      },
      fmt::format("{}..{}", min, max));
}

// The command as a shell would take it back: "shardscope" and each argument, quoted where it
// holds anything but letters, digits and -_./=,:+%@.
std::string command_line(int argc, char** argv) {
  std::string out = "shardscope";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_./=,:+%@") == std::string_view::npos;
    if (plain) {
      out += fmt::format(" {}", arg);
      continue;
    }
    std::string quoted = "'";
    for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += " " + quoted + "'";
  }
  return out;
}

// Help screens show an option's default where it is a value a user would type; a 0, empty or
// empty-list default means "the scenario's" or "none", which the option's text says instead.
void show_defaults(CLI::App& app) {
  for (CLI::App* command : app.get_subcommands({})) {
    for (CLI::Option* option : command->get_options()) {
      if (option->get_expected_min() == 0 || option->get_positional()) continue;  // flags
      option->capture_default_str();
      const std::string& value = option->get_default_str();
      if (value == "0" || value.empty() || value == "[]") option->default_str("");
    }
  }
}

constexpr std::array<std::string_view, 14> kCommands{
    "presets", "keys",      "validate",  "lower",   "simulate", "sweep",     "plan",
    "run",     "summarize", "breakdown", "compare", "import",   "calibrate", "profile-device"};

void add_scenario_args(CLI::App* cmd, ScenarioArgs& args) {
  cmd->add_option("scenario", args.path, "scenario file (.yaml, .yml or .json)")->required();
  cmd->add_option("--set", args.overrides,
                  "override a key: --set fsdp.reshard_after_forward=false (repeatable)")
      ->type_name("KEY=VALUE");
}

// The shortcuts that replace a scenario's model or cluster (simulate, run).
void add_shortcut_args(CLI::App* cmd, ScenarioArgs& args) {
  cmd->add_option("--model", args.model_preset, "use this model preset")->type_name("PRESET");
  cmd->add_option("--cluster", args.cluster_preset, "use this cluster preset")->type_name("PRESET");
  cmd->add_option("--nodes", args.nodes, "number of nodes")->check(within(1, 100'000));
  cmd->add_option("--gpus-per-node", args.gpus_per_node, "GPUs per node")->check(within(1, 256));
}

void add_calibration_arg(CLI::App* cmd, ScenarioArgs& args) {
  cmd->add_option("--calibration", args.calibration,
                  "cost-model parameters fitted to measured runs (shardscope calibrate); wins over "
                  "cluster.calibration")
      ->type_name("CALIBRATION.json");
}

void add_expandable_segments_arg(CLI::App* cmd, bool& flag) {
  cmd->add_flag("--expandable-segments", flag,
                "allocator.expandable_segments: true (PYTORCH_CUDA_ALLOC_CONF="
                "expandable_segments:True; run: the backend's allocator maps pages as the model "
                "does)");
}

// How ranks differ (simulate; run's host backend injects the same): each flag replaces or adds to
// the scenario's variation.* key of the same name.
void add_variation_args(CLI::App* cmd, VariationArgs& args) {
  cmd->add_option("--slow-rank", args.slow_ranks,
                  "RANK:FACTOR, that rank's GPU ops take FACTOR× as long; every rank is then "
                  "replayed and collectives wait for the last (repeatable; variation.slow_ranks)")
      ->type_name("R:F");
  cmd->add_option("--slow-node", args.slow_nodes,
                  "NODE:FACTOR, every GPU of that node (cluster.gpus_per_node ranks) slow so "
                  "(repeatable; variation.slow_nodes)")
      ->type_name("N:F");
  cmd->add_option("--jitter", args.jitter,
                  "each GPU op of each rank takes max(0, 1 + S·N(0,1))× its time (0.05 = 5 %); "
                  "every rank is then replayed on its own, and the step time is given as "
                  "percentiles over training.iterations (variation.jitter)")
      ->type_name("S")
      ->check(within(0.0, 1.0));
  cmd->add_option("--gpu-sigma", args.gpu_sigma,
                  "each rank's GPU time × max(0.1, 1 + SIGMA·N(0,1)), drawn once per rank "
                  "(GPUs of one SKU differ by a few %; variation.gpu_sigma)")
      ->type_name("SIGMA")
      ->check(within(0.0, 1.0));
  cmd->add_option("--slow-link", args.slow_links,
                  "NODE:FACTOR, that node's network links move bytes FACTOR× as long: "
                  "collectives across it run at that pace (repeatable; variation.slow_links)")
      ->type_name("N:F");
  cmd->add_option("--issue-delay", args.issue_delay,
                  "mean time the CPU thread is away after issuing each op, exponentially "
                  "distributed, e.g. 20us (variation.issue_delay)")
      ->type_name("DURATION");
  cmd->add_option("--seed", args.seed, "the random seed of every draw (variation.seed; 1)")
      ->check(within(std::uint64_t{0}, std::uint64_t{4'294'967'295}));
}

// The files a run writes (simulate, run).
void add_run_output_args(CLI::App* cmd, RunOutputs& outputs, std::string_view timeline_help) {
  cmd->add_option("--json", outputs.json_path, "write the summary (shardscope.summary/1)")
      ->type_name("FILE");
  cmd->add_option("--timeline", outputs.timeline_path, std::string(timeline_help))
      ->type_name("FILE");
  cmd->add_option("--trace", outputs.trace_path,
                  "write a Chrome/Perfetto trace (every rank of a threads job, one process each)")
      ->type_name("FILE");
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
      fmt::print(stderr, "commands: {}; see shardscope --help\n", fmt::join(kCommands, ", "));
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
  validate->footer(
      "example:\n  shardscope validate examples/llama3-8b-h100x8.yaml --set cluster.nodes=2");
  add_scenario_args(validate, validate_args);
  validate
      ->add_option("--device-profile", validate_args.device_profile,
                   "say how many compute ops this device profile (profile-device) measured")
      ->type_name("PROFILE.json");
  add_calibration_arg(validate, validate_args);

  LowerArgs lower_args;
  auto* lower = app.add_subcommand(
      "lower", "lower a scenario into the schedule IR PyTorch's FSDP would issue");
  add_scenario_args(lower, lower_args.scenario);
  lower->add_option("--json", lower_args.json_path, "write the IR as JSON (shardscope.schedule/3)")
      ->type_name("FILE");
  lower->add_flag("--order", lower_args.order, "print the CPU issue order, one op per line");

  SimulateArgs sim_args;
  auto* simulate = app.add_subcommand("simulate",
                                      "simulate a scenario or a schedule IR (lower --json): step "
                                      "time, throughput, memory, overlap");
  simulate->footer(
      "example:\n  shardscope simulate examples/llama3-8b-h100x8.yaml --set training.micro_batch=1 "
      "--timeline t.json --trace t.perfetto.json");
  add_scenario_args(simulate, sim_args.scenario);
  add_shortcut_args(simulate, sim_args.scenario);
  simulate
      ->add_option("--device-profile", sim_args.scenario.device_profile,
                   "price the kernels this profile measured (profile-device) at their measured "
                   "times, the rest on the roofline")
      ->type_name("PROFILE.json");
  add_calibration_arg(simulate, sim_args.scenario);
  add_run_output_args(simulate, sim_args.outputs, "write the timeline (shardscope.timeline/3)");
  simulate
      ->add_option("--rank-timelines", sim_args.rank_timelines,
                   "with every rank replayed: write each rank class's timeline as DIR/rank-R.json "
                   "(R its lowest rank; for calibrate --variation)")
      ->type_name("DIR");
  add_expandable_segments_arg(simulate, sim_args.scenario.expandable_segments);
  add_variation_args(simulate, sim_args.variation);

  SweepArgs sweep_args;
  auto* sweep = app.add_subcommand("sweep", "simulate every combination of settings on all cores");
  sweep->footer(
      "example:\n  shardscope sweep examples/llama3-8b-h100x8.yaml --grid training.micro_batch=1,2 "
      "--grid fsdp.reshard_after_forward=true,false --csv sweep.csv");
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
      ->check(within(1, 1024));

  PlanArgs plan_args;
  plan_args.command_line = command_line(argc, argv);
  auto* plan = app.add_subcommand("plan",
                                  "find the fastest FSDP configurations that fit, exactly, without "
                                  "simulating most of the space");
  plan->footer(
      "example:\n  shardscope plan examples/plan-llama3-8b-2-nodes.yaml --top 3 --fix "
      "training.loss=fused --emit fsdp2 plan.py");
  add_scenario_args(plan, plan_args.scenario);
  add_shortcut_args(plan, plan_args.scenario);
  plan->remove_option(plan->get_option("--nodes"));  // plan takes a list of sizes
  plan->add_option("--nodes", plan_args.nodes,
                   "cluster sizes to plan and compare, in nodes: --nodes 2,4,8 (default: the "
                   "scenario's)")
      ->delimiter(',')
      ->check(within(1, 100'000))
      ->type_name("N[,N...]");
  auto* tokens = plan->add_option("--global-batch-tokens", plan_args.global_batch_tokens,
                                  "tokens per optimizer step, fixed (default: the scenario's)")
                     ->check(CLI::PositiveNumber)
                     ->type_name("TOKENS");
  plan->add_option("--global-batch-seqs", plan_args.global_batch_sequences,
                   "sequences per optimizer step, fixed")
      ->check(CLI::PositiveNumber)
      ->type_name("SEQUENCES")
      ->excludes(tokens);
  plan->add_option("--api", plan_args.api,
                   "fsdp2, fsdp1 or either (default: the scenario's fsdp.api; with --emit, the "
                   "target's)")
      ->check(CLI::IsMember({"fsdp2", "fsdp1", "either"}));
  plan->add_option("--fix", plan_args.fix, "pin a knob: --fix training.loss=fused (repeatable)")
      ->type_name("KEY=VALUE");
  plan->add_option("--allow", plan_args.allow,
                   "search only these values of a knob: --allow "
                   "fsdp.mixed_precision.param_dtype=bf16 (repeatable)")
      ->type_name("KEY=V1,V2");
  plan->add_option("--emit", plan_args.emit,
                   "write the chosen plan as code: fsdp2 or fsdp1 (Python), torchtitan (TOML), "
                   "with the search kept to what the target can express; or as a scenario (YAML)")
      ->expected(2)
      ->type_name("TARGET FILE");
  plan->add_option("--emit-rank", plan_args.emit_rank, "which ranked configuration --emit writes")
      ->check(within(1, 100));
  auto* budget = plan->add_option("--memory-budget", plan_args.memory_budget,
                                  "peak reserved memory a configuration may use")
                     ->type_name("SIZE");
  plan->add_option("--margin", plan_args.margin,
                   "default budget: GPU capacity less this (a size or a percentage)")
      ->type_name("SIZE|PCT")
      ->excludes(budget);
  plan->add_option("--top", plan_args.top, "configurations to rank")->check(within(1, 100));
  plan->add_option("--objective", plan_args.objective,
                   "what to rank by: step (the step time) or p99 (the p99 step time with every "
                   "rank replayed with the scenario's variation.* keys, over training.iterations)")
      ->check(CLI::IsMember({"step", "p99"}))
      ->capture_default_str();
  plan->add_option("--p99-candidates", plan_args.p99_candidates,
                   "with --objective p99: how many of the fastest by step time to rank by p99 "
                   "(default 4 × --top)")
      ->check(within(1, 1000));
  plan->add_option("--group-within", plan_args.group_within,
                   "one ranked entry holds the configurations at most this much slower than its "
                   "fastest and not this much leaner (default 0.5%,1GiB; 0,0: identical "
                   "predictions only)");
  plan->add_option("--work-limit", plan_args.work_limit,
                   "refuse, before searching, a space whose worst case (every configuration "
                   "lowered and simulated) is above this many schedule ops (default 1e11: about "
                   "2.3 h on 2 cores)")
      ->type_name("OPS")
      ->check(CLI::Range(1.0, 1e18));
  plan->add_option("--json", plan_args.json_path, "write the ranking as JSON (shardscope.plan/1)")
      ->type_name("FILE");
  plan->add_option("--threads", plan_args.threads, "worker threads (default: all cores)")
      ->check(within(1, 1024));

  RunArgs run_args;
  run_args.argv.assign(argv, argv + argc);
  auto* run = app.add_subcommand(
      "run",
      "run a scenario's schedule on a backend and measure it (the host backend: CPU "
      "threads or processes, collectives moving real data)");
  run->footer(
      "example:\n  shardscope run examples/fsdp2-overlap-oracle.yaml --nproc-per-node 2 --timeline "
      "measured.json");
  add_scenario_args(run, run_args.scenario);
  add_shortcut_args(run, run_args.scenario);
  run->add_option("--backend", run_args.backend, "host (CPU threads or processes) or cuda")
      ->type_name("NAME");
  run->add_option("--comm", run_args.comm,
                  "cuda backend: nccl (one GPU per rank) or emulate (one GPU plays rank 0; "
                  "collectives are kernels lasting the modelled time); default nccl with several "
                  "processes, else emulate")
      ->check(CLI::IsMember({"nccl", "emulate"}));
  run->add_option("--nproc-per-node", run_args.nproc_per_node,
                  "start this many local processes, one rank each (default: ranks as threads)")
      ->check(within(1, 64));
  run->add_option("--iterations", run_args.iterations,
                  "measured iterations (default: the scenario's)")
      ->check(within(1, 1000));
  run->add_option("--warmup", run_args.warmup, "iterations run before the measured ones")
      ->check(within(0, 1000));
  run->add_option("--time-scale", run_args.time_scale,
                  "host backend: stretch every duration by this (recorded times are divided back)")
      ->check(within(0.01, 1000.0));
  run->add_option("--timeout", run_args.timeout_s,
                  "seconds any wait or collective may take before the run fails naming the op")
      ->check(within(0.1, 3600.0));
  add_variation_args(run, run_args.variation);
  add_expandable_segments_arg(run, run_args.scenario.expandable_segments);
  add_run_output_args(run, run_args.outputs,
                      "write rank 0's measured timeline (shardscope.timeline/3)");

  SummarizeArgs summarize_args;
  auto* summarize = app.add_subcommand("summarize", "print the summary of any timeline");
  summarize->footer(
      "example:\n  shardscope summarize traces/samples/fsdp2_rank0.json.gz --json summary.json");
  summarize->add_option("timeline", summarize_args.timeline, "a timeline (.json)")->required();
  summarize->add_option("--json", summarize_args.json_path, "write the summary")->type_name("FILE");

  BreakdownArgs breakdown_args;
  auto* breakdown = app.add_subcommand(
      "breakdown",
      "device time as HolisticTraceAnalysis breaks it down: idle, compute and non-compute time, "
      "communication/computation overlap, time by kernel type");
  breakdown->add_option("runs", breakdown_args.runs, "timelines or Kineto traces (one per rank)")
      ->required();
  breakdown->add_option("--json", breakdown_args.json_path, "write it (shardscope.breakdown/1)")
      ->type_name("FILE");

  CompareArgs compare_args;
  auto* compare = app.add_subcommand(
      "compare", "two timelines side by side (e.g. simulated and measured), op by op");
  compare->footer("example:\n  shardscope compare simulated.json measured.json --per-op --top 10");
  compare->add_option("a", compare_args.a, "the first timeline (A)")->required();
  compare->add_option("b", compare_args.b, "the second timeline (B)")->required();
  compare->add_flag("--per-op", compare_args.per_op, "each matched op's delta, largest first");
  compare->add_flag("--allow-mismatch", compare_args.allow_mismatch,
                    "compare runs that are not of one job (world, model, GPU, batch or FSDP "
                    "settings differ), with a warning; refused otherwise");
  compare->add_option("--top", compare_args.top, "with --per-op: how many ops (0: all)");
  compare
      ->add_option("--json", compare_args.json_path, "write the comparison (shardscope.compare/1)")
      ->type_name("FILE");

  ImportArgs import_args;
  auto* import = app.add_subcommand(
      "import",
      "a PyTorch profiler (Kineto) trace, plain or gzip, as a timeline (source imported)");
  import
      ->add_option("traces", import_args.traces,
                   "the trace (.json or .json.gz); several ranks' traces of one run are aligned "
                   "by their collectives")
      ->required();
  import
      ->add_option("--rank", import_args.rank,
                   "with several traces: the rank whose aligned timeline --timeline writes "
                   "(default: the lowest)")
      ->check(within(0, 1 << 24));
  import
      ->add_option("--timeline", import_args.timeline_path,
                   "write the imported timeline (shardscope.timeline/3)")
      ->type_name("FILE");
  import
      ->add_option("--trace", import_args.trace_path,
                   "write a Chrome/Perfetto trace of every rank (one process each, aligned)")
      ->type_name("FILE");
  import->add_flag("--report", import_args.report,
                   "say what was recognised and what was imported as other (the default without "
                   "--timeline or --trace)");

  CalibrateArgs calibrate_args;
  auto* calibrate = app.add_subcommand(
      "calibrate",
      "fit the cost model's parameters to measured runs of a scenario (timelines or Kineto "
      "traces) and write them for simulate --calibration");
  calibrate->footer(
      "example:\n  shardscope calibrate --scenario examples/llama3-8b-h100x8.yaml measured.json "
      "--out cal.json");
  calibrate->add_option("--scenario", calibrate_args.scenario.path, "the scenario that ran")
      ->required()
      ->type_name("FILE");
  calibrate
      ->add_option("--set", calibrate_args.scenario.overrides,
                   "override a scenario key (repeatable)")
      ->type_name("KEY=VALUE");
  calibrate->add_option("measured", calibrate_args.measured, "measured timelines or traces")
      ->required();
  calibrate
      ->add_option("--out", calibrate_args.out,
                   "write the fitted parameters (shardscope.calibration/2)")
      ->type_name("FILE");
  calibrate
      ->add_option("--holdout", calibrate_args.holdout,
                   "share of measured iterations (the last ones) kept out of the fit to measure "
                   "the error on")
      ->check(within(0.0, 0.9));
  calibrate
      ->add_option("--bootstrap", calibrate_args.bootstrap,
                   "bootstrap resamples for the 95 % confidence intervals (0: none)")
      ->check(within(0, 10'000));
  calibrate->add_flag("--variation", calibrate_args.variation,
                      "the measured timelines are the ranks of one run (one each): fit the "
                      "scenario's variation.* keys (each rank's GPU speed, slow ranks, jitter, "
                      "issue delays) instead; --out writes them as a YAML variation section");
  calibrate->add_flag("--allow-mismatch", calibrate_args.allow_mismatch,
                      "fit runs that are not of the scenario's job, with a warning; refused "
                      "otherwise");

  ProfileDeviceArgs profile_args;
  auto* profile = app.add_subcommand(
      "profile-device",
      "measure the local GPU on a scenario's kernels (each GEMM and attention shape, bandwidths, "
      "overheads) and write a device profile for simulate --device-profile");
  add_scenario_args(profile, profile_args.scenario);
  profile
      ->add_option("--out", profile_args.out, "the profile to write (shardscope.device_profile/2)")
      ->required()
      ->type_name("FILE");
  profile
      ->add_option("--repetitions", profile_args.repetitions,
                   "timed runs per kernel after a warm-up; the median is kept")
      ->check(within(1, 1000));
  profile
      ->add_option("--contended-sms", profile_args.contended_sms,
                   "SMs to hold (one thread block each, as NCCL's channels hold them) while each "
                   "GEMM and attention is timed again; default: the scenario's "
                   "cluster.nccl.channels; 0: not timed beside held SMs")
      ->check(within(0, 4096))
      ->type_name("N");

  show_defaults(app);
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
    if (app.got_subcommand("plan")) return run_plan(plan_args);
    if (app.got_subcommand("run")) return run_run(run_args);
    if (app.got_subcommand("summarize")) return run_summarize(summarize_args);
    if (app.got_subcommand("breakdown")) return run_breakdown(breakdown_args);
    if (app.got_subcommand("compare")) return run_compare(compare_args);
    if (app.got_subcommand("import")) return run_import(import_args);
    if (app.got_subcommand("calibrate")) return run_calibrate(calibrate_args);
    if (app.got_subcommand("profile-device")) return run_profile_device(profile_args);
  } catch (const shardscope::ValidationError& e) {
    print_problems(e);
    return kExitBadInput;
  } catch (const shardscope::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    // Inputs are bounded where they are read; what is left is a job too large for this machine.
    fmt::print(stderr,
               "error: out of host memory in {}: the input describes more than this machine can "
               "hold (fewer iterations, micro-batches or ranks; a smaller trace)\n",
               app.get_subcommands().empty() ? std::string("shardscope")
                                             : app.get_subcommands().front()->get_name());
    return kExitDoesNotFit;
  } catch (const std::exception& e) {
    // A bug, not bad input: say so rather than abort.
    fmt::print(stderr, "error: internal error (please report it with the command line): {}\n",
               e.what());
    return kExitFailure;
  }
  return kExitFailure;
}
