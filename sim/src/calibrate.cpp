#include "shardscope/sim/calibrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "shardscope/core/error.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/least_squares.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope::sim {
namespace {

constexpr double kSignalShare = 0.01;      // a column must explain this share of measured time
constexpr double kMaxContentionScale = 4;  // the calibration file's bound

double seconds(TimeNs t) {
  return static_cast<double>(t) * 1e-9;
}

// --------------------------------------------------------------- compute

// One compute sample as the roofline sees it; the h-dependent columns are built per candidate h.
struct ComputeRow {
  double y = 0;         // GPU work (gpu_work) − fixed, seconds
  double measured = 0;  // seconds
  double matmul = 0;    // FLOPs on the roofline
  double matmul_ops = 0;
  double attention = 0;
  double attention_ops = 0;
  double hbm = 0;     // seconds at full HBM bandwidth
  double slowed = 0;  // seconds of throughput the SM model takes beside collectives (slowed_work)
  double smallest_gemm = INFINITY;  // the least and most GEMM FLOPs of one of its ops
  double largest_gemm = 0;
};

enum ComputeParam : std::size_t { kMatmul, kAttention, kHbm, kContention, kComputeParams };

struct ComputeFit {
  std::vector<double> beta;  // 1/e_m, 1/e_a, 1/e_h, σ (contention scale)
  double h = 0;
};

class ComputeFitter {
 public:
  ComputeFitter(std::vector<ComputeRow> rows, const CostModel& prior)
      : rows_(std::move(rows)), peak_(prior.effective_peak()) {
    const auto& gpu = prior.cluster().gpu;
    problem_.prior = {1 / gpu.matmul_efficiency, 1 / gpu.attention_efficiency,
                      1 / prior.compute_params().hbm_efficiency, prior.contention_scale()};
    problem_.lo = {1, 1, 1, 0};
    problem_.hi = {100, 100, 100, kMaxContentionScale};
    prior_h_ = prior.compute_params().half_efficiency_flops;
    for (const auto& r : rows_) problem_.y.push_back(r.y);
  }

  const std::vector<ComputeRow>& rows() const { return rows_; }
  double prior_h() const { return prior_h_; }
  const std::vector<double>& prior() const { return problem_.prior; }

  /// Which parameters the rows determine; the others are held at their priors.
  void decide() {
    double total = 0, matmul = 0, attention = 0, hbm = 0, slowed = 0, size_term = 0;
    double smallest_gemm = INFINITY, largest_gemm = 0;
    int n_matmul = 0, n_attention = 0, n_hbm = 0, n_slowed = 0;
    for (const auto& r : rows_) {
      smallest_gemm = std::min(smallest_gemm, r.smallest_gemm);
      largest_gemm = std::max(largest_gemm, r.largest_gemm);
      total += r.measured;
      matmul += (r.matmul + prior_h_ * r.matmul_ops) / peak_ * problem_.prior[kMatmul];
      attention += (r.attention + prior_h_ * r.attention_ops) / peak_ * problem_.prior[kAttention];
      hbm += r.hbm * problem_.prior[kHbm];
      size_term += prior_h_ * r.matmul_ops / peak_ * problem_.prior[kMatmul];
      slowed += r.slowed;
      n_matmul += r.matmul > 0;
      n_attention += r.attention > 0;
      n_hbm += r.hbm > 0;
      n_slowed += r.slowed > 0;
    }
    const auto enough = [&](double part, int n) { return n >= 2 && part >= kSignalShare * total; };
    free_ = {enough(matmul, n_matmul), enough(attention, n_attention), enough(hbm, n_hbm),
             enough(slowed, n_slowed)};
    // h shows only where small GEMMs run well below peak: GEMMs of several sizes, and the
    // efficiency curve worth a share of the time at the prior h.
    const bool sizes_differ = largest_gemm >= 2 * smallest_gemm;
    search_h_ = sizes_differ && free_[kMatmul] && enough(size_term, n_matmul);
    for (std::size_t j = 0; j < kComputeParams; ++j) {
      if (!free_[j]) problem_.lo[j] = problem_.hi[j] = problem_.prior[j];
    }
  }

  bool is_free(std::size_t j) const { return free_[j]; }
  bool searches_h() const { return search_h_; }

  ComputeFit fit(const std::vector<int>& weights) {
    if (!search_h_) return {solve(prior_h_, weights).beta, prior_h_};
    // The error is smooth in log h: a grid finds the valley, golden sections refine it.
    const auto sse = [&](double log_h) { return solve(std::pow(10.0, log_h), weights).sse; };
    constexpr double kLo = 6, kHi = 12, kStep = 0.25;
    double best = kLo;
    double best_sse = sse(kLo);
    for (double x = kLo + kStep; x <= kHi + 1e-9; x += kStep) {
      const double e = sse(x);
      if (e < best_sse) {
        best_sse = e;
        best = x;
      }
    }
    // Golden sections: each step keeps one interior point and its error, so one new solve.
    double a = std::max(kLo, best - kStep), b = std::min(kHi, best + kStep);
    const double ratio = (std::sqrt(5.0) - 1) / 2;
    double c = b - ratio * (b - a), d = a + ratio * (b - a);
    double fc = sse(c), fd = sse(d);
    for (int i = 0; i < 30; ++i) {
      if (fc < fd) {
        b = d;
        d = c;
        fd = fc;
        c = b - ratio * (b - a);
        fc = sse(c);
      } else {
        a = c;
        c = d;
        fc = fd;
        d = a + ratio * (b - a);
        fd = sse(d);
      }
    }
    const double h = std::pow(10.0, (a + b) / 2);
    return {solve(h, weights).beta, h};
  }

 private:
  LinearFit solve(double h, const std::vector<int>& weights) {
    problem_.rows.resize(rows_.size());
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      const auto& r = rows_[i];
      problem_.rows[i] = {(r.matmul + h * r.matmul_ops) / peak_,
                          (r.attention + h * r.attention_ops) / peak_, r.hbm, r.slowed};
    }
    return solve_least_squares(problem_, weights);
  }

  std::vector<ComputeRow> rows_;
  double peak_ = 0;
  double prior_h_ = 0;
  LinearProblem problem_;
  std::vector<bool> free_ = std::vector<bool>(kComputeParams, false);
  bool search_h_ = false;
};

// What the SM model says of the schedule's ops, at the prior's costs.
ContentionFacts contention_facts(const Schedule& schedule, const CostModel& costs) {
  ContentionFacts facts;
  facts.contended_sms = costs.contended_sms();
  for (const auto& op : schedule.ops) {
    const OpCost c = costs.cost(schedule, op);
    facts.contended.push_back(c.contended);
    facts.sms.push_back(c.sms);
  }
  return facts;
}

// The compute rows of the fitted samples whose every op the roofline prices.
std::vector<ComputeRow> compute_rows(const SampleSet& set, const Schedule& schedule,
                                     const CostModel& costs) {
  std::vector<ComputeRow> rows;
  const double hbm_bw = costs.cluster().gpu.hbm_bandwidth;
  for (const auto& s : set.samples) {
    if (s.cls != SampleClass::compute || s.held_out || s.measured <= 0 || s.ops.empty()) continue;
    ComputeRow row;
    TimeNs fixed = 0;
    bool priced = true;
    for (OpId id : s.ops) {
      const auto terms = costs.compute_terms(schedule, schedule.ops[static_cast<std::size_t>(id)]);
      if (!terms || costs.bandwidth_bound(*terms)) {  // the fit is of the compute-bound terms
        priced = false;
        break;
      }
      fixed += terms->fixed;
      // The size curve's h applies to ops priced by their FLOPs, not to kernels priced by shape.
      const bool sized = !terms->by_shape;
      row.matmul += terms->matmul;
      row.matmul_ops += sized && terms->matmul > 0;
      row.attention += terms->attention;
      row.attention_ops += sized && terms->attention > 0;
      row.hbm += static_cast<double>(terms->memory_bytes) / hbm_bw;
      if (sized && terms->matmul > 0) {
        row.smallest_gemm = std::min(row.smallest_gemm, terms->matmul);
        row.largest_gemm = std::max(row.largest_gemm, terms->matmul);
      }
    }
    if (!priced) continue;
    row.measured = seconds(s.measured);
    row.y = (s.gpu_work - static_cast<double>(fixed)) * 1e-9;
    row.slowed = s.slowed_work * 1e-9;
    rows.push_back(row);
  }
  return rows;
}

// --------------------------------------------------------------- latency + bytes / bandwidth

// Rows (1, x) → (latency, 1/bandwidth). With one message size the two cannot be told apart, so
// the latency is held at its prior; a bootstrap resample is judged the same way on its own rows.
struct AffineFit {
  std::vector<double> x;  // bytes (bus bytes for collectives)
  std::vector<double> y;  // seconds
  double prior_latency = 0;
  double prior_bandwidth = 0;

  /// Whether the rows drawn (weights; empty: all) have sizes at least 2× apart, 3 rows or more.
  bool latency_free(const std::vector<int>& weights = {}) const {
    double lo = INFINITY, hi = 0;
    int n = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!weights.empty() && weights[i] == 0) continue;
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
      n += weights.empty() ? 1 : weights[i];
    }
    return n >= 3 && lo > 0 && hi >= 2 * lo;
  }

  std::pair<double, double> fit(const std::vector<int>& weights) const {
    const bool free = latency_free(weights);
    LinearProblem p;
    for (std::size_t i = 0; i < x.size(); ++i) p.rows.push_back({1.0, x[i]});
    p.y = y;
    p.prior = {prior_latency, 1 / prior_bandwidth};
    p.lo = {free ? 0.0 : prior_latency, 1 / 1e13};
    p.hi = {free ? 0.1 : prior_latency, 1 / 1e6};
    const auto beta = solve_least_squares(p, weights).beta;
    return {beta[0], 1 / beta[1]};
  }
};

// --------------------------------------------------------------- bootstrap

// Fits once on every row and `resamples` times on bootstrap resamples; `fit` maps row weights to
// the parameter values. Each FittedValue gets its value and the 2.5–97.5 % percentiles.
std::vector<FittedValue> with_intervals(
    std::size_t rows, int resamples, std::mt19937_64& engine,
    const std::function<std::vector<double>(const std::vector<int>&)>& fit) {
  const std::vector<double> point = fit({});
  std::vector<std::vector<double>> draws(point.size());
  for (int b = 0; b < resamples; ++b) {
    const auto values = fit(bootstrap_weights(rows, engine));
    for (std::size_t j = 0; j < values.size(); ++j) draws[j].push_back(values[j]);
  }
  std::vector<FittedValue> out;
  for (std::size_t j = 0; j < point.size(); ++j) {
    FittedValue v{point[j], point[j], point[j], static_cast<int>(rows)};
    if (resamples > 0) {
      v.low = quantile(draws[j], 0.025);
      v.high = quantile(draws[j], 0.975);
    }
    out.push_back(v);
  }
  return out;
}

// Latency and bandwidth of one affine fit with their intervals, both reported; the latency is
// empty where it was held at its prior (one message size).
struct AffineResult {
  std::optional<FittedValue> latency;
  FittedValue bandwidth;
};

AffineResult fit_affine(const AffineFit& f, const std::string& bandwidth_name,
                        const std::string& latency_name, const char* held_note, int bootstrap,
                        std::mt19937_64& engine, std::vector<ParameterReport>& report) {
  const auto v = with_intervals(f.x.size(), bootstrap, engine, [&f](const std::vector<int>& w) {
    const auto [latency, bw] = f.fit(w);
    return std::vector<double>{latency, bw};
  });
  AffineResult r{v[0], v[1]};
  report.push_back({bandwidth_name, "B/s", f.prior_bandwidth, r.bandwidth, {}});
  ParameterReport latency{latency_name, "s", f.prior_latency, r.latency, {}};
  if (!f.latency_free()) {
    r.latency.reset();
    latency.fitted.reset();
    latency.note = held_note;
  }
  report.push_back(latency);
  return r;
}

// --------------------------------------------------------------- errors

ErrorPair error_of(const std::vector<double>& measured, const std::vector<double>& before,
                   const std::vector<double>& after) {
  ErrorPair e;
  double total = 0, db = 0, da = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    total += measured[i];
    db += std::fabs(before[i] - measured[i]);
    da += std::fabs(after[i] - measured[i]);
  }
  e.count = static_cast<int>(measured.size());
  if (total > 0) {
    e.before = 100 * db / total;
    e.after = 100 * da / total;
  }
  return e;
}

std::vector<ErrorRow> errors(const SampleSet& set, const std::vector<TimeNs>& before,
                             const std::vector<TimeNs>& after, TimeNs step_before,
                             TimeNs step_after) {
  std::vector<ErrorRow> rows;
  const auto row = [&](const std::string& name, const std::function<bool(SampleClass)>& take) {
    ErrorRow r{name, {}, {}};
    for (bool held : {false, true}) {
      std::vector<double> m, b, a;
      for (std::size_t i = 0; i < set.samples.size(); ++i) {
        const auto& s = set.samples[i];
        if (s.held_out != held || !take(s.cls) || before[i] < 0 || after[i] < 0) continue;
        m.push_back(seconds(s.measured));
        b.push_back(seconds(before[i]));
        a.push_back(seconds(after[i]));
      }
      (held ? r.held_out : r.fitted) = error_of(m, b, a);
    }
    if (r.fitted.count + r.held_out.count > 0) rows.push_back(r);
  };
  for (auto cls : {SampleClass::compute, SampleClass::collective, SampleClass::host_copy})
    row(std::string(to_string(cls)), [cls](SampleClass c) { return c == cls; });
  row("all ops", [](SampleClass) { return true; });
  // Step time: a run's first iteration has no previous one to start from, so it is left out
  // when the run has others.
  std::map<int, int> per_run;
  for (const auto& s : set.steps) ++per_run[s.run];
  ErrorRow step{"step time", {}, {}};
  for (bool held : {false, true}) {
    std::vector<double> m, b, a;
    std::map<int, bool> first_seen;
    for (const auto& s : set.steps) {
      const bool first = !first_seen[s.run];
      first_seen[s.run] = true;
      if (s.held_out != held || (first && per_run[s.run] > 1)) continue;
      m.push_back(seconds(s.time));
      b.push_back(seconds(step_before));
      a.push_back(seconds(step_after));
    }
    (held ? step.held_out : step.fitted) = error_of(m, b, a);
  }
  rows.push_back(step);
  return rows;
}

std::string shape_name(OpKind kind, int ranks, int nodes) {
  return fmt::format("{} {} ranks {} node{}", to_string(kind), ranks, nodes, nodes == 1 ? "" : "s");
}

}  // namespace

namespace {

// The median of `samples` (ns) in seconds, with the 95 % interval of the order statistics around
// it (ranks n/2 ∓ 1.96·√n/2, distribution-free); nullopt below 5 samples.
std::optional<FittedValue> median_with_interval(std::vector<TimeNs> samples) {
  constexpr std::size_t kMinSamples = 5;
  if (samples.size() < kMinSamples) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  const double half = 1.96 * std::sqrt(n) / 2;
  const auto at = [&](double rank) {
    const auto i = static_cast<std::size_t>(std::clamp(rank, 0.0, n - 1));
    return seconds(samples[i]);
  };
  FittedValue v;
  v.value = at(std::floor((n - 1) / 2));
  v.low = at(std::floor(n / 2 - half));
  v.high = at(std::ceil(n / 2 + half) - 1);
  v.samples = static_cast<int>(samples.size());
  return v;
}

}  // namespace

CalibrationResult calibrate(const Scenario& scenario, const std::vector<Timeline>& measured,
                            const std::vector<std::string>& names,
                            const CalibrateOptions& options) {
  CalibrationResult result;
  const PipelineResult prior_run = simulate_scenario(scenario);
  const Schedule& schedule = prior_run.schedule;
  const CostModel prior(scenario);
  result.samples = match_samples(prior_run.timeline(), measured, options.holdout,
                                 contention_facts(schedule, prior));
  const SampleSet& set = result.samples;
  if (set.samples.empty()) {
    throw ValidationError({Problem{names.empty() ? std::string() : names.front(), "",
                                   "no measured op matches the scenario's schedule (iteration, "
                                   "phase, group and kind)",
                                   "timelines or traces of a run of this scenario"}});
  }
  Calibration cal = scenario.cluster.calibration ? *scenario.cluster.calibration : Calibration{};
  cal.scenario = scenario.source.empty() ? scenario.model.name : scenario.source;
  cal.measured = names;
  cal.version = std::string(shardscope_version());
  std::mt19937_64 engine(options.seed);

  // Compute.
  ComputeFitter compute(compute_rows(set, schedule, prior), prior);
  compute.decide();
  const auto fitted =
      with_intervals(compute.rows().size(), compute.rows().empty() ? 0 : options.bootstrap, engine,
                     [&](const std::vector<int>& w) {
                       if (compute.rows().empty()) return std::vector<double>{};
                       const ComputeFit f = compute.fit(w);
                       return std::vector<double>{1 / f.beta[kMatmul], 1 / f.beta[kAttention],
                                                  1 / f.beta[kHbm], f.beta[kContention], f.h};
                     });
  struct Named {
    const char* name;
    std::optional<FittedValue> Calibration::*field;
    bool free;
    const char* unit;
  };
  const Named compute_params[] = {
      {"matmul efficiency", &Calibration::matmul_efficiency, compute.is_free(kMatmul), ""},
      {"attention efficiency", &Calibration::attention_efficiency, compute.is_free(kAttention), ""},
      {"HBM efficiency", &Calibration::hbm_efficiency, compute.is_free(kHbm), ""},
      {"contention scale", &Calibration::contention_scale, compute.is_free(kContention), "×"},
      {"half-efficiency size", &Calibration::half_efficiency_flops, compute.searches_h(), "FLOPs"},
  };
  const double priors[] = {1 / compute.prior()[kMatmul], 1 / compute.prior()[kAttention],
                           1 / compute.prior()[kHbm], compute.prior()[kContention],
                           compute.prior_h()};
  for (std::size_t j = 0; j < std::size(compute_params); ++j) {
    const auto& p = compute_params[j];
    ParameterReport r{p.name, p.unit, priors[j], std::nullopt, {}};
    if (p.free && !fitted.empty()) {
      r.fitted = fitted[j];
      cal.*p.field = fitted[j];
    } else {
      r.note = compute.rows().empty() ? "no compute samples"
               : j == 4               ? "not determined: the curve moves under 1 % of the time"
               : j == kContention     ? "not determined: too little compute overlaps a collective"
                                      : "not determined: under 1 % of the measured time";
    }
    result.parameters.push_back(r);
  }

  // Collectives, per communicator shape.
  struct Shape {
    AffineFit fit;
    std::vector<Bytes> sizes;  // S of each sample: the prior latency is NCCL's at the median
  };
  std::map<std::tuple<OpKind, int, int>, Shape> shapes;
  for (const auto& s : set.samples) {
    if (s.cls != SampleClass::collective || s.held_out || s.ops.size() != 1) continue;
    const Op& op = schedule.ops[static_cast<std::size_t>(s.ops.front())];
    const auto& comm = schedule.communicators[static_cast<std::size_t>(op.comm)];
    if (comm.size < 2 || op.bytes <= 0 || op.fixed_time) continue;
    if (s.measured_bytes > 0 && std::fabs(static_cast<double>(s.measured_bytes - op.bytes)) >
                                    0.01 * static_cast<double>(op.bytes)) {
      ++result.bytes_mismatches;
    }
    auto& shape = shapes[{op.kind, comm.size, comm.nodes}];
    shape.fit.x.push_back(bus_bytes(op.kind, op.bytes, comm.size));
    shape.fit.y.push_back(seconds(s.measured));
    shape.sizes.push_back(op.bytes);
  }
  for (auto& [key, shape] : shapes) {
    const auto [kind, ranks, nodes] = key;
    AffineFit& f = shape.fit;
    const auto& model = prior.collectives();
    std::sort(shape.sizes.begin(), shape.sizes.end());
    const Bytes median_bytes = shape.sizes[shape.sizes.size() / 2];
    f.prior_latency = seconds(model.estimate(kind, median_bytes, ranks, nodes).latency);
    f.prior_bandwidth = model.bus_bandwidth(kind, ranks, nodes);
    if (const auto* old = cal.collective(kind, ranks, nodes)) {
      f.prior_latency = old->latency.value;
      f.prior_bandwidth = old->busbw.value;
    }
    const std::string name = shape_name(kind, ranks, nodes);
    if (f.x.size() < 2) {  // one message fixes no line: the shape keeps NCCL's model
      const std::string why = "not determined: 1 sample, 2 needed";
      result.parameters.push_back({name + " busbw", "B/s", f.prior_bandwidth, std::nullopt, why});
      result.parameters.push_back({name + " latency", "s", f.prior_latency, std::nullopt, why});
      continue;
    }
    const AffineResult r =
        fit_affine(f, name + " busbw", name + " latency", "held: one message size",
                   options.bootstrap, engine, result.parameters);
    const CollectiveCalibration c{
        kind, ranks, nodes,
        r.latency.value_or(FittedValue{f.prior_latency, f.prior_latency, f.prior_latency, 0}),
        r.bandwidth};
    std::erase_if(cal.collectives, [&c](const CollectiveCalibration& x) {
      return x.kind == c.kind && x.ranks == c.ranks && x.nodes == c.nodes;
    });
    cal.collectives.push_back(c);
  }

  // Host↔device copies.
  AffineFit pcie;
  for (const auto& s : set.samples) {
    if (s.cls != SampleClass::host_copy || s.held_out || s.ops.size() != 1) continue;
    pcie.x.push_back(static_cast<double>(schedule.ops[static_cast<std::size_t>(s.ops[0])].bytes));
    pcie.y.push_back(seconds(s.measured));
  }
  const auto& link = prior.cluster().pcie;
  pcie.prior_latency = seconds(link.latency);
  pcie.prior_bandwidth =
      scenario.fsdp.cpu_offload.pin_memory ? link.pinned_bandwidth : link.pageable_bandwidth;
  if (cal.pcie_bandwidth) pcie.prior_bandwidth = cal.pcie_bandwidth->value;
  if (pcie.x.size() >= 2) {
    const AffineResult r = fit_affine(pcie, "PCIe bandwidth", "PCIe latency", "held: one copy size",
                                      options.bootstrap, engine, result.parameters);
    cal.pcie_bandwidth = r.bandwidth;
    if (r.latency) cal.pcie_latency = r.latency;
  }
  // The CPU's issue costs: the median of the launch calls and of the FSDP hooks (less their
  // launches) the measured runs recorded. A median, not a mean: a descheduled thread or a first
  // call's lazy initialisation makes a few samples hundreds of times longer.
  const auto host_parameter = [&](const char* name, std::vector<TimeNs> HostOverheads::*member,
                                  TimeNs prior_value, std::optional<FittedValue>& out) {
    std::vector<TimeNs> pooled;
    for (const Timeline& t : measured) {
      const auto& v = t.host.*member;
      pooled.insert(pooled.end(), v.begin(), v.end());
    }
    out = median_with_interval(std::move(pooled));
    result.parameters.push_back(
        {name, "s", seconds(prior_value), out,
         out ? "" : "not fitted: the runs recorded no such CPU ranges (a Kineto trace has them)"});
  };
  host_parameter("launch overhead", &HostOverheads::launch, prior.cluster().cpu.launch_overhead,
                 cal.launch_overhead);
  host_parameter("FSDP hook overhead", &HostOverheads::fsdp_hook,
                 prior.cluster().cpu.fsdp_hook_overhead, cal.fsdp_hook_overhead);
  std::sort(cal.collectives.begin(), cal.collectives.end(),
            [](const CollectiveCalibration& a, const CollectiveCalibration& b) {
              return std::tie(a.kind, a.ranks, a.nodes) < std::tie(b.kind, b.ranks, b.nodes);
            });

  // Before and after, through the simulator.
  Scenario calibrated = scenario;
  calibrated.cluster.calibration = std::make_shared<const Calibration>(cal);
  const PipelineResult after_run = simulate_scenario(calibrated);
  result.step_before = prior_run.summary.step_time;
  result.step_after = after_run.summary.step_time;
  result.errors =
      errors(set, simulated_times(set, prior_run.timeline()),
             simulated_times(set, after_run.timeline()), result.step_before, result.step_after);
  result.calibration = std::move(cal);
  return result;
}

std::string calibration_report(const CalibrationResult& r) {
  const SampleSet& s = r.samples;
  std::string out = fmt::format(
      "calibrated {} on {} measured run{}: {} iterations ({} fitted, {} held out), {} samples\n",
      r.calibration.scenario, r.calibration.measured.size(),
      r.calibration.measured.size() == 1 ? "" : "s", s.iterations,
      s.iterations - s.held_out_iterations, s.held_out_iterations, s.samples.size());
  if (s.unmatched_ops > 0) {
    out += fmt::format("  {} measured ops ({}) match nothing in the schedule and are left out\n",
                       s.unmatched_ops, format_duration(s.unmatched_time));
  }
  if (r.bytes_mismatches > 0) {
    out += fmt::format(
        "  {} collectives moved other bytes than the schedule's: is this the scenario that ran?\n",
        r.bytes_mismatches);
  }
  const auto value = [](double v, const std::string& unit) {
    if (unit == "B/s") return format_bandwidth(v);
    if (unit == "s") return format_duration(static_cast<TimeNs>(std::llround(v * 1e9)));
    if (unit == "FLOPs") return fmt::format("{:.3g} FLOPs", v);
    if (unit == "×") return fmt::format("{:.2f}×", v);
    return fmt::format("{:.1f} %", 100 * v);
  };
  out += fmt::format("\n  {:<36}{:>14}{:>14}{:>30}{:>9}\n", "parameter", "prior", "fitted",
                     "95 % interval", "samples");
  for (const auto& p : r.parameters) {
    if (!p.fitted) {
      out += fmt::format("  {:<36}{:>14}  {}\n", p.name, value(p.prior, p.unit), p.note);
      continue;
    }
    out += fmt::format(
        "  {:<36}{:>14}{:>14}{:>30}{:>9}\n", p.name, value(p.prior, p.unit),
        value(p.fitted->value, p.unit),
        fmt::format("{} – {}", value(p.fitted->low, p.unit), value(p.fitted->high, p.unit)),
        p.fitted->samples);
  }
  out += fmt::format("\n  simulated step time            {} before, {} after\n",
                     format_duration(r.step_before), format_duration(r.step_after));
  out += fmt::format("  error Σ|simulated − measured| / Σ measured\n");
  out += fmt::format("  {:<16}{:>28}{:>28}\n", "", "fitted iterations", "held-out iterations");
  const auto pair = [](const ErrorPair& e) {
    if (e.count == 0) return std::string("–");
    return fmt::format("{:.1f} % → {:.1f} % ({})", e.before, e.after, e.count);
  };
  for (const auto& e : r.errors)
    out += fmt::format("  {:<16}{:>28}{:>28}\n", e.name, pair(e.fitted), pair(e.held_out));
  return out;
}

}  // namespace shardscope::sim
