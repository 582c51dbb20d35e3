#include "shardscope/sim/planner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_set>

#include "plan_classes.hpp"
#include "plan_evaluate.hpp"
#include "plan_progress.hpp"
#include "shardscope/core/device_memory.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/rank_simulation.hpp"
#include "shardscope/sim/worker_pool.hpp"
#include "stopwatch.hpp"

namespace shardscope::sim {

Bytes plan_capacity(const Scenario& scenario) {
  return allocator_capacity(scenario.cluster, scenario.allocator, lower(scenario));
}

Bytes budget_with_margin(Bytes capacity, std::string_view margin, std::string_view flag,
                         std::vector<Problem>& problems) {
  const std::string m(margin);
  if (!m.empty() && m.back() == '%') {
    try {
      std::size_t used = 0;
      const double pct = std::stod(m.substr(0, m.size() - 1), &used);
      if (used + 1 == m.size() && pct >= 0 && pct < 100)
        return static_cast<Bytes>(static_cast<double>(capacity) * (1 - pct / 100));
    } catch (const std::exception&) {
    }
  } else if (!m.empty() && m.find_first_not_of("0123456789.") == std::string::npos) {
    // A bare number would be bytes: the unit (or %) is required.
    problems.push_back(
        {std::string(flag), m, "needs a unit: a percentage or a size", "e.g. 5% or 4GiB"});
    return 0;
  } else if (const auto size = parse_bytes(m); size && *size >= 0 && *size < capacity) {
    return capacity - *size;
  }
  problems.push_back({std::string(flag), m,
                      "not a percentage below 100 or a size below the capacity",
                      "e.g. 5% or 4GiB"});
  return 0;
}

Scenario configuration_scenario(const ConfigTree& base, const std::string& file,
                                const PlanSpace& space, std::size_t index) {
  return read_scenario(configuration_tree(base, space, index), file,
                       std::filesystem::path(file).parent_path());
}

namespace {

using planning::ComputeClass;
using planning::Evaluated;
using planning::Step;
using planning::TimingQueue;
using planning::ToTime;
using planning::WorkEstimate;

// "reduce dtype fp32, bf16; expandable segments false, true": the choices `members` (one
// prediction) take in each dimension where they differ.
std::string no_effect_knobs(const PlanSpace& space, const std::vector<std::size_t>& members) {
  const PlanConfig first = decode(space, members.front());
  const auto& dims = space.parts[first.part].dimensions;
  std::string out;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    std::vector<std::size_t> seen;
    bool same_part = true;
    for (std::size_t index : members) {
      const PlanConfig c = decode(space, index);
      if (c.part != first.part) {
        same_part = false;
        break;
      }
      if (std::find(seen.begin(), seen.end(), c.choices[d]) == seen.end())
        seen.push_back(c.choices[d]);
    }
    if (!same_part) return "the FSDP API and others";
    if (seen.size() < 2) continue;
    std::sort(seen.begin(), seen.end());
    std::vector<std::string> labels;
    labels.reserve(seen.size());
    for (std::size_t c : seen) labels.push_back(dims[d].choices[c].label);
    out += fmt::format("{}{} {}", out.empty() ? "" : "; ", dims[d].name, fmt::join(labels, ", "));
  }
  return out;
}

std::string bottleneck_of(const analysis::Summary& s) {
  // Retries while the caches warm up are not a step's bottleneck; retries in the steady state are
  // (the whole run's when the timeline does not say which iteration made them).
  const int retries = s.allocator_retries_per_step.value_or(s.allocator_retries.value_or(0));
  if (retries > 0) return fmt::format("allocator retries ({} per step)", retries);
  std::map<std::string, TimeNs> share;
  TimeNs total = 0;
  for (const auto& [kind, t] : s.critical_path.by_kind) {
    total += t;
    if (kind == "all_gather") {
      share["exposed all-gather"] += t;
    } else if (kind == "reduce_scatter" || kind == "all_reduce") {
      share["exposed reduce-scatter"] += t;
    } else if (kind == "cpu") {
      share["CPU issue"] += t;
    } else if (kind == "h2d" || kind == "d2h") {
      share["host copies"] += t;
    } else {
      share["compute"] += t;
    }
  }
  if (total <= 0) return "compute";
  // Compute is the floor every step has; name what else takes the most of the path when it is
  // a tenth or more.
  std::string worst = "compute";
  TimeNs worst_time = 0;
  for (const auto& [name, t] : share) {
    if (name != "compute" && t > worst_time) {
      worst = name;
      worst_time = t;
    }
  }
  if (10 * worst_time < total) worst = "compute", worst_time = share["compute"];
  return fmt::format("{} ({:.0f} % of the critical path)", worst,
                     100.0 * static_cast<double>(worst_time) / static_cast<double>(total));
}

std::string change_to(const PlanSpace& space, const PlanConfig& a, const PlanConfig& b) {
  if (a.part != b.part)
    return fmt::format("API {} → {}", space.parts[a.part].api, space.parts[b.part].api);
  std::string out;
  const auto& dims = space.parts[a.part].dimensions;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (a.choices[d] == b.choices[d]) continue;
    if (!out.empty()) out += "; ";
    out += fmt::format("{} {} → {}", dims[d].name, dims[d].choices[a.choices[d]].label,
                       dims[d].choices[b.choices[d]].label);
  }
  return out;
}

// Groups timed together: a constant, so that what is skipped does not depend on the threads.
constexpr std::size_t kTimingBatch = 8;

}  // namespace

PlanWork plan_work(const ConfigTree& base, const std::string& file, const PlanSpace& space) {
  PlanWork work;
  planning::sized_classes(base, file, space, work);
  return work;
}

// Under PlanObjective::p99: the candidates (the search's ranking) re-ranked by the p99 of their
// step time with every rank replayed, the first `top` kept.
void rank_by_p99(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                 std::size_t top, std::size_t candidates, PlanResult& result) {
  result.objective = PlanObjective::p99;
  result.p99_candidates = result.ranked.size();
  const bool every_fitting = result.ranked.size() < candidates;  // the search found no more
  bool only_slows = true;
  TimeNs slowest_candidate = 0;
  for (PlannedConfig& p : result.ranked) {
    const Scenario scenario = configuration_scenario(base, file, space, p.index);
    const VariationSpec& v = scenario.variation;
    const auto slows = [](const std::map<int, double>& factors) {
      return std::all_of(factors.begin(), factors.end(),
                         [](const auto& f) { return f.second >= 1; });
    };
    only_slows = only_slows && v.jitter == 0 && v.gpu_sigma == 0 && slows(v.slow_ranks) &&
                 slows(v.slow_nodes) && slows(v.slow_links);
    const Schedule schedule = lower(scenario);
    SimOptions sim;
    sim.record_memory_samples = false;
    const RankSimulation ranks =
        simulate_ranks(scenario, schedule,
                       rank_variation(v, schedule.world_size, scenario.cluster.gpus_per_node), sim);
    p.percentiles = PlannedConfig::Percentiles{percentile(ranks.iteration_times, 50),
                                               percentile(ranks.iteration_times, 99),
                                               percentile(ranks.iteration_times, 100)};
    slowest_candidate = std::max(slowest_candidate, p.summary.step_time);
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const PlannedConfig& a, const PlannedConfig& b) {
                     return a.percentiles->p99 < b.percentiles->p99;
                   });
  if (result.ranked.size() > top) result.ranked.resize(top);
  // A configuration outside the candidates has a step of at least the slowest candidate's, and
  // a variation that only slows never brings a p99 below the step.
  result.p99_exact = only_slows && (every_fitting || result.ranked.size() < top ||
                                    result.ranked.back().percentiles->p99 <= slowest_candidate);
}

PlanResult plan(const ConfigTree& base, const std::string& file, const PlanSpace& space,
                const PlanOptions& asked) {
  if (asked.memory_budget <= 0) throw Error("plan: the memory budget must be positive");
  // Under p99 the search finds the candidates by step time; they are ranked by p99 after it.
  PlanOptions options = asked;
  if (asked.objective == PlanObjective::p99) {
    options.top =
        std::max(asked.top, asked.p99_candidates > 0 ? asked.p99_candidates : 4 * asked.top);
    // An entry stands for its members by one replay: under variation only configurations the
    // symmetric replay times alike are one entry (FULL_SHARD and HSDP within 0.5 % of each other
    // are not alike once a node is slow).
    options.entries.time = 0;
  }
  PlanResult result;
  result.space = space.size();
  result.memory_budget = options.memory_budget;
  result.entries = options.entries;
  PlanWork work;
  const planning::Stopwatch setup;
  auto classes = planning::sized_classes(base, file, space, work);
  result.classes = classes.size();
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };
  const unsigned threads =
      options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  if (options.on_work) options.on_work(work);
  PlanProgress progress{0, result.space, setup.seconds(), 0, false};
  auto report = [&] {
    if (options.progress) options.progress(progress);
  };

  // The bounds, in batches of one class per thread so that progress shows between them. Until
  // the search starts, the total is the worst case (PlanWork::ops) at the bounds' cost per op.
  double bound_seconds = 0;
  std::int64_t bound_ops = 0;
  const auto lowering_per_op = [&] {
    return bound_ops > 0 ? bound_seconds / static_cast<double>(bound_ops) : 0.0;
  };
  for (std::size_t begin = 0; begin < classes.size() && !cancelled(); begin += threads) {
    const std::size_t end = std::min<std::size_t>(classes.size(), begin + threads);
    std::vector<double> seconds(end - begin);
    std::atomic<std::size_t> next{begin};
    WorkerPool::shared().run(static_cast<unsigned>(end - begin - 1), [&] {
      for (std::size_t k = next++; k < end; k = next++) {
        const planning::Stopwatch bounding;
        classes[k].bound = planning::class_bound(base, file, space, classes[k]);
        if (!options.exhaustive && classes[k].saved <= options.memory_budget)
          classes[k].floor_share =
              planning::sampled_floor_share(base, file, space, classes[k], options.memory_budget);
        seconds[k - begin] = bounding.seconds();
      }
    });
    for (std::size_t k = begin; k < end; ++k) {
      bound_seconds += seconds[k - begin];
      bound_ops += classes[k].ops;
      progress.seconds_done += seconds[k - begin];
    }
    progress.seconds_total =
        progress.seconds_done + static_cast<double>(work.ops - bound_ops) * lowering_per_op();
    report();
  }
  if (cancelled()) {
    result.cancelled = true;
    return result;
  }
  std::stable_sort(classes.begin(), classes.end(),
                   [](const ComputeClass& a, const ComputeClass& b) { return a.bound < b.bound; });
  std::vector<Evaluated> fitting;
  std::unordered_set<std::size_t> not_fitting;
  // The distinct predictions found so far: they bound the step time that can still rank.
  std::set<Prediction> predictions;
  // Configurations that fit and wait to be timed, by floor.
  TimingQueue to_time;
  WorkEstimate estimate(space, options, classes, lowering_per_op());
  // The work expected by now, with `unsettled` members of class `k` still to come.
  const auto expect = [&](std::size_t k, std::size_t unsettled) {
    progress.seconds_total =
        progress.seconds_done + estimate.ahead(k, unsettled, predictions, to_time);
    progress.estimated = estimate.grounded();
  };

  // Counts every configuration the search will not settle: the classes from `k` on and what waits
  // to be timed (no prediction among them can rank).
  auto skip_the_rest = [&](std::size_t k) {
    for (std::size_t rest = k; rest < classes.size(); ++rest)
      result.skipped_by_bound += classes[rest].members.size();
    for (const auto& [key, group] : to_time) result.skipped_by_bound += group.members.size();
    to_time.clear();
    progress.settled = result.space;
    progress.seconds_total = progress.seconds_done;
    progress.estimated = true;
    report();
  };
  // The step time beyond which nothing can rank, from every prediction so far (infinity while
  // they form fewer than `top` entries). A floor beyond it is beyond its own reach too: the
  // entries that form it all lie below.
  const auto reach_now = [&] {
    return top_entries_reach(predictions, std::numeric_limits<TimeNs>::max(), options.top,
                             options.entries);
  };
  // Times waiting groups in the order of their floors, a batch at a time: those whose floor is at
  // most `limit`, and with `within_reach` only while the first floor waiting is within the reach
  // of the entries found (infinite while they are too few). False when the search is over: the
  // first floor left is beyond the reach, so is everything after it (the classes still to visit
  // have bounds of at least `limit`). `k`, `unsettled`: the class being visited (or next;
  // classes.size() after the last) and its members still to settle, for the progress.
  auto time_waiting = [&](TimeNs limit, bool within_reach, std::size_t k, std::size_t unsettled) {
    while (!to_time.empty() && to_time.begin()->first.first <= limit &&
           !(within_reach && static_cast<double>(to_time.begin()->first.first) > reach_now())) {
      if (cancelled()) {
        result.cancelled = true;
        return true;
      }
      const TimeNs floor = to_time.begin()->first.first;
      const double reach = top_entries_reach(predictions, floor, options.top, options.entries);
      if (static_cast<double>(floor) > reach) return false;
      std::vector<ToTime> batch;
      while (batch.size() < kTimingBatch && !to_time.empty() &&
             to_time.begin()->first.first <= limit) {
        const bool beyond = static_cast<double>(to_time.begin()->first.first) > reach;
        if (beyond) result.skipped_by_bound += to_time.begin()->second.members.size();
        if (!beyond) batch.push_back(std::move(to_time.begin()->second));
        to_time.erase(to_time.begin());
      }
      std::vector<std::optional<TimeNs>> steps(batch.size());
      std::vector<std::vector<Problem>> problems(batch.size());
      std::vector<double> seconds(batch.size());
      std::atomic<std::size_t> next{0};
      const auto helpers = static_cast<unsigned>(std::min<std::size_t>(threads, batch.size()) - 1);
      WorkerPool::shared().run(helpers, [&] {
        for (std::size_t b = next++; b < batch.size(); b = next++) {
          const planning::Stopwatch timing;
          try {
            steps[b] = planning::time_alike(base, file, space, batch[b].members.front().index);
          } catch (const ValidationError& error) {  // an op too long to simulate
            problems[b] = error.problems();
          }
          seconds[b] = timing.seconds();
        }
      });
      for (std::size_t b = 0; b < batch.size(); ++b) {
        for (Evaluated& e : batch[b].members) {
          ++result.simulated;
          if (!steps[b]) {
            ++result.invalid;
            if (!result.first_invalid || e.index < result.first_invalid->index)
              result.first_invalid = InvalidConfig{e.index, problems[b]};
            continue;
          }
          e.step_time = *steps[b];
          fitting.push_back(e);
          predictions.emplace(e.step_time, e.peak_reserved, strategy_of(space, e.index));
        }
        if (steps[b]) estimate.group_timed(*steps[b], batch[b].members.front().floor);
        estimate.step_done(Step::timed, batch[b].part, seconds[b], batch[b].ops);
        progress.seconds_done += seconds[b];
      }
      if (k < classes.size()) {
        expect(k, unsettled);
      } else {
        expect(classes.size() - 1, 0);
      }
      report();
    }
    return true;
  };

  // Work left undone by a cancel marks the result incomplete; a cancel after the last
  // simulation does not.
  bool over = false;
  for (std::size_t k = 0; k < classes.size() && !over; ++k) {
    const auto& cls = classes[k];
    if (cancelled()) {
      result.cancelled = true;
      break;
    }
    // What waits to be timed below this class's bound first: its predictions may end the search.
    if (!options.exhaustive && !time_waiting(cls.bound, false, k, cls.members.size())) {
      skip_the_rest(k);
      over = true;
      break;
    }
    if (result.cancelled) break;
    if (!options.exhaustive &&
        static_cast<double>(cls.bound) >
            top_entries_reach(predictions, cls.bound, options.top, options.entries)) {
      skip_the_rest(k);
      over = true;
      break;
    }
    if (!options.exhaustive && cls.saved > options.memory_budget) {
      // Its saved activations alone are over the budget: no member fits, none is lowered.
      result.screened_by_memory += cls.members.size();
      result.screened_before_lowering += cls.members.size();
      not_fitting.insert(cls.members.begin(), cls.members.end());
      // Reported with the next class's first wave; not among the visited, whose shares
      // extrapolate to classes that are lowered.
      progress.settled += cls.members.size();
      continue;
    }
    // Waves of increasing memory depth; each wave's skipping sees only earlier waves.
    std::map<std::size_t, std::vector<std::size_t>> waves;
    for (std::size_t index : cls.members)
      waves[planning::memory_depth(space, decode(space, index))].push_back(index);
    std::size_t unsettled = cls.members.size();
    for (const auto& [depth, members] : waves) {
      if (cancelled()) {
        result.cancelled = true;
        break;
      }
      std::vector<std::size_t> to_run;
      for (std::size_t index : members) {
        if (!options.exhaustive &&
            planning::above_one_that_did_not_fit(space, decode(space, index), not_fitting)) {
          not_fitting.insert(index);
          ++result.skipped_by_memory;
        } else {
          to_run.push_back(index);
        }
      }
      // What waits within the reach is timed now, ahead of the classes' order, so that the reach
      // tightens: a schedule whose floor is beyond it is never replayed. (This ends nothing: no
      // floor it times is beyond the reach.)
      if (!options.exhaustive) time_waiting(std::numeric_limits<TimeNs>::max(), true, k, unsettled);
      const double reach = reach_now();
      const std::vector<Evaluated> out =
          planning::evaluate_wave(base, file, space, to_run, options, reach, threads, cancelled);
      planning::WaveCounts wave{
          .members = members.size(), .read = to_run.size(), .reach_known = std::isfinite(reach)};
      for (std::size_t i = 0; i < to_run.size(); ++i) {
        const auto& e = out[i];
        if (!e.done) {  // cancelled before it ran
          result.cancelled = true;
          continue;
        }
        wave.lowered += e.unlowered ? 0 : 1;
        estimate.step_done(e.beyond      ? Step::beyond
                           : e.unlowered ? Step::read
                                         : Step::replayed,
                           cls.part, e.seconds, cls.ops);
        progress.seconds_done += e.seconds;
        // Every member lowered under a known reach has its floor: their spread is what the
        // estimate reads the classes ahead by (a wave before sees only the floors of fits).
        if (std::isfinite(reach) && e.floor > 0) estimate.floor_seen(cls, e.floor);
        if (e.beyond) {
          ++wave.beyond;
          ++result.skipped_by_bound;
          ++result.skipped_by_floor;
          continue;
        }
        if (e.screened) {
          ++result.screened_by_memory;
          result.screened_before_lowering += e.unlowered ? 1 : 0;
          not_fitting.insert(e.index);
          continue;
        }
        if (!e.valid) {
          ++result.simulated;
          ++result.invalid;
          if (!result.first_invalid || e.index < result.first_invalid->index)
            result.first_invalid = InvalidConfig{e.index, e.problems};
        } else if (options.exhaustive) {
          ++result.simulated;
          if (e.fits) {
            fitting.push_back(e);
          } else {
            not_fitting.insert(e.index);
          }
        } else {  // it fits: timed in the order of its floor
          ToTime& group = to_time[{e.floor, timing_of(space, e.index)}];
          estimate.fit_found(cls, e.floor, e.peak_reserved, strategy_of(space, e.index),
                             group.members.empty());
          if (group.members.empty()) ++wave.groups;
          group.members.push_back(e);
          group.ops = cls.ops;
          group.part = cls.part;
        }
      }
      progress.settled += members.size();
      unsettled -= members.size();
      estimate.wave_done(cls, wave);
      expect(k, unsettled);
      report();
    }
    estimate.class_done(cls);
  }
  if (!over && !result.cancelled &&
      !time_waiting(std::numeric_limits<TimeNs>::max(), false, classes.size(), 0))
    skip_the_rest(classes.size());
  result.fitting = fitting.size();
  std::vector<PlanMember> predicted;
  predicted.reserve(fitting.size());
  for (const Evaluated& e : fitting)
    predicted.push_back({e.index, e.step_time, e.peak_reserved, strategy_of(space, e.index)});
  std::sort(predicted.begin(), predicted.end(), ranks_before);
  for (const auto& entry : top_entries(predicted, options.top, options.entries)) {
    PlannedConfig p;
    std::vector<std::size_t> indices;
    for (std::size_t position : entry) {
      p.members.push_back(predicted[position]);
      indices.push_back(predicted[position].index);
    }
    if (indices.size() > 1) p.no_effect = no_effect_knobs(space, indices);
    const PlanMember& fastest = p.members.front();
    const PlanMember& chosen = entry_choice(p.members, options.entries);
    p.index = chosen.index;
    p.config = decode(space, chosen.index);
    if (chosen.index != fastest.index)
      p.fastest = fmt::format("{} at {} with {}", format_duration(fastest.step_time),
                              format_bytes(fastest.peak_reserved),
                              change_to(space, p.config, decode(space, fastest.index)));
    p.settings = settings_of(space, p.config);
    // Again with the critical path, for the bottleneck (the same simulation, so the same times).
    p.summary = planning::simulated_summary(base, file, space, p.index, true);
    p.bottleneck = bottleneck_of(p.summary);
    result.ranked.push_back(std::move(p));
  }
  if (asked.objective == PlanObjective::p99 && !result.cancelled)
    rank_by_p99(base, file, space, asked.top, options.top, result);
  for (std::size_t i = 0; i + 1 < result.ranked.size(); ++i)
    result.ranked[i].change =
        change_to(space, result.ranked[i].config, result.ranked[i + 1].config);
  return result;
}

}  // namespace shardscope::sim
