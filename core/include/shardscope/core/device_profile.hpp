#pragma once
// What one GPU was measured to do (`shardscope profile-device`, shardscope.device_profile/2): the
// time of each distinct GEMM and attention shape a scenario runs, alone and (optionally) while
// `contended_sms` SMs are held as a collective's channels hold them, the bandwidth of memory-bound
// kernels and of host↔device copies, and launch and event overheads. `simulate --device-profile`
// prices every kernel the profile has by its measured time and the rest by the roofline; a kernel
// beside collectives at its contended time when the profile held as many SMs as the scenario's
// collectives do. A /1 file (no contended times) still reads.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/kernel.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope {

struct MeasuredGemm {
  Gemm shape;
  TimeNs time = 0;  // one run, median of the measured repetitions
  // The same while DeviceProfile::contended_sms SMs were held; nullopt: not measured.
  std::optional<TimeNs> contended_time;
};

struct MeasuredAttention {
  Attention shape;
  TimeNs time = 0;
  std::optional<TimeNs> contended_time;
};

struct DeviceProfile {
  std::string device;           // the GPU's name, e.g. "NVIDIA H100 80GB HBM3"
  std::string version;          // the shardscope that measured it
  double memory_bandwidth = 0;  // bytes/s of traffic (read + write) of a copy kernel
  double h2d_pinned = 0;        // bytes/s
  double d2h_pinned = 0;
  double h2d_pageable = 0;
  double d2h_pageable = 0;
  TimeNs launch_overhead = 0;  // CPU time to launch a kernel
  TimeNs event_overhead = 0;   // an event record plus a stream wait on it
  // SMs held (each wholly, by a resident thread block, as one NCCL channel holds one) while the
  // contended times were measured; 0: none were.
  int contended_sms = 0;
  std::vector<MeasuredGemm> gemms;
  std::vector<MeasuredAttention> attention;
};

inline constexpr std::string_view kDeviceProfileSchema = "shardscope.device_profile/2";

/// The measured time of one run of `kernel` (repeats not counted), when the profile has it:
/// GEMMs and attention by exact shape; memory-bound kernels, the loss and the optimizer by the
/// measured bandwidth.
std::optional<TimeNs> measured_time(const DeviceProfile& profile, const Kernel& kernel);

/// The measured time of one run of a GEMM or attention `kernel` while `held_sms` SMs were held,
/// when the profile measured it with exactly that many held (nullopt otherwise, and for other
/// kernels: HBM, not SMs, bounds them).
std::optional<TimeNs> measured_contended_time(const DeviceProfile& profile, const Kernel& kernel,
                                              int held_sms);

/// How much of a schedule a profile prices: compute ops whose every kernel it has, and the
/// distinct GEMM and attention shapes it lacks.
struct ProfileCoverage {
  int compute_ops = 0;  // ops with kernels
  int covered_ops = 0;
  int missing_shapes = 0;
};
ProfileCoverage profile_coverage(const Schedule& schedule, const DeviceProfile& profile);

/// The distinct GEMM and attention shapes of a schedule, in first-use order: what
/// profile-device measures.
std::vector<Kernel> distinct_shapes(const Schedule& schedule);

std::string device_profile_to_json(const DeviceProfile& profile);
/// Throws ValidationError naming `origin` and each bad key.
DeviceProfile device_profile_from_json(std::string_view text, const std::string& origin = {});
DeviceProfile load_device_profile(const std::string& path);
/// The profile at `path`, read once per process while the file is unchanged (a sweep reads its
/// scenario at every point); thread-safe. Throws as load_device_profile.
std::shared_ptr<const DeviceProfile> shared_device_profile(const std::string& path);

}  // namespace shardscope
