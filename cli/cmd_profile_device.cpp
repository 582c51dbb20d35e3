// `shardscope profile-device SCENARIO --out PROFILE.json`: the local GPU measured on the
// scenario's kernels, for `simulate --device-profile`.
#include <fmt/format.h>

#include "commands.hpp"
#include "shardscope/core/lower.hpp"

#if SHARDSCOPE_HAVE_CUDA
#include "shardscope/exec/cuda_backend.hpp"
#include "shardscope/exec/device_profiler.hpp"
#endif

namespace shardscope::cli {

int run_profile_device(const ProfileDeviceArgs& args) {
#if !SHARDSCOPE_HAVE_CUDA
  (void)args;
  throw ValidationError({Problem{"profile-device", "",
                                 "this build has no CUDA backend (it is built when the CUDA "
                                 "toolkit, cuBLASLt and NCCL are found; see docs/exec.md)",
                                 ""}});
#else
  check_outputs(args.scenario, {{"--out", args.out}});
  const Schedule schedule = lower(load_scenario_args(args.scenario));
  if (std::string why; !exec::cuda_device_available(&why))
    throw Error(fmt::format("profile-device: {}", why));
  exec::ProfileDeviceOptions options;
  options.repetitions = args.repetitions;
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
  write_output(args.out, device_profile_to_json(profile));
  return kExitOk;
#endif
}

}  // namespace shardscope::cli
