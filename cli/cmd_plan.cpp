#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.hpp"
#include "interrupt.hpp"
#include "progress.hpp"
#include "shardscope/sim/plan_emit.hpp"
#include "shardscope/sim/plan_entries.hpp"
#include "shardscope/sim/planner.hpp"
#include "shardscope/sim/sweep.hpp"

namespace shardscope::cli {
namespace {

// --memory-budget, or the capacity less --margin ("5%" or a size).
Bytes memory_budget(const PlanArgs& args, Bytes capacity, std::vector<Problem>& problems) {
  if (!args.memory_budget.empty()) {
    const auto budget = size_flag("--memory-budget", args.memory_budget, problems);
    if (budget) warn_budget_above_capacity("--memory-budget", *budget, capacity);
    return budget.value_or(0);
  }
  return sim::budget_with_margin(capacity, args.margin, "--margin", problems);
}

// --group-within "P%,SIZE": the step-time fraction and the reserved bytes within which
// configurations are one ranked entry ("0,0": identical predictions only).
sim::EntryTolerance group_within(const std::string& text, std::vector<Problem>& problems) {
  const auto comma = text.find(',');
  const std::string time = text.substr(0, comma);
  const std::string memory = comma == std::string::npos ? "" : text.substr(comma + 1);
  const auto refuse = [&](std::string why) {
    problems.push_back({"--group-within", text, std::move(why),
                        "a step-time percentage and a size: 0.5%,1GiB (0,0: identical "
                        "predictions only)"});
  };
  double percent = 0;
  bool time_ok = time == "0";
  if (!time_ok && time.size() > 1 && time.back() == '%') {
    const char* end = time.data() + time.size() - 1;
    const auto [stop, ec] = std::from_chars(time.data(), end, percent);
    time_ok = ec == std::errc() && stop == end && percent >= 0 && percent < 100;
  }
  if (!time_ok) {
    refuse(fmt::format("'{}' is not a percentage from 0 to below 100", time));
    return {};
  }
  std::optional<Bytes> bytes = memory == "0" ? std::optional<Bytes>(0) : parse_bytes(memory);
  if (memory.empty() || !bytes || *bytes < 0) {
    refuse(fmt::format("'{}' is not a size", memory));
    return {};
  }
  return {percent / 100, *bytes};
}

// The emit target and its constraints, checked against --api and --fix.
std::optional<sim::EmitTarget> emit_target(const PlanArgs& args, sim::PlanInputs& inputs,
                                           std::vector<Problem>& problems) {
  if (args.emit.empty()) return std::nullopt;
  const auto target = sim::parse_emit_target(args.emit[0]);
  if (!target) {
    problems.push_back(
        {"--emit", args.emit[0], "not an emit target", std::string(sim::kEmitTargetNames)});
    return std::nullopt;
  }
  const std::string api(sim::emit_api(*target));
  if (!args.api.empty() && args.api != "either" && api != "either" && args.api != api)
    problems.push_back(
        {"--api", args.api, fmt::format("--emit {} writes {} code", args.emit[0], api), api});
  if (args.nodes.size() > 1)
    problems.push_back(
        {"--emit", args.emit[0], "writes one plan, not one per cluster size", "one --nodes value"});
  if (args.emit_rank > args.top)
    problems.push_back({"--emit-rank", std::to_string(args.emit_rank),
                        fmt::format("only the top {} are ranked", args.top), "a rank up to --top"});
  for (auto& [key, values] : sim::emit_constraints(*target)) {
    for (const auto& [fixed_key, value] : inputs.fixed) {
      if (fixed_key == key && std::find(values.begin(), values.end(), value) == values.end())
        problems.push_back({"--fix", fmt::format("{}={}", key, value),
                            fmt::format("--emit {} cannot express it", args.emit[0]),
                            fmt::format("{}", fmt::join(values, ", "))});
    }
    inputs.allowed.emplace_back(key, values);
  }
  return target;
}

// A pinned or allowed value outside its key's type, range or choices would make every
// configuration invalid after a whole search: refused first, as a scenario key would be.
void value_problems(std::string_view flag, const std::string& key,
                    const std::vector<std::string>& values, std::vector<Problem>& problems) {
  for (const auto& value : values) {
    const std::string given = fmt::format("{}={}", key, value);
    for (auto& p : key_value_problems(given))
      problems.push_back({std::string(flag), given, std::move(p.message), std::move(p.allowed)});
  }
}

// Estimated schedule ops lowered and simulated per second of wall time on the 2-core reference
// machine: bench/simulate_bench's BM_LowerAndSimulate lowers and simulates a 5,086-op schedule in
// 0.81 ms on one core (6.3 M ops/s, 2026-11-28), on both cores: what turns a space's worst case
// (every configuration lowered and simulated) into hours a user can weigh.
constexpr double kReferenceOpsPerSecond = 12e6;

// A space whose worst case (every configuration lowered and simulated) is above --work-limit,
// refused before its search: the bound usually skips most of it, but cannot promise to before
// the search has found anything, and a user should narrow an hours-long space rather than find
// out an hour in. Names the widest dimensions, the ones to narrow.
Problem too_much_work(const PlanArgs& args, const sim::PlanSpace& space,
                      const sim::PlanWork& work) {
  std::map<std::string, std::size_t> widths;  // a dimension's most choices over the parts
  for (const auto& part : space.parts)
    for (const auto& d : part.dimensions)
      widths[d.name] = std::max(widths[d.name], d.choices.size());
  std::vector<std::pair<std::size_t, std::string>> widest;
  for (const auto& [name, n] : widths)
    if (n > 1) widest.emplace_back(n, name);
  std::stable_sort(widest.begin(), widest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> named;
  for (std::size_t i = 0; i < widest.size() && i < 4; ++i)
    named.push_back(fmt::format("{} ({} choices)", widest[i].second, widest[i].first));
  return {args.scenario.path, "plan space",
          fmt::format("{} configurations in {} compute classes with schedules of up to {} ops are "
                      "at most {} ops to lower and simulate, above --work-limit {}: about {} at "
                      "the {:g} M ops/s bench/plan_bench measures on 2 cores",
                      format_count(static_cast<std::int64_t>(work.configurations)), work.classes,
                      format_count(work.largest_schedule), format_count(work.ops),
                      format_count(static_cast<std::int64_t>(args.work_limit)),
                      coarse_duration(static_cast<double>(work.ops) / kReferenceOpsPerSecond),
                      kReferenceOpsPerSecond / 1e6),
          fmt::format("narrow its widest dimensions with --fix or --allow: {}; or plan fewer "
                      "GPUs, or raise --work-limit",
                      fmt::join(named, ", "))};
}

struct SizedPlan {
  int nodes = 0;
  int world = 0;
  ConfigTree tree;  // the scenario at this size
  sim::PlanSpace space;
  Bytes budget = 0;
  sim::PlanResult result;
};

// Each cluster size's scenario tree, space and budget (`--nodes`, or the scenario's own size),
// every size checked before any search: a global batch one size cannot split exits 2 first.
std::vector<SizedPlan> prepare_sizes(const PlanArgs& args, const ConfigTree& tree,
                                     const sim::PlanInputs& inputs) {
  std::vector<int> sizes = args.nodes;
  if (sizes.empty()) sizes.push_back(0);  // the scenario's own
  std::vector<SizedPlan> out;
  out.reserve(sizes.size());
  for (int nodes : sizes) {
    ConfigTree sized = tree;
    if (nodes > 0) sized["cluster"]["nodes"] = nodes;
    sim::PlanBase base = sim::plan_base(std::move(sized), args.scenario.path, inputs);
    SizedPlan p;
    p.tree = std::move(base.tree);
    p.nodes = base.scenario.cluster.nodes;
    p.world = base.scenario.cluster.world_size();
    p.space = std::move(base.space);
    std::vector<Problem> problems;
    p.budget = memory_budget(args, sim::plan_capacity(base.scenario), problems);
    const sim::PlanWork work = sim::plan_work(p.tree, args.scenario.path, p.space);
    if (static_cast<double>(work.ops) > args.work_limit)
      problems.push_back(too_much_work(args, p.space, work));
    throw_if_any(std::move(problems));
    out.push_back(std::move(p));
  }
  return out;
}

// Plans one prepared cluster size, with progress and Ctrl-C.
void plan_size(const PlanArgs& args, const sim::EntryTolerance& entries, SizedPlan& p) {
  sim::PlanOptions options;
  options.memory_budget = p.budget;
  options.top = args.top;
  options.objective =
      args.objective == "p99" ? sim::PlanObjective::p99 : sim::PlanObjective::step_time;
  options.p99_candidates = args.p99_candidates;
  options.entries = entries;
  options.threads = args.threads;
  Progress progress(args.nodes.size() > 1 ? fmt::format("plan ({} GPUs)", p.world) : "plan",
                    p.space.size());
  options.on_work = [&](const sim::PlanWork& work) {
    fmt::print(stderr,
               "{}: {} configurations in {} compute classes, schedules of up to {} ops: at most "
               "{} ops to lower and simulate (the step-time bound and the memory rules skip "
               "most)\n",
               p.world > 0 && args.nodes.size() > 1 ? fmt::format("plan ({} GPUs)", p.world)
                                                    : std::string("plan"),
               format_count(static_cast<std::int64_t>(work.configurations)), work.classes,
               format_count(work.largest_schedule), format_count(work.ops));
  };
  options.progress = [&](const sim::PlanProgress& at) {
    progress.update(at.settled, at.seconds_done, at.seconds_total, at.estimated);
  };
  const InterruptFlag ctrl_c;
  options.cancel = ctrl_c.flag();
  p.result = sim::plan(p.tree, args.scenario.path, p.space, options);
  sim::throw_if_none_valid(p.space, p.result);
}

// One row per cluster size: the best plan of each, and what the cluster does with it.
std::string sizes_table(const std::vector<SizedPlan>& plans, std::int64_t tokens_per_step) {
  std::string out = fmt::format(
      "\ncluster sizes at {} tokens per step (the best plan of each):\n"
      "{:>5}  {:>5}  {:>11}  {:>14}  {:>12}  {:>6}  {:>12}  {:>15}\n",
      tokens_per_step, "nodes", "GPUs", "step", "tokens/s", "tokens/s/GPU", "MFU", "reserved",
      "GPU·h/B tokens");
  for (const auto& p : plans) {
    if (p.result.ranked.empty()) {
      out +=
          fmt::format("{:>5}  {:>5}  no configuration fits the memory budget\n", p.nodes, p.world);
      continue;
    }
    const auto& s = p.result.ranked.front().summary;
    const double step_s = ns_to_s(s.step_time);
    const double gpu_hours_per_billion =
        static_cast<double>(p.world) * step_s / 3600.0 * 1e9 / static_cast<double>(tokens_per_step);
    out += fmt::format("{:>5}  {:>5}  {:>11}  {:>14.0f}  {:>12.0f}  {:>6}  {:>12}  {:>15.1f}\n",
                       p.nodes, p.world, format_duration(s.step_time),
                       static_cast<double>(tokens_per_step) / step_s,
                       s.tokens_per_s_per_gpu.value(), analysis::percent_text(s.mfu),
                       format_bytes(s.peak_reserved.value()), gpu_hours_per_billion);
  }
  return out;
}

std::string sizes_json(const std::vector<SizedPlan>& plans, std::int64_t tokens_per_step) {
  nlohmann::ordered_json j;
  j["schema"] = "shardscope.plan_sizes/1";
  j["global_batch_tokens"] = tokens_per_step;
  auto& sizes = j["sizes"] = nlohmann::ordered_json::array();
  for (const auto& p : plans) {
    nlohmann::ordered_json e;
    e["nodes"] = p.nodes;
    e["gpus"] = p.world;
    e["plan"] = nlohmann::ordered_json::parse(sim::plan_json(p.space, p.result));
    sizes.push_back(std::move(e));
  }
  return j.dump(2) + "\n";
}

int emit(const PlanArgs& args, sim::EmitTarget target, const SizedPlan& p) {
  if (p.result.ranked.size() < args.emit_rank) {
    fmt::print(stderr, "plan: {} configurations fit, so --emit of #{} wrote nothing\n",
               p.result.ranked.size(), args.emit_rank);
    return kExitFailure;
  }
  write_output(args.emit[1],
               sim::emit_ranked(target, p.tree, args.scenario.path, p.space, p.result,
                                args.emit_rank, args.command_line, args.emit[1]),
               fmt::format(" (plan #{} as {})", args.emit_rank, args.emit[0]));
  return kExitOk;
}

}  // namespace

int run_plan(const PlanArgs& args) {
  check_outputs(args.scenario, {{"--json", args.json_path},
                                {"--emit", args.emit.size() == 2 ? args.emit[1] : ""}});
  const ConfigTree tree = load_scenario_tree(args.scenario);
  const Scenario base = read_scenario(tree, args.scenario.path,
                                      std::filesystem::path(args.scenario.path).parent_path());
  std::vector<Problem> problems;
  sim::PlanInputs inputs;
  // The scenario's own API unless asked otherwise; a code emit target decides it (its
  // constraints). An emitted scenario keeps the scenario's API, as a plain plan does.
  const bool code_target = !args.emit.empty() && args.emit[0] != "scenario";
  inputs.api = !args.api.empty() ? args.api
               : code_target     ? std::string("either")
                                 : std::string(to_string(base.fsdp.api));
  // The global batch is fixed across cluster sizes: by default the scenario's own.
  inputs.global_batch_tokens = base.training.seq_len * base.training.micro_batch *
                               base.training.grad_accum * base.cluster.world_size();
  if (args.global_batch_tokens > 0) inputs.global_batch_tokens = args.global_batch_tokens;
  if (args.global_batch_sequences > 0)
    inputs.global_batch_tokens = args.global_batch_sequences * base.training.seq_len;
  for (const auto& f : args.fix) {
    auto fix = sim::parse_key_values(f, "--fix", problems);
    if (fix && fix->values.size() != 1) {
      problems.push_back({"--fix", f, "pins one value", "--allow for several"});
    } else if (fix) {
      value_problems("--fix", fix->key, fix->values, problems);
      inputs.fixed.emplace_back(std::move(fix->key), std::move(fix->values.front()));
    }
  }
  for (const auto& a : args.allow) {
    if (auto allow = sim::parse_key_values(a, "--allow", problems)) {
      value_problems("--allow", allow->key, allow->values, problems);
      inputs.allowed.emplace_back(std::move(allow->key), std::move(allow->values));
    }
  }
  if (args.objective == "p99" && !base.variation.any()) {
    problems.push_back({args.scenario.path, "variation",
                        "--objective p99 needs ranks that differ: every rank is alike, so the p99 "
                        "step time is the step time",
                        "variation.* keys in the scenario, e.g. --set variation.slow_nodes=1:1.1"});
  }
  const auto target = emit_target(args, inputs, problems);
  if (target) {
    for (auto& p : sim::emit_problems(*target, base)) problems.push_back(std::move(p));
  }
  const sim::EntryTolerance entries = group_within(args.group_within, problems);
  throw_if_any(std::move(problems));

  std::vector<SizedPlan> sizes = prepare_sizes(args, tree, inputs);
  const bool several = sizes.size() > 1;
  std::vector<SizedPlan> plans;  // the sizes planned, in order (fewer after a Ctrl-C)
  for (auto& size : sizes) {
    plan_size(args, entries, size);
    const auto& p = plans.emplace_back(std::move(size));
    if (several)
      fmt::print("== {} nodes × {} GPUs ({} GPUs) ==\n", p.nodes, base.cluster.gpus_per_node,
                 p.world);
    if (p.result.cancelled)
      fmt::print(stderr, "plan: interrupted; the ranking covers only what was simulated\n");
    fmt::print("{}{}", sim::plan_table(p.space, p.result), several ? "\n" : "");
    if (p.result.cancelled) break;
  }
  const bool cancelled = plans.back().result.cancelled;
  if (several && !cancelled) fmt::print("{}", sizes_table(plans, *inputs.global_batch_tokens));
  if (!args.json_path.empty()) {
    write_output(args.json_path, several ? sizes_json(plans, *inputs.global_batch_tokens)
                                         : sim::plan_json(plans[0].space, plans[0].result));
  }
  if (cancelled) return kExitFailure;
  if (!target) return kExitOk;
  return emit(args, *target, plans[0]);
}

}  // namespace shardscope::cli
