#pragma once
// `shardscope profile-device`: measures on the local GPU what a scenario's kernels take, through
// the same kernel runner the CUDA backend uses (so a profiled kernel is timed as a run runs it):
// each distinct GEMM and attention shape (alone, and again while SMs are held as a collective's
// channels hold them), the memory-bound bandwidth, host↔device copies pinned and pageable, and
// kernel-launch and event overheads.

#include <functional>
#include <string_view>

#include "shardscope/core/device_profile.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope::exec {

struct ProfileDeviceOptions {
  int device = 0;
  int repetitions = 5;  // timed runs per kernel after one warm-up; the median is kept
  // SMs held (one block each, as NCCL's channels hold them) while every GEMM and attention shape
  // is timed a second time; 0: not timed beside held SMs. At most the GPU's SMs less one.
  int contended_sms = 0;
  std::function<void(int done, int total)> progress;
};

DeviceProfile profile_device(const Schedule& schedule, const ProfileDeviceOptions& options = {});

}  // namespace shardscope::exec
