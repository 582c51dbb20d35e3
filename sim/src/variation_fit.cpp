#include "shardscope/sim/variation_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "shardscope/core/error.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/least_squares.hpp"

namespace shardscope::sim {
namespace {

// What the fit reads of one rank: its GPU compute ops' durations by (iteration, place among the
// iteration's GPU compute ops by stream and start: ranks of one job run the same kernels in the
// same order, and imported traces have no op ids), and the CPU's gaps between consecutive issues
// beyond the modelled issue cost (only where ops carry their schedule's ids).
struct RankOps {
  int rank = 0;
  std::map<std::pair<int, int>, double> duration;  // ns
  std::map<int, int> ops_in_iteration;
  std::vector<double> excess_gaps;  // ns
};

bool gpu_compute(const Timeline& t, const TimelineOp& op) {
  return !is_collective(op.kind) && op.kind != OpKind::h2d && op.kind != OpKind::d2h &&
         op.stream >= 0 && t.streams[static_cast<std::size_t>(op.stream)].kind != StreamKind::cpu;
}

RankOps read_rank(const Timeline& t, const Schedule& s, const CostModel& costs) {
  RankOps r;
  r.rank = t.provenance.rank;
  std::vector<const TimelineOp*> issued, compute;
  for (const TimelineOp& op : t.ops) {
    if (gpu_compute(t, op)) compute.push_back(&op);
    if (op.issue_known() && op.op != kNone && static_cast<std::size_t>(op.op) < s.ops.size())
      issued.push_back(&op);
  }
  // A stream runs its ops in issue order: by stream, then start, the same on every rank (across
  // streams the order of starts varies with each rank's timing).
  std::stable_sort(compute.begin(), compute.end(), [](const TimelineOp* a, const TimelineOp* b) {
    if (a->iteration != b->iteration) return a->iteration < b->iteration;
    return a->stream != b->stream ? a->stream < b->stream : a->start < b->start;
  });
  for (const TimelineOp* op : compute) {
    const int place = r.ops_in_iteration[op->iteration]++;
    r.duration[{op->iteration, place}] = static_cast<double>(op->duration());
  }
  std::sort(issued.begin(), issued.end(), [](const TimelineOp* a, const TimelineOp* b) {
    return a->issue_start < b->issue_start;
  });
  for (std::size_t i = 0; i + 1 < issued.size(); ++i) {
    const TimeNs gap = issued[i + 1]->issue_start - issued[i]->issue_start;
    const TimeNs modelled = costs.cost(s, s.ops[static_cast<std::size_t>(issued[i]->op)]).cpu;
    r.excess_gaps.push_back(static_cast<double>(std::max<TimeNs>(0, gap - modelled)));
  }
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// The point estimates on the ops at `keys` (a resample, with repeats).
struct Estimates {
  std::vector<double> factor;  // by rank index
  double sigma = 0;
  double jitter = 0;
  std::map<int, double> slow;  // rank index → factor
};

Estimates estimate(const std::vector<RankOps>& ranks,
                   const std::vector<std::pair<OpId, int>>& keys) {
  Estimates e;
  std::vector<double> busy;
  for (const RankOps& r : ranks) {
    double sum = 0;
    for (const auto& k : keys) sum += r.duration.at(k);
    busy.push_back(sum);
  }
  const double mid = median(busy);
  for (double b : busy) e.factor.push_back(mid > 0 ? b / mid : 1.0);
  // Outliers: beyond 4 robust standard deviations above the median factor.
  std::vector<double> deviation;
  for (double f : e.factor) deviation.push_back(std::fabs(f - 1.0));
  const double robust_sd = std::max(0.005, 1.4826 * median(deviation));
  std::vector<double> rest;
  for (std::size_t r = 0; r < e.factor.size(); ++r) {
    if (e.factor[r] > 1.0 + 4 * robust_sd)
      e.slow[static_cast<int>(r)] = e.factor[r];
    else
      rest.push_back(e.factor[r]);
  }
  e.sigma = stddev(rest);
  // Jitter: each op's time against its median over ranks, each rank's factor taken out.
  std::vector<double> ratio;
  std::vector<double> scaled(ranks.size());
  for (const auto& k : keys) {
    for (std::size_t r = 0; r < ranks.size(); ++r)
      scaled[r] = ranks[r].duration.at(k) / e.factor[r];
    const double m = median(scaled);
    if (m <= 0) continue;
    for (double x : scaled) ratio.push_back(x / m - 1.0);
  }
  e.jitter = stddev(ratio);
  return e;
}

// The 95 % interval as calibrate's: nearest-rank 2.5th and 97.5th percentiles of the draws.
FittedValue interval(double value, std::vector<double> draws, int samples) {
  FittedValue f{value, value, value, samples};
  if (draws.empty()) return f;
  f.low = quantile(draws, 0.025);
  f.high = quantile(draws, 0.975);
  return f;
}

}  // namespace

VariationFit fit_variation(const Scenario& scenario, const Schedule& schedule,
                           const std::vector<Timeline>& timelines, int bootstrap,
                           std::uint64_t seed) {
  if (timelines.size() < 2)
    throw ValidationError({Problem{"", "", "a variation needs the timelines of at least 2 ranks",
                                   "one timeline per rank of one run"}});
  const CostModel costs(scenario);
  std::vector<RankOps> ranks;
  std::set<int> seen;
  for (const Timeline& t : timelines) {
    if (!seen.insert(t.provenance.rank).second) {
      throw ValidationError(
          {Problem{"", "", fmt::format("rank {} is given twice", t.provenance.rank),
                   "one timeline per rank"}});
    }
    ranks.push_back(read_rank(t, schedule, costs));
  }
  // The iterations (after the first where there are several) in which every rank ran as many
  // GPU compute ops: their ops, matched by place.
  std::vector<std::pair<int, int>> keys;
  const auto& first = ranks.front().ops_in_iteration;
  const bool skip_first = first.size() > 1;
  for (const auto& entry : first) {
    const int iteration = entry.first, count = entry.second;
    if (skip_first && iteration == first.begin()->first) continue;
    const bool alike = std::all_of(ranks.begin(), ranks.end(), [&](const RankOps& r) {
      const auto it = r.ops_in_iteration.find(iteration);
      return it != r.ops_in_iteration.end() && it->second == count;
    });
    if (!alike) continue;
    for (int place = 0; place < count; ++place) keys.push_back({iteration, place});
  }
  if (keys.empty())
    throw ValidationError(
        {Problem{"", "", "no iteration in which every rank ran as many GPU compute ops",
                 "timelines of one run of the scenario"}});
  const Estimates point = estimate(ranks, keys);
  std::vector<std::vector<double>> factor_draws(ranks.size());
  std::vector<double> sigma_draws, jitter_draws;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, keys.size() - 1);
  std::vector<std::pair<int, int>> resample(keys.size());
  for (int b = 0; b < bootstrap; ++b) {
    for (auto& k : resample) k = keys[pick(rng)];
    const Estimates e = estimate(ranks, resample);
    for (std::size_t r = 0; r < ranks.size(); ++r) factor_draws[r].push_back(e.factor[r]);
    sigma_draws.push_back(e.sigma);
    jitter_draws.push_back(e.jitter);
  }
  VariationFit fit;
  fit.ranks = static_cast<int>(ranks.size());
  fit.ops = static_cast<int>(keys.size());
  for (std::size_t r = 0; r < ranks.size(); ++r)
    fit.gpu_time_factor[ranks[r].rank] = interval(point.factor[r], factor_draws[r], fit.ops);
  for (const auto& [index, f] : point.slow)
    fit.slow_ranks[ranks[static_cast<std::size_t>(index)].rank] = f;
  fit.gpu_sigma = interval(point.sigma, sigma_draws, fit.ranks);
  fit.jitter = interval(point.jitter, jitter_draws, fit.ops * fit.ranks);
  // Issue delays: the exponential's mean from the median excess gap, pooled over ranks; its
  // interval from a bootstrap over the gaps.
  std::vector<double> gaps;
  for (const RankOps& r : ranks)
    gaps.insert(gaps.end(), r.excess_gaps.begin(), r.excess_gaps.end());
  if (!gaps.empty()) {
    const double ln2 = std::log(2.0);
    std::vector<double> draws;
    std::uniform_int_distribution<std::size_t> gap(0, gaps.size() - 1);
    std::vector<double> sample(gaps.size());
    for (int b = 0; b < bootstrap; ++b) {
      for (double& x : sample) x = gaps[gap(rng)];
      draws.push_back(median(sample) / ln2);
    }
    fit.issue_delay_ns = interval(median(gaps) / ln2, draws, static_cast<int>(gaps.size()));
  }
  return fit;
}

std::string variation_report(const VariationFit& fit) {
  const auto value = [](const FittedValue& f, int digits) {
    return fmt::format("{:.{}f} [{:.{}f}, {:.{}f}]", f.value, digits, f.low, digits, f.high,
                       digits);
  };
  std::string out = fmt::format(
      "variation fitted to {} ranks on {} GPU compute ops every rank recorded (95 % intervals, "
      "bootstrap over the ops)\n",
      fit.ranks, fit.ops);
  out += "  GPU time factor by rank\n";
  for (const auto& [rank, f] : fit.gpu_time_factor)
    out += fmt::format("    rank {:<22}× {}{}\n", rank, value(f, 4),
                       fit.slow_ranks.contains(rank) ? "  slow" : "");
  out += fmt::format("  {:<28}{}\n", "gpu_sigma", value(fit.gpu_sigma, 4));
  out += fmt::format("  {:<28}{}\n", "jitter", value(fit.jitter, 4));
  if (fit.issue_delay_ns) {
    const auto& d = *fit.issue_delay_ns;
    out += fmt::format("  {:<28}{} [{}, {}]\n", "issue_delay",
                       format_duration(static_cast<TimeNs>(std::llround(d.value))),
                       format_duration(static_cast<TimeNs>(std::llround(d.low))),
                       format_duration(static_cast<TimeNs>(std::llround(d.high))));
  } else {
    out += fmt::format("  {:<28}unknown (no timeline recorded when its ops were issued)\n",
                       "issue_delay");
  }
  return out + "\nas scenario keys:\n" + variation_yaml(fit);
}

std::string variation_yaml(const VariationFit& fit) {
  std::string out = "variation:\n";
  if (!fit.slow_ranks.empty())
    out += fmt::format("  slow_ranks: \"{}\"\n", factor_list_text(fit.slow_ranks));
  out +=
      fmt::format("  gpu_sigma: {:.4f}\n  jitter: {:.4f}\n", fit.gpu_sigma.value, fit.jitter.value);
  if (fit.issue_delay_ns)
    out +=
        fmt::format("  issue_delay: {}\n",
                    format_duration(static_cast<TimeNs>(std::llround(fit.issue_delay_ns->value))));
  return out;
}

}  // namespace shardscope::sim
