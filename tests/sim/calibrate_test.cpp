// Calibration: the least-squares core against closed forms, the calibration file's round trip and
// refusals, and the whole fit recovering known parameters from runs the simulator made with them.
#include "shardscope/sim/calibrate.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "shardscope/core/compare.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/engine.hpp"
#include "shardscope/sim/least_squares.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope {
namespace {

using sim::LinearProblem;

// ------------------------------------------------------------------ least squares

LinearProblem line(const std::vector<double>& x, const std::vector<double>& y) {
  LinearProblem p;
  for (double v : x) p.rows.push_back({1.0, v});
  p.y = y;
  p.prior = {0, 0};
  p.lo = {-1e9, -1e9};
  p.hi = {1e9, 1e9};
  p.ridge = 0;
  return p;
}

TEST(LeastSquares, RecoversAnExactLine) {
  const auto fit = sim::solve_least_squares(line({1, 2, 3, 4}, {5, 8, 11, 14}));  // 2 + 3x
  EXPECT_NEAR(fit.beta[0], 2, 1e-9);
  EXPECT_NEAR(fit.beta[1], 3, 1e-9);
  EXPECT_NEAR(fit.sse, 0, 1e-12);
}

TEST(LeastSquares, WeightsCountRowsAndABoundRefitsTheRest) {
  // Weighted: rows 0 and 1 only → the line through (0, 1) and (1, 3).
  auto p = line({0, 1, 2}, {1, 3, 100});
  auto fit = sim::solve_least_squares(p, {1, 1, 0});
  EXPECT_NEAR(fit.beta[0], 1, 1e-9);
  EXPECT_NEAR(fit.beta[1], 2, 1e-9);
  // y = −4 + 3x would need a negative intercept; held at 0 the slope is Σxy/Σx² = 3 − 4·6/14.
  p = line({1, 2, 3}, {-1, 2, 5});
  p.lo[0] = 0;
  fit = sim::solve_least_squares(p);
  EXPECT_DOUBLE_EQ(fit.beta[0], 0);
  EXPECT_NEAR(fit.beta[1], (-1 + 4 + 15) / 14.0, 1e-12);
}

TEST(LeastSquares, TheRidgeHoldsAnUndeterminedParameterAtItsPrior) {
  // The second column is all zero: nothing determines it, so it stays at its prior.
  LinearProblem p;
  p.rows = {{1, 0}, {2, 0}, {3, 0}};
  p.y = {2, 4, 6};
  p.prior = {0, 7};
  p.lo = {0, 0};
  p.hi = {10, 10};
  const auto fit = sim::solve_least_squares(p);
  EXPECT_NEAR(fit.beta[0], 2, 1e-2);  // pulled by 0.1 % at most
  EXPECT_DOUBLE_EQ(fit.beta[1], 7);
}

TEST(LeastSquares, BootstrapDrawsAreDeterministicAndQuantilesNearestRank) {
  std::mt19937_64 a(42), b(42);
  const auto wa = sim::bootstrap_weights(50, a), wb = sim::bootstrap_weights(50, b);
  EXPECT_EQ(wa, wb);
  int total = 0;
  for (int w : wa) total += w;
  EXPECT_EQ(total, 50);
  std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(sim::quantile(v, 0.025), 1);
  EXPECT_DOUBLE_EQ(sim::quantile(v, 0.5), 3);
  EXPECT_DOUBLE_EQ(sim::quantile(v, 0.975), 5);
}

// ------------------------------------------------------------------ the file

Calibration sample_calibration() {
  Calibration c;
  c.scenario = "s.yaml";
  c.measured = {"a.json", "b.json.gz"};
  c.version = "0.1.0";
  c.matmul_efficiency = FittedValue{0.55, 0.54, 0.56, 100};
  c.contention_scale = FittedValue{1.3, 1.1, 1.5, 100};
  c.pcie_bandwidth = FittedValue{20e9, 19e9, 21e9, 8};
  c.collectives.push_back(
      {OpKind::all_gather, 8, 1, {3e-5, 2e-5, 4e-5, 64}, {2.4e11, 2.3e11, 2.5e11, 64}});
  return c;
}

TEST(CalibrationFile, RoundTripsWhatItHasAndOnlyThat) {
  const Calibration c = sample_calibration();
  const std::string text = calibration_to_json(c);
  const Calibration back = calibration_from_json(text, "cal.json");
  EXPECT_EQ(calibration_to_json(back), text);
  EXPECT_FALSE(back.attention_efficiency.has_value());
  EXPECT_FALSE(back.pcie_latency.has_value());
  ASSERT_NE(back.collective(OpKind::all_gather, 8, 1), nullptr);
  EXPECT_EQ(back.collective(OpKind::all_gather, 8, 2), nullptr);
  EXPECT_DOUBLE_EQ(back.collective(OpKind::all_gather, 8, 1)->busbw.value, 2.4e11);
}

TEST(CalibrationFile, RefusesValuesTheCostModelCannotUse) {
  std::string text = calibration_to_json(sample_calibration());
  const auto replace = [&](const std::string& from, const std::string& to) {
    auto copy = text;
    copy.replace(copy.find(from), from.size(), to);
    return copy;
  };
  const auto problems = [](const std::string& json) {
    try {
      calibration_from_json(json, "cal.json");
    } catch (const ValidationError& e) {
      std::string keys;
      for (const auto& p : e.problems()) keys += p.key + ";";
      return keys;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(problems(replace("\"value\": 0.55", "\"value\": 1.5")),
            "compute.matmul_efficiency.value;");
  EXPECT_EQ(problems(replace("\"all_gather\"", "\"forward\"")), "collectives[0].kind;");
  EXPECT_EQ(problems(replace("\"ranks\": 8", "\"ranks\": 1")), "collectives[0].ranks;");
  EXPECT_EQ(problems(replace("shardscope.calibration/2", "shardscope.timeline/2")), "schema;");
  // Version 1's compute_slowdown means what the SM model replaced: refused, not misread.
  EXPECT_EQ(problems(replace("shardscope.calibration/2", "shardscope.calibration/1")), "schema;");
  EXPECT_EQ(problems(replace("\"value\": 1.3", "\"value\": 5")), "compute.contention_scale.value;");
  // Physical ranges: no link moves 1e-300 B/s (it once priced a step in centuries, exit 0).
  EXPECT_EQ(problems(replace("\"value\": 240000000000.0", "\"value\": 1e-300")),
            "collectives[0].busbw_bytes_per_s.value;");
}

// ------------------------------------------------------------------ the cost model reads it

constexpr const char* kScenario = R"(
model: {preset: llama3.1-8b, layers: 4}
cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8}
training: {seq_len: 4096, micro_batch: 1, iterations: 4}
fsdp: {api: fsdp2, reshard_after_forward: true, mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}
)";

TEST(CalibrationFile, TheCostModelPricesWhatItFitted) {
  Scenario s = scenario_from_text(kScenario);
  const sim::CostModel before(s);
  s.cluster.calibration = std::make_shared<const Calibration>(sample_calibration());
  const sim::CostModel after(s);
  // matmul efficiency 0.55 instead of the preset's: the GEMM term scales by e_old / 0.55.
  const Flops big = 1e13;
  const double ratio = static_cast<double>(after.compute_time(big, 0) - 4000) /
                       static_cast<double>(before.compute_time(big, 0) - 4000);
  EXPECT_NEAR(ratio, before.cluster().gpu.matmul_efficiency / 0.55, 1e-6);
  // The fitted all-gather shape: latency + bus bytes / busbw, exactly.
  const Bytes bytes = 800'000'000;
  const auto est = after.collectives().estimate(OpKind::all_gather, bytes, 8, 1);
  EXPECT_EQ(est.time, static_cast<TimeNs>(std::llround((3e-5 + 7e8 / 2.4e11) * 1e9)));
  // A shape it did not fit keeps NCCL's model.
  EXPECT_EQ(after.collectives().estimate(OpKind::reduce_scatter, bytes, 8, 1).time,
            before.collectives().estimate(OpKind::reduce_scatter, bytes, 8, 1).time);
  // The fitted contention scale replaces the preset's.
  EXPECT_DOUBLE_EQ(before.contention_scale(), before.cluster().gpu.contention_scale);
  EXPECT_DOUBLE_EQ(after.contention_scale(), 1.3);
}

TEST(CalibrationFile, TheContentionScaleComesFromTheScenarioUnlessGiven) {
  const Scenario s = scenario_from_text(R"(
model: {preset: llama3.1-8b, layers: 4}
cluster: {preset: h100-sxm-80gb, nodes: 1, gpus_per_node: 8, gpu: {contention_scale: 2}}
)");
  EXPECT_DOUBLE_EQ(sim::CostModel(s).contention_scale(), 2.0);
  EXPECT_DOUBLE_EQ(sim::CostModel(s, {}, sim::InterferenceParams{0.5}).contention_scale(), 0.5);
}

// ------------------------------------------------------------------ the fit

// A "measured" run: the scenario simulated with known parameters the calibration must find.
struct Truth {
  double matmul = 0.42;
  double attention = 0.30;
  double hbm = 0.70;
  double contention = 1.6;  // × the SM model's loss beside collectives
  double nvlink_gbps = 300;
};

Timeline measured_run(const Truth& t) {
  Scenario s = scenario_from_text(kScenario);
  s.cluster.gpu.matmul_efficiency = t.matmul;
  s.cluster.gpu.attention_efficiency = t.attention;
  s.cluster.nvlink.bandwidth = t.nvlink_gbps * 1e9;
  sim::ComputeModelParams compute;
  compute.hbm_efficiency = t.hbm;
  const sim::CostModel costs(s, compute, sim::InterferenceParams{t.contention});
  sim::SimOptions options;
  options.allocator = s.allocator;
  Timeline measured = sim::simulate(lower(s), costs, options).timeline;
  measured.source = "measured";
  return measured;
}

// What an importer makes of it: each compute op as three kernels, none with a schedule op id.
Timeline as_kernels(const Timeline& t) {
  Timeline out = t;
  out.ops.clear();
  for (auto op : t.ops) {
    op.op = kNone;
    const bool compute =
        op.kind == OpKind::forward || op.kind == OpKind::backward || op.kind == OpKind::recompute;
    if (!compute || op.duration() < 3) {
      out.ops.push_back(op);
      continue;
    }
    const TimeNs third = op.duration() / 3, end = op.end;
    for (int k = 0; k < 3; ++k) {
      op.start = op.start + (k == 0 ? 0 : third);
      op.end = k == 2 ? end : op.start + third;
      out.ops.push_back(op);
    }
  }
  sort_timeline_ops(out.ops);
  return out;
}

TEST(Calibrate, RecoversTheParametersARunWasMadeWith) {
  const Truth truth;
  const Scenario scenario = scenario_from_text(kScenario);
  const auto r = sim::calibrate(scenario, {measured_run(truth)}, {"measured.json"});
  const Calibration& c = r.calibration;
  ASSERT_TRUE(c.matmul_efficiency && c.attention_efficiency && c.hbm_efficiency &&
              c.contention_scale);
  EXPECT_NEAR(c.matmul_efficiency->value, truth.matmul, 0.01 * truth.matmul);
  EXPECT_NEAR(c.attention_efficiency->value, truth.attention, 0.02 * truth.attention);
  EXPECT_NEAR(c.hbm_efficiency->value, truth.hbm, 0.02 * truth.hbm);
  EXPECT_NEAR(c.contention_scale->value, truth.contention, 0.02 * truth.contention);
  EXPECT_LE(c.matmul_efficiency->low, c.matmul_efficiency->value);
  EXPECT_GE(c.matmul_efficiency->high, c.matmul_efficiency->value);
  // Layers are one GEMM size apart from the head: the efficiency curve is not determined.
  EXPECT_FALSE(c.half_efficiency_flops.has_value());
  // NVLink at 300 GB/s reaches the model's 80 % of it for large all-gathers and reduce-scatters.
  for (OpKind kind : {OpKind::all_gather, OpKind::reduce_scatter}) {
    const auto* fitted = c.collective(kind, 8, 1);
    ASSERT_NE(fitted, nullptr) << to_string(kind);
    EXPECT_NEAR(fitted->busbw.value, 0.8 * truth.nvlink_gbps * 1e9, 0.01 * 240e9);
  }
  // Three iterations fitted, the fourth held out; the error shrinks on both.
  EXPECT_EQ(r.samples.iterations, 4);
  EXPECT_EQ(r.samples.held_out_iterations, 1);
  for (const auto& e : r.errors) {
    if (e.fitted.count > 0) {
      EXPECT_LT(e.fitted.after, e.fitted.before) << e.name;
      EXPECT_LT(e.fitted.after, 1.0) << e.name;  // percent
    }
    if (e.held_out.count > 0) {
      EXPECT_LT(e.held_out.after, 1.0) << e.name;
    }
  }
}

TEST(Calibrate, TheHostOverheadsAreTheMediansOfWhatTheRunsRecorded) {
  // Two runs' launch calls, 5.0–7.0 us with a tail of descheduled calls at 2 ms, and FSDP hooks
  // of 40–49 us less their launches; a simulated run alone records none.
  const Scenario scenario = scenario_from_text(kScenario);
  EXPECT_FALSE(
      sim::calibrate(scenario, {measured_run({})}, {"m.json"}).calibration.launch_overhead);
  std::vector<Timeline> runs{measured_run({}), measured_run({})};
  std::vector<TimeNs> launches, hooks;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const auto shift = static_cast<TimeNs>(r);
    for (TimeNs i = 0; i < 500; ++i) {
      runs[r].host.launch.push_back(i % 50 == 0 ? 2'000'000 : 5'000 + 200 * ((i + 3 * shift) % 11));
      if (i < 100) runs[r].host.fsdp_hook.push_back(40'000 + 1'000 * ((i + shift) % 10));
    }
    launches.insert(launches.end(), runs[r].host.launch.begin(), runs[r].host.launch.end());
    hooks.insert(hooks.end(), runs[r].host.fsdp_hook.begin(), runs[r].host.fsdp_hook.end());
  }
  const auto median_s = [](std::vector<TimeNs> v) {
    std::sort(v.begin(), v.end());
    return static_cast<double>(v[(v.size() - 1) / 2]) * 1e-9;
  };
  const auto r = sim::calibrate(scenario, runs, {"a.json", "b.json"});
  const Calibration& c = r.calibration;
  ASSERT_TRUE(c.launch_overhead && c.fsdp_hook_overhead);
  EXPECT_DOUBLE_EQ(c.launch_overhead->value, median_s(launches));  // the tail does not move it
  EXPECT_LT(c.launch_overhead->value, 7.1e-6);
  EXPECT_EQ(c.launch_overhead->samples, 1000);
  EXPECT_LE(c.launch_overhead->low, c.launch_overhead->value);
  EXPECT_GE(c.launch_overhead->high, c.launch_overhead->value);
  EXPECT_DOUBLE_EQ(c.fsdp_hook_overhead->value, median_s(hooks));
  // The cost model charges them: one launch per op, plus a hook per all-gather.
  Scenario calibrated = scenario;
  calibrated.cluster.calibration = std::make_shared<const Calibration>(c);
  const sim::CostModel costs(calibrated);
  const Schedule schedule = lower(calibrated);
  for (const Op& op : schedule.ops) {
    if (op.kind != OpKind::all_gather) continue;
    EXPECT_EQ(costs.cost(schedule, op).cpu, std::llround(c.launch_overhead->value * 1e9) +
                                                std::llround(c.fsdp_hook_overhead->value * 1e9));
    break;
  }
  // And the file keeps them.
  const Calibration back = calibration_from_json(calibration_to_json(c), "cal.json");
  ASSERT_TRUE(back.launch_overhead.has_value());
  EXPECT_DOUBLE_EQ(back.launch_overhead->value, c.launch_overhead->value);
}

TEST(Calibrate, ACalibratedResimulationComparesCloserToItsMeasuredRun) {
  const Timeline measured = measured_run({});
  Scenario scenario = scenario_from_text(kScenario);
  const auto r = sim::calibrate(scenario, {measured}, {"measured.json"});
  const auto before = sim::simulate_scenario(scenario);
  scenario.cluster.calibration = std::make_shared<const Calibration>(r.calibration);
  const auto after = sim::simulate_scenario(scenario);
  const auto step_delta = [&](const Timeline& predicted) {
    const auto c = analysis::compare(predicted, measured);
    return std::fabs(c.metrics[0].b.value() - c.metrics[0].a.value()) /
           c.metrics[0].b.value();  // step time
  };
  EXPECT_GT(step_delta(before.timeline()), 0.05);
  EXPECT_LT(step_delta(after.timeline()), 0.005);
  EXPECT_LT(step_delta(after.timeline()), step_delta(before.timeline()) / 10);
}

TEST(Calibrate, KernelLevelTracesFitAsTheirOpsDo) {
  const Timeline measured = measured_run({});
  const Scenario scenario = scenario_from_text(kScenario);
  const auto whole = sim::calibrate(scenario, {measured}, {"m"});
  const auto split = sim::calibrate(scenario, {as_kernels(measured)}, {"m"});
  ASSERT_TRUE(split.calibration.matmul_efficiency.has_value());
  EXPECT_NEAR(split.calibration.matmul_efficiency->value,
              whole.calibration.matmul_efficiency->value, 1e-6);
  EXPECT_NEAR(split.calibration.contention_scale->value, whole.calibration.contention_scale->value,
              1e-6);
}

TEST(Calibrate, WritesOnlyWhatTheRunsDetermineAndIsDeterministic) {
  Timeline measured = measured_run({});
  std::erase_if(measured.ops, [](const TimelineOp& op) {
    return op.kind != OpKind::all_gather && op.kind != OpKind::reduce_scatter;
  });
  const Scenario scenario = scenario_from_text(kScenario);
  const auto a = sim::calibrate(scenario, {measured}, {"m"});
  EXPECT_FALSE(a.calibration.matmul_efficiency.has_value());
  EXPECT_FALSE(a.calibration.contention_scale.has_value());
  EXPECT_EQ(a.calibration.collectives.size(), 2U);
  const auto b = sim::calibrate(scenario, {measured}, {"m"});
  EXPECT_EQ(calibration_to_json(a.calibration), calibration_to_json(b.calibration));
  EXPECT_EQ(sim::calibration_report(a), sim::calibration_report(b));
}

TEST(Calibrate, OneSampleOfACollectiveShapeFitsNothing) {
  // One reduce-scatter left: a line needs two messages, so the shape keeps NCCL's model.
  Timeline measured = measured_run({});
  bool kept = false;
  std::erase_if(measured.ops, [&](const TimelineOp& op) {
    if (op.kind == OpKind::all_gather) return false;
    if (op.kind == OpKind::reduce_scatter && !kept) return !(kept = true);
    return true;
  });
  const auto r = sim::calibrate(scenario_from_text(kScenario), {measured}, {"m"});
  EXPECT_NE(r.calibration.collective(OpKind::all_gather, 8, 1), nullptr);
  EXPECT_EQ(r.calibration.collective(OpKind::reduce_scatter, 8, 1), nullptr);
  const auto it = std::find_if(r.parameters.begin(), r.parameters.end(), [](const auto& p) {
    return p.name.starts_with("reduce_scatter") && p.name.ends_with("busbw");
  });
  ASSERT_NE(it, r.parameters.end());
  EXPECT_FALSE(it->fitted.has_value());
  EXPECT_EQ(it->note, "not determined: 1 sample, 2 needed");
}

TEST(Calibrate, RefusesRunsThatShareNothingWithTheSchedule) {
  Timeline other;
  other.ops.push_back({});
  other.ops.back().kind = OpKind::other;
  other.ops.back().end = 1000;
  EXPECT_THROW(sim::calibrate(scenario_from_text(kScenario), {other}, {"x.json"}), ValidationError);
}

}  // namespace
}  // namespace shardscope
