// `shardscope profile-device SCENARIO --out PROFILE.json`: the local GPU measured on the
// scenario's kernels, for `simulate --device-profile`.
#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/lower.hpp"
#include "shardscope/sim/cost_model.hpp"
#include "shardscope/sim/kernel_shape_model.hpp"

#if SHARDSCOPE_HAVE_CUDA
#include "shardscope/exec/cuda_backend.hpp"
#include "shardscope/exec/device_profiler.hpp"
#endif

namespace shardscope::cli {

#if SHARDSCOPE_HAVE_CUDA
namespace {

// Over the shapes timed beside held SMs, weighted by their time alone: the measured time over
// the time alone, and the SM model's (docs/simulator.md, "SMs held by collectives").
struct HeldSmsSlowdown {
  double measured = 0;
  double model = 0;
  int shapes = 0;
};

template <typename Entry>
HeldSmsSlowdown held_sms_slowdown(const std::vector<Entry>& entries, int sm_count, int held,
                                  const sim::KernelShapeParams& params) {
  double alone = 0, measured = 0, model = 0;
  HeldSmsSlowdown out;
  for (const Entry& e : entries) {
    if (!e.contended_time) continue;
    const auto t = static_cast<double>(e.time);
    alone += t;
    measured += static_cast<double>(*e.contended_time);
    model += t * sim::sm_model_slowdown({"", 1, e.shape}, sm_count, sm_count - held, params);
    ++out.shapes;
  }
  if (alone > 0) {
    out.measured = measured / alone;
    out.model = model / alone;
  }
  return out;
}

std::string held_sms_line(const DeviceProfile& p, const Scenario& scenario) {
  if (p.contended_sms == 0) return "not timed beside held SMs";
  const sim::CostModel costs(scenario);
  const sim::KernelShapeParams& params = costs.compute_params().shapes;
  const int sms = scenario.cluster.gpu.sm_count;
  const auto part = [&](std::string_view what, const HeldSmsSlowdown& s) {
    if (s.shapes == 0) return fmt::format("no {}", what);
    return fmt::format("{} {:.3f}× their time alone (the SM model: {:.3f}×)", what, s.measured,
                       s.model);
  };
  return fmt::format(
      "beside {} held SMs of {}: {}, {}", p.contended_sms, sms,
      part("GEMMs", held_sms_slowdown(p.gemms, sms, p.contended_sms, params)),
      part("attention", held_sms_slowdown(p.attention, sms, p.contended_sms, params)));
}

}  // namespace
#endif

int run_profile_device(const ProfileDeviceArgs& args) {
#if !SHARDSCOPE_HAVE_CUDA
  (void)args;
  throw ValidationError({Problem{"profile-device", "",
                                 "this build has no CUDA backend (it is built when the CUDA "
                                 "toolkit, cuBLASLt and NCCL are found; see docs/exec.md)",
                                 ""}});
#else
  check_outputs(args.scenario, {{"--out", args.out}});
  const Scenario scenario = load_scenario_args(args.scenario);
  const Schedule schedule = lower(scenario);
  if (std::string why; !exec::cuda_device_available(&why))
    throw Error(fmt::format("profile-device: {}", why));
  exec::ProfileDeviceOptions options;
  options.repetitions = args.repetitions;
  options.contended_sms = args.contended_sms.value_or(scenario.cluster.collective_sms());
  options.progress = [](int done, int total) {
    fmt::print(stderr, "profile-device: {} of {} measured\n", done, total);
  };
  const DeviceProfile profile = exec::profile_device(schedule, options);
  const ProfileCoverage c = profile_coverage(schedule, profile);
  fmt::print(
      "{}: {} GEMM and {} attention shapes, memory-bound {:.0f} GB/s, h2d pinned {:.1f} "
      "GB/s, pageable {:.1f} GB/s, launch {} ns, event {} ns; covers {} of {} compute ops\n",
      profile.device, profile.gemms.size(), profile.attention.size(),
      profile.memory_bandwidth / 1e9, profile.h2d_pinned / 1e9, profile.h2d_pageable / 1e9,
      profile.launch_overhead, profile.event_overhead, c.covered_ops, c.compute_ops);
  fmt::print("{}\n", held_sms_line(profile, scenario));
  write_output(args.out, device_profile_to_json(profile));
  return kExitOk;
#endif
}

}  // namespace shardscope::cli
