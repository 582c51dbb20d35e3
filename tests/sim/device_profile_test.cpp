// Device profiles: their JSON round trip and errors, coverage of a schedule, and the cost model
// pricing measured kernels at their measured times (beside collectives at their times measured
// beside held SMs) and the rest on the roofline.
#include "shardscope/core/device_profile.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/pipeline.hpp"

namespace shardscope {
namespace {

Scenario small() {
  return load_scenario(std::string(SHARDSCOPE_EXAMPLES_DIR) + "/llama3-8b-h100x8.yaml",
                       {"model.layers=2", "training.iterations=1"});
}

// Every GEMM and attention shape of `s` at `time` each, memory-bound kernels at `bandwidth`.
DeviceProfile profile_for(const Schedule& s, TimeNs time, double bandwidth) {
  DeviceProfile p;
  p.device = "test GPU";
  p.version = "test";
  p.memory_bandwidth = bandwidth;
  p.h2d_pinned = p.d2h_pinned = 20e9;
  p.h2d_pageable = p.d2h_pageable = 5e9;
  p.launch_overhead = 4000;
  p.event_overhead = 2000;
  for (const Kernel& k : distinct_shapes(s)) {
    if (const auto* g = std::get_if<Gemm>(&k.shape)) p.gemms.push_back({*g, time, std::nullopt});
    if (const auto* a = std::get_if<Attention>(&k.shape))
      p.attention.push_back({*a, time, std::nullopt});
  }
  return p;
}

// What a profile measured at `bandwidth` prices a memory-bound kernel at, its repeats included:
// one run's bytes at the measured bandwidth, over its kind's rate scale (an upcast's, a fused
// Adam step's; the profile measures the element-wise rate).
TimeNs profiled_memory_time(const sim::CostModel& costs, const Kernel& k, double bandwidth) {
  const auto one = std::llround(static_cast<double>(kernel_memory_bytes({k.label, 1, k.shape})) /
                                bandwidth * 1e9);
  return std::llround(static_cast<double>(one * k.repeat) / costs.memory_rate_scale(k));
}

TEST(DeviceProfile, JsonRoundTripsByteForByte) {
  const Schedule s = lower(small());
  const DeviceProfile p = profile_for(s, 12345, 2.5e12);
  ASSERT_FALSE(p.gemms.empty());
  ASSERT_FALSE(p.attention.empty());
  const std::string text = device_profile_to_json(p);
  const DeviceProfile back = device_profile_from_json(text, "p.json");
  EXPECT_EQ(device_profile_to_json(back), text);
  EXPECT_EQ(back.gemms.size(), p.gemms.size());
  EXPECT_EQ(back.gemms[0].shape, p.gemms[0].shape);
}

// Every GEMM and attention of `p` timed at `contended` beside `held` SMs.
DeviceProfile with_contended_times(DeviceProfile p, int held, TimeNs contended) {
  p.contended_sms = held;
  for (auto& g : p.gemms) g.contended_time = contended;
  for (auto& a : p.attention) a.contended_time = contended;
  return p;
}

TEST(DeviceProfile, ContendedTimesRoundTripAndAFirstSchemaFileStillReads) {
  const Schedule s = lower(small());
  DeviceProfile p = with_contended_times(profile_for(s, 12345, 2.5e12), 24, 15000);
  p.gemms[0].contended_time.reset();  // measured alone only
  const std::string text = device_profile_to_json(p);
  const DeviceProfile back = device_profile_from_json(text, "p.json");
  EXPECT_EQ(device_profile_to_json(back), text);
  EXPECT_EQ(back.contended_sms, 24);
  EXPECT_FALSE(back.gemms[0].contended_time.has_value());
  EXPECT_EQ(back.gemms[1].contended_time, 15000);
  EXPECT_EQ(back.attention[0].contended_time, 15000);
  const Kernel first_gemm{"g", 1, back.gemms[1].shape};
  EXPECT_EQ(measured_contended_time(back, first_gemm, 24), 15000);
  EXPECT_EQ(measured_contended_time(back, first_gemm, 16), std::nullopt);  // held another count
  EXPECT_EQ(measured_contended_time(back, {"g", 1, back.gemms[0].shape}, 24), std::nullopt);
  // shardscope.device_profile/1, as profile-device wrote it before contended times: they are
  // absent, none is made up.
  const DeviceProfile first = load_device_profile(std::string(SHARDSCOPE_TEST_DATA_DIR) +
                                                  "/device_profile_bandwidth_only.json");
  EXPECT_EQ(first.contended_sms, 0);
  EXPECT_GT(first.memory_bandwidth, 0);
}

// A contended time needs the SMs it was measured beside; no GPU has thousands of SMs.
TEST(DeviceProfile, ContendedTimesWithoutHeldSmsAreRefused) {
  const auto keys_of = [](std::string_view text) {
    std::vector<std::string> keys;
    try {
      (void)device_profile_from_json(text, "p.json");
    } catch (const ValidationError& e) {
      for (const auto& p : e.problems()) keys.push_back(p.key);
    }
    return keys;
  };
  const auto profile = [](std::string_view held, std::string_view contended) {
    return fmt::format(
        R"({{"schema": "shardscope.device_profile/2", "device": "x", "version": "v",
            "memory_bandwidth_bytes_per_s": 1e12, "h2d_pinned_bytes_per_s": 1e9,
            "d2h_pinned_bytes_per_s": 1e9, "h2d_pageable_bytes_per_s": 1e9,
            "d2h_pageable_bytes_per_s": 1e9, "launch_overhead_ns": 1, "event_overhead_ns": 1,
            "contended_sms": {},
            "gemms": [{{"m": 1, "n": 1, "k": 1, "batch": 1, "transpose_a": false,
                       "transpose_b": false, "input": "bf16", "output": "bf16", "time_ns": 5,
                       "contended_time_ns": {}}}],
            "attention": []}})",
        held, contended);
  };
  EXPECT_TRUE(keys_of(profile("16", "7")).empty());
  EXPECT_EQ(keys_of(profile("0", "7")), std::vector<std::string>{"gemms[0].contended_time_ns"});
  EXPECT_EQ(keys_of(profile("5000", "7")), std::vector<std::string>{"contended_sms"});
  EXPECT_EQ(keys_of(profile("16", "0")), std::vector<std::string>{"gemms[0].contended_time_ns"});
  EXPECT_EQ(keys_of(profile("-1", "7")), std::vector<std::string>{"contended_sms"});
}

TEST(DeviceProfile, BadFilesNameTheKey) {
  EXPECT_THROW(device_profile_from_json(R"({"schema": "shardscope.timeline/2"})", "p.json"),
               ValidationError);
  try {
    device_profile_from_json(
        R"({"schema": "shardscope.device_profile/1", "device": "x", "version": "v",
            "memory_bandwidth_bytes_per_s": -1, "h2d_pinned_bytes_per_s": 1e9,
            "d2h_pinned_bytes_per_s": 1e9, "h2d_pageable_bytes_per_s": 1e9,
            "d2h_pageable_bytes_per_s": 1e9, "launch_overhead_ns": 1, "event_overhead_ns": 1,
            "gemms": [{"m": 1, "n": 1, "k": 1, "batch": 1, "transpose_a": false,
                       "transpose_b": false, "input": "bf16", "output": "bf17", "time_ns": 5}],
            "attention": []})",
        "p.json");
    FAIL();
  } catch (const ValidationError& e) {
    std::vector<std::string> keys;
    for (const auto& p : e.problems()) keys.push_back(p.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"memory_bandwidth_bytes_per_s", "gemms[0].output"}));
  }
}

// Values no GPU measures are refused with their key and range: a kernel of 0 ns or 2^63-1 ns, a
// bandwidth of 1e-300 B/s, an overhead of 2 s (each once priced a step with exit 0).
TEST(DeviceProfile, ValuesOutsideWhatAGpuMeasuresAreRefused) {
  const std::string text =
      R"({"schema": "shardscope.device_profile/1", "device": "x", "version": "v",
          "memory_bandwidth_bytes_per_s": 1e-300, "h2d_pinned_bytes_per_s": 0,
          "d2h_pinned_bytes_per_s": 2e9, "h2d_pageable_bytes_per_s": 1e300,
          "d2h_pageable_bytes_per_s": 2e9, "launch_overhead_ns": 2000000000,
          "event_overhead_ns": 1,
          "gemms": [{"m": 1, "n": 1, "k": 1, "batch": 1, "transpose_a": false,
                     "transpose_b": false, "input": "bf16", "output": "bf16", "time_ns": 0},
                    {"m": 2, "n": 1, "k": 1, "batch": 1, "transpose_a": false,
                     "transpose_b": false, "input": "bf16", "output": "bf16",
                     "time_ns": 9223372036854775807}],
          "attention": []})";
  try {
    (void)device_profile_from_json(text, "p.json");
    FAIL();
  } catch (const ValidationError& e) {
    std::vector<std::string> keys;
    for (const auto& p : e.problems()) keys.push_back(p.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"memory_bandwidth_bytes_per_s",
                                              "h2d_pageable_bytes_per_s", "launch_overhead_ns",
                                              "gemms[0].time_ns", "gemms[1].time_ns"}));
  }
}

TEST(DeviceProfile, CoverageCountsOpsWhoseEveryKernelIsMeasured) {
  const Schedule s = lower(small());
  const ProfileCoverage none = profile_coverage(s, DeviceProfile{});
  EXPECT_GT(none.compute_ops, 0);
  EXPECT_EQ(none.covered_ops, 0);
  EXPECT_EQ(none.missing_shapes, static_cast<int>(distinct_shapes(s).size()));
  const ProfileCoverage all = profile_coverage(s, profile_for(s, 1000, 1e12));
  EXPECT_EQ(all.covered_ops, all.compute_ops);
  EXPECT_EQ(all.missing_shapes, 0);
  // Without a measured bandwidth, ops with memory-bound kernels are not fully covered.
  const ProfileCoverage shapes_only = profile_coverage(s, profile_for(s, 1000, 0));
  EXPECT_LT(shapes_only.covered_ops, shapes_only.compute_ops);
}

TEST(DeviceProfile, MeasuredKernelsCostTheirMeasuredTimes) {
  Scenario sc = small();
  const Schedule s = lower(sc);
  const TimeNs t = 250'000;
  const double bw = 2e12;
  sc.cluster.gpu.device_profile = std::make_shared<DeviceProfile>(profile_for(s, t, bw));
  const sim::CostModel costs(sc);
  int checked = 0, upcasts = 0;
  for (const Op& op : s.ops) {
    if (op.kernels == kNone) continue;  // the GPU optimizer step too: its kernel at the bandwidth
    TimeNs want = 0;
    for (const Kernel& k : op_kernels(s, op)) {
      if (k.kind() == KernelKind::gemm || k.kind() == KernelKind::attention) {
        want += t * k.repeat;
      } else {
        want += profiled_memory_time(costs, k, bw);
        upcasts += costs.memory_rate_scale(k) < 1;
      }
    }
    EXPECT_EQ(costs.cost(s, op).duration, want) << to_string(op.kind);
    ++checked;
  }
  EXPECT_GT(checked, 4);
  EXPECT_GT(upcasts, 0);  // logits.float()
  EXPECT_GT(std::count_if(s.ops.begin(), s.ops.end(),
                          [](const Op& op) { return op.kind == OpKind::optimizer_step; }),
            0);
}

// Beside collectives a measured kernel takes its time measured beside as many held SMs as the
// scenario's collectives hold; measured beside another count, its time alone stretched by the
// SMs' share; a contended time below the time alone is noise, priced at the time alone.
TEST(DeviceProfile, KernelsBesideCollectivesTakeTheirContendedTimes) {
  Scenario sc = small();
  const Schedule s = lower(sc);
  const TimeNs t = 250'000;
  const double bw = 2e12;
  const int held = sc.cluster.collective_sms();
  ASSERT_GT(held, 0);
  const int sms = sc.cluster.gpu.sm_count;
  const double share = static_cast<double>(sms) / (sms - held);
  // The op's time alone, and beside collectives with GEMMs and attention at `sm_bound` each.
  const auto times = [&](const sim::CostModel& costs, const Op& op, double sm_bound) {
    double alone = 0, beside = 0;
    for (const Kernel& k : op_kernels(s, op)) {
      if (k.kind() == KernelKind::gemm || k.kind() == KernelKind::attention) {
        alone += static_cast<double>(t * k.repeat);
        beside += std::round(sm_bound * static_cast<double>(k.repeat));
      } else {
        const auto all = static_cast<double>(profiled_memory_time(costs, k, bw));
        alone += all;
        beside += all;
      }
    }
    return std::pair{alone, beside};
  };
  // Checks every op with kernels; returns how many take longer beside collectives.
  const auto check = [&](const DeviceProfile& profile, double sm_bound) {
    sc.cluster.gpu.device_profile = std::make_shared<DeviceProfile>(profile);
    const sim::CostModel costs(sc);
    int slower = 0;
    for (const Op& op : s.ops) {
      if (op.kernels == kNone || op.kind == OpKind::optimizer_step) continue;
      const auto [alone, beside] = times(costs, op, sm_bound);
      if (alone == 0) continue;
      const sim::OpCost c = costs.cost(s, op);
      EXPECT_EQ(static_cast<double>(c.duration), alone) << to_string(op.kind);
      EXPECT_NEAR(c.contended, beside / alone, 1e-9) << to_string(op.kind);
      slower += beside > alone;
    }
    return slower;
  };
  const DeviceProfile base = profile_for(s, t, bw);
  EXPECT_GT(check(with_contended_times(base, held, 320'000), 320'000), 4);
  EXPECT_GT(check(with_contended_times(base, held + 1, 320'000), static_cast<double>(t) * share),
            4);
  EXPECT_EQ(check(with_contended_times(base, held, 200'000), static_cast<double>(t)), 0);
}

TEST(DeviceProfile, ASlowerMeasuredGpuSlowsTheSimulatedStep) {
  Scenario sc = small();
  const auto roofline = sim::simulate_scenario(sc);
  // Every GEMM and attention at 10 ms: far slower than the roofline's H100.
  sc.cluster.gpu.device_profile =
      std::make_shared<DeviceProfile>(profile_for(roofline.schedule, 10 * kNsPerMs, 2.4e12));
  const auto profiled = sim::simulate_scenario(sc);
  EXPECT_GT(profiled.summary.step_time, roofline.summary.step_time);
  EXPECT_NE(profiled.timeline().provenance.device.find("measured on test GPU"), std::string::npos);
}

// cluster.gpu.device_profile: the path is relative to the scenario, the profile is read once per
// process while the file is unchanged, and a bad one is a problem naming the key.
TEST(DeviceProfile, TheScenarioKeyLoadsTheProfileBesideTheScenario) {
  const std::string dir = SHARDSCOPE_TEST_DATA_DIR;
  const auto read = [&](const std::string& value) {
    ConfigTree tree = parse_config_text(
        "model: {preset: tiny}\ncluster: {nodes: 1, gpus_per_node: 2}\n", "s.yaml");
    std::vector<Problem> problems;
    apply_override(tree, "cluster.gpu.device_profile=" + value, problems);
    EXPECT_TRUE(problems.empty());
    return read_scenario(tree, dir + "/s.yaml", dir);
  };
  const Scenario a = read("device_profile_bandwidth_only.json");
  const Scenario b = read("device_profile_bandwidth_only.json");
  ASSERT_NE(a.cluster.gpu.device_profile, nullptr);
  EXPECT_EQ(a.cluster.gpu.device_profile, b.cluster.gpu.device_profile);  // one read
  EXPECT_EQ(a.cluster.gpu.device_profile->memory_bandwidth,
            load_device_profile(dir + "/device_profile_bandwidth_only.json").memory_bandwidth);
  try {
    read("no_such_profile.json");
    FAIL();
  } catch (const ValidationError& e) {
    ASSERT_FALSE(e.problems().empty());
    EXPECT_EQ(e.problems()[0].key, "cluster.gpu.device_profile");
    EXPECT_EQ(e.problems()[0].file, dir + "/s.yaml");
  }
}

}  // namespace
}  // namespace shardscope
