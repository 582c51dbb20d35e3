#pragma once
// The `shardscope` subcommands. Each returns the process exit code:
// 0 success, 1 unexpected failure or interrupted, 2 bad input (problems printed to stderr),
// 3 the simulated step does not fit in GPU memory (simulate; the report says where it ran out).

#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"
#include "shardscope/exec/executor.hpp"
#include "shardscope/exec/launcher.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitDoesNotFit = 3;

struct ScenarioArgs {
  std::string path;
  std::vector<std::string> overrides;  // --set key=value
  std::string model_preset;            // --model
  std::string cluster_preset;          // --cluster
  int nodes = 0;                       // --nodes
  int gpus_per_node = 0;               // --gpus-per-node
  std::string device_profile;        // --device-profile: measured kernel times (simulate, validate)
  std::string calibration;           // --calibration: fitted cost-model parameters (calibrate)
  bool expandable_segments = false;  // --expandable-segments: allocator.expandable_segments
};

/// The scenario file's tree with the shortcuts and overrides applied (not yet validated).
ConfigTree load_scenario_tree(const ScenarioArgs& args);
/// The shortcuts (--cluster, --nodes, --gpus-per-node, --expandable-segments) and --set overrides
/// as key=value, in the order they apply: what a timeline records to name its job exactly.
/// --model replaces the whole model section, which no key=value says: it is recorded as
/// model.preset=NAME.
std::vector<std::string> override_list(const ScenarioArgs& args);
/// Loads the scenario file with the shortcuts and overrides applied, validated, and
/// --device-profile and --calibration (which win over the scenario's cluster.gpu.device_profile
/// and cluster.calibration).
Scenario load_scenario_args(const ScenarioArgs& args);
/// Sets the scenario's device profile and calibration from --device-profile and --calibration,
/// when given.
void apply_measured_file_args(Scenario& scenario, const ScenarioArgs& args);

/// The files a run (simulated or measured) may write.
struct RunOutputs {
  std::string json_path;      // --json: the summary
  std::string timeline_path;  // --timeline
  std::string trace_path;     // --trace: Chrome trace-event JSON
};

/// How ranks differ, on top of the scenario's variation.* keys (a flag given wins).
struct VariationArgs {
  std::vector<std::string> slow_ranks;  // --slow-rank RANK:FACTOR
  std::vector<std::string> slow_nodes;  // --slow-node NODE:FACTOR
  std::vector<std::string> slow_links;  // --slow-link NODE:FACTOR
  std::optional<double> jitter;         // --jitter: every GPU op's relative σ, per rank
  std::optional<double> gpu_sigma;      // --gpu-sigma: each rank's GPU speed, drawn
  std::string issue_delay;              // --issue-delay: mean CPU thread away per op
  std::optional<std::uint64_t> seed;    // --seed: every draw
};

/// The flags' syntax (exit 2 naming every malformed item), before anything runs.
void check_variation_args(const VariationArgs& args);
/// The scenario's variation with the flags on top: named ranks, nodes and links added (a flag
/// winning over the file for the same index); jitter, sigma, issue delay and seed replaced where
/// given. A rank or node outside the scenario's cluster: exit 2 naming the flag.
VariationSpec variation_of(const Scenario& scenario, const VariationArgs& args);

struct SimulateArgs {
  ScenarioArgs scenario;
  RunOutputs outputs;
  VariationArgs variation;     // any: every rank replayed
  std::string rank_timelines;  // --rank-timelines DIR: each class's timeline, DIR/rank-R.json
};

struct LowerArgs {
  ScenarioArgs scenario;
  std::string json_path;  // --json: write the IR
  bool order = false;     // --order: print the CPU issue order
};

struct PlanArgs {
  ScenarioArgs scenario;
  std::int64_t global_batch_tokens = 0;  // --global-batch-tokens (0: the scenario's)
  std::int64_t global_batch_sequences = 0;
  std::string api;  // fsdp2, fsdp1 or either; empty: the scenario's fsdp.api (--emit: its API)
  std::string command_line;        // the whole command, for the emitted file's header
  std::vector<std::string> fix;    // --fix key=value
  std::vector<std::string> allow;  // --allow key=v1,v2
  std::vector<int> nodes;         // --nodes 2,4,8: plan each cluster size (default: the scenario's)
  std::vector<std::string> emit;  // --emit TARGET FILE
  std::size_t emit_rank = 1;      // --emit-rank: which ranked configuration --emit writes
  std::string memory_budget;      // --memory-budget (default: capacity less --margin)
  std::string margin = "5%";      // --margin: a size or a percentage of the capacity
  std::size_t top = 5;
  std::string objective = "step";  // --objective step or p99
  std::size_t p99_candidates = 0;  // --p99-candidates (0: 4 × top)
  std::string json_path;
  unsigned threads = 0;
  std::string group_within = "0.5%,1GiB";  // --group-within: one entry's step time, reserved
  double work_limit = 1e11;  // --work-limit: the most worst-case ops a space may take (cmd_plan)
};

struct SweepArgs {
  ScenarioArgs scenario;
  std::vector<std::string> grid;  // --grid key=v1,v2
  std::string memory_budget;      // --memory-budget 80GiB
  std::string csv_path;
  std::string json_path;
  unsigned threads = 0;
};

struct RunArgs {
  ScenarioArgs scenario;
  RunOutputs outputs;
  std::string backend = "host";
  std::string comm;        // cuda backend: "nccl" or "emulate" ("": nccl with several processes)
  int nproc_per_node = 0;  // spawn this many local processes (0: ranks as threads)
  int iterations = 0;      // measured iterations (0: the scenario's)
  int warmup = 0;          // iterations before them
  double time_scale = 1.0;
  VariationArgs variation;  // host backend: slow ranks and nodes, GPU sigma, jitter
  double timeout_s = 30;
  std::vector<std::string> argv;  // this process's command line (to spawn ranks)
};

/// The argv a spawned rank runs: this one without --nproc-per-node.
std::vector<std::string> child_argv(const std::vector<std::string>& argv);
/// The scenario with --iterations and --warmup applied.
ScenarioArgs with_iterations(ScenarioArgs input, const RunArgs& args);

/// The simulation a run is planned and compared with: the scenario with --iterations and
/// --warmup. The backend's allocator follows the plan's scenario's allocator settings.
sim::PipelineResult plan_run(const RunArgs& args);

/// The simulated duration of op `id` of `planned`: what the host backend takes for it and what
/// the CUDA backend emulates (collectives under --comm emulate, compute without shapes).
TimeNs simulated_duration(const sim::PipelineResult& planned, OpId id);
/// exec::run's options for a run of `planned`: its facts and capacity, the scenario, the Ctrl-C
/// flag run_interruptible sets, and progress on the reporting rank.
exec::RunOptions run_options(const sim::PipelineResult& planned, const RunArgs& args, bool reports);
/// Runs `body` with Ctrl-C stopping it; false (after saying nothing was written) when it did.
bool run_interruptible(const std::function<void()>& body);
/// The multi-process job this process is a rank of (the launcher's environment), or nullopt.
/// Its identity adds this command line's hash: ranks of one job run one command, so a rank of
/// another job or command on the same MASTER_PORT is refused at the rendezvous.
std::optional<exec::JobEnv> job_of_this_process(const RunArgs& args);
/// "against the simulation   X measured, Y simulated (+Z %)".
void print_against_simulation(const analysis::Summary& measured,
                              const analysis::Summary& simulated);

/// `run --backend cuda` (cmd_run_cuda.cpp; an error in a build without CUDA).
int run_cuda(const RunArgs& args);

struct ProfileDeviceArgs {
  ScenarioArgs scenario;
  std::string out;
  int repetitions = 5;
  // SMs held while each shape is timed again; nullopt: the scenario's collectives' (its
  // cluster.nccl.channels, fewer than the GPU's SMs); 0: not timed beside held SMs.
  std::optional<int> contended_sms;
};
/// `profile-device` (cmd_profile_device.cpp; an error in a build without CUDA).
int run_profile_device(const ProfileDeviceArgs& args);

struct BreakdownArgs {
  std::vector<std::string> runs;
  std::string json_path;
};

struct SummarizeArgs {
  std::string timeline;
  std::string json_path;
};

struct CompareArgs {
  std::string a;
  std::string b;
  bool allow_mismatch = false;  // compare runs of different jobs, with a warning
  bool per_op = false;
  std::size_t top = 20;
  std::string json_path;
};

struct KeysArgs {
  std::string prefix;
  bool markdown = false;
};

/// Whether `path` is a schedule IR file (`lower --json`), told by its schema.
bool is_schedule_file(const std::string& path);
/// Reads a schedule IR and checks it (check_schedule): every problem at once, as ValidationError.
Schedule load_schedule_file(const std::string& path);
/// A scenario to cost and summarize a schedule IR with: the --cluster preset (default
/// h100-sxm-80gb) laid out as the IR's communicators say; FLOPs as the ops carry them.
Scenario scenario_for_schedule(const Schedule& schedule, const ScenarioArgs& args);

/// Simulates a scenario (with the shortcuts and overrides) or a schedule IR file.
sim::PipelineResult simulate_input(const ScenarioArgs& input);
/// Checks a run's output paths before any work (check_outputs).
/// "device profile: N of M compute ops fully measured ...".
void print_profile_coverage(const Schedule& schedule, const DeviceProfile& profile);
void check_run_outputs(const ScenarioArgs& input, const RunOutputs& outputs);
/// Writes the summary JSON, timeline and trace a run was asked for; the trace has every rank
/// given (one process each).
void write_run_outputs(const RunOutputs& outputs, const analysis::Summary& summary,
                       const Timeline& timeline, std::span<const Timeline> other_ranks = {});

/// Every file a command reads for a scenario: the scenario, --device-profile, --calibration, and
/// the files the scenario names (ScenarioKey::names_a_file, after --set). A scenario that does
/// not load gives what it can; the load itself reports the problem later.
std::vector<std::filesystem::path> scenario_inputs(const ScenarioArgs& input);

/// Checks every output path before any work (ValidationError listing each problem): none may be
/// an input (scenario_inputs), another output, a directory, or in a missing or unwritable
/// directory.
void check_outputs(const ScenarioArgs& input,
                   std::initializer_list<std::pair<std::string, std::string>> outputs);

/// Writes an output file the user asked for, atomically, and says so: "wrote PATH<note>".
void write_output(const std::string& path, std::string_view text, std::string_view note = {});

/// A memory size given on the command line ("80GiB", "96GB"): a unit is required, since a bare
/// "80" would be 80 bytes. A problem naming `flag` otherwise.
std::optional<Bytes> size_flag(std::string_view flag, const std::string& text,
                               std::vector<Problem>& problems);
/// Warns on stderr when a memory budget exceeds what the allocator can reserve on the GPU.
void warn_budget_above_capacity(std::string_view flag, Bytes budget, Bytes capacity);

/// Refuses (ValidationError naming both files, exit 2) two runs that are not of one job
/// (analysis::job_differences), or with `allow` prints the differences as a warning.
void check_same_job(const Timeline& a, const std::string& a_file, const Timeline& b,
                    const std::string& b_file, bool allow);

int run_presets();
int run_keys(const KeysArgs& args);
int run_sweep(const SweepArgs& args);
/// Finds the fastest configurations that fit (sim::plan).
int run_plan(const PlanArgs& args);
int run_simulate(const SimulateArgs& args);
int run_lower(const LowerArgs& args);
int run_validate(const ScenarioArgs& args);
int run_run(const RunArgs& args);
int run_summarize(const SummarizeArgs& args);
/// HTA's temporal breakdown, overlap and time by type of timelines or traces.
int run_breakdown(const BreakdownArgs& args);
int run_compare(const CompareArgs& args);

struct ImportArgs {
  std::vector<std::string> traces;  // one per rank of a run
  std::string timeline_path;        // --timeline
  std::string trace_path;           // --trace: every rank
  int rank = -1;                    // --rank: the rank whose timeline to write (-1: the lowest)
  bool report = false;
};
/// A PyTorch profiler (Kineto) trace → a timeline (source "imported"), with what was recognised.
int run_import(const ImportArgs& args);

struct CalibrateArgs {
  ScenarioArgs scenario;              // --scenario, --set
  std::vector<std::string> measured;  // timelines or Kineto traces of runs of it
  std::string out;                    // --out: the calibration to write
  double holdout = 0.25;
  int bootstrap = 200;
  bool allow_mismatch = false;  // fit runs that are not of the scenario's job, with a warning
  bool variation = false;       // --variation: the runs are the ranks of one run; fit variation.*
};
/// Fits the cost model to measured runs of a scenario (sim::calibrate).
int run_calibrate(const CalibrateArgs& args);

}  // namespace shardscope::cli
