#include "shardscope/sim/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "shardscope/core/analysis.hpp"
#include "shardscope/core/group_compute.hpp"
#include "shardscope/sim/op_duration.hpp"

namespace shardscope::sim {

std::string_view to_string(Resource resource) {
  switch (resource) {
    case Resource::none:
      return "none";
    case Resource::gpu:
      return "gpu";
    case Resource::nvlink:
      return "nvlink";
    case Resource::network:
      return "network";
    case Resource::pcie_h2d:
      return "pcie_h2d";
    case Resource::pcie_d2h:
      return "pcie_d2h";
    case Resource::host:
      return "host";
  }
  return "none";
}

CostModel::CostModel(const Scenario& scenario, ComputeModelParams compute,
                     InterferenceParams interference, CollectiveModelParams collectives)
    : cluster_(scenario.cluster),
      compute_(compute),
      interference_(interference),
      collectives_(scenario.cluster, collectives),
      pinned_(scenario.fsdp.cpu_offload.pin_memory),
      profile_(scenario.cluster.gpu.device_profile) {
  double clock = 1.0;
  if (cluster_.gpu.power_cap_w && cluster_.gpu.tdp_w > 0) {
    clock = std::pow(std::min(1.0, *cluster_.gpu.power_cap_w / cluster_.gpu.tdp_w),
                     compute_.power_exponent);
  }
  peak_ = cluster_.gpu.peak_flops.for_dtype(compute_dtype(scenario)) * clock;
  const RunFacts facts = analysis::run_facts(scenario, Schedule{});
  model_flops_per_token_ = facts.model_flops_per_token;
  mfu_peak_ = facts.peak_flops;
}

RunFacts CostModel::run_facts(const Schedule& schedule) const {
  return {schedule.world_size, schedule.iterations, schedule.tokens_per_iteration,
          model_flops_per_token_, mfu_peak_};
}

TimeNs CostModel::compute_time(Flops flops, Bytes hbm_bytes, Flops attention_flops) const {
  double seconds = 0;
  const Flops matmul = std::max(0.0, flops - attention_flops);
  const double size = compute_.half_efficiency_flops;
  if (matmul > 0)
    seconds += matmul / (peak_ * cluster_.gpu.matmul_efficiency * matmul / (matmul + size));
  if (attention_flops > 0) {
    seconds += attention_flops / (peak_ * cluster_.gpu.attention_efficiency * attention_flops /
                                  (attention_flops + size));
  }
  if (hbm_bytes > 0)
    seconds +=
        static_cast<double>(hbm_bytes) / (cluster_.gpu.hbm_bandwidth * compute_.hbm_efficiency);
  return compute_.kernel_floor + op_duration_ns(seconds, "a compute kernel");
}

// Measured kernels at their measured times; what the profile lacks on the roofline.
TimeNs CostModel::profiled_compute_time(const Schedule& s, const Op& op) const {
  TimeNs measured = 0;
  Flops rest_flops = 0, rest_attention = 0;
  Bytes rest_bytes = 0;
  for (const Kernel& k : op_kernels(s, op)) {
    if (const auto t = measured_time(*profile_, k)) {
      measured += *t * k.repeat;
      continue;
    }
    const KernelTotals rest = kernel_set_totals(std::span<const Kernel>(&k, 1));
    rest_flops += rest.flops;
    rest_attention += rest.attention_flops;
    rest_bytes += rest.memory_bytes;
  }
  const bool rest = rest_flops > 0 || rest_bytes > 0;
  return measured + (rest ? compute_time(rest_flops, rest_bytes, rest_attention) : 0);
}

OpCost CostModel::cost(const Schedule& s, const Op& op) const {
  OpCost c;
  c.cpu = cluster_.cpu.launch_overhead;
  if (op.kind == OpKind::all_gather || op.kind == OpKind::reshard ||
      op.kind == OpKind::reduce_scatter) {
    c.cpu += cluster_.cpu.fsdp_hook_overhead;  // one FSDP hook per unshard, reshard and reduction
  }
  const StreamKind stream = s.streams[static_cast<std::size_t>(op.stream)].kind;
  switch (op.kind) {
    case OpKind::forward:
    case OpKind::backward:
    case OpKind::recompute:
      c.resource = Resource::gpu;
      if (op.fixed_time) {
        c.duration = *op.fixed_time;
      } else if (profile_ && op.kernels != kNone) {
        c.duration = profiled_compute_time(s, op);
      } else {
        c.duration = compute_time(op.flops, op.bytes, op.attention_flops);
      }
      return c;
    case OpKind::copy_in:
    case OpKind::copy_out:
    case OpKind::reduce_copy_in:
    case OpKind::grad_div:
      c.resource = Resource::gpu;
      c.duration =
          op.fixed_time ? *op.fixed_time : compute_time(0, 2 * op.bytes);  // read and write
      return c;
    case OpKind::reshard:
      if (op.bytes > 0) {
        c.resource = Resource::gpu;
        c.duration = compute_time(0, 2 * op.bytes);
      }
      return c;
    case OpKind::optimizer_step:
      if (stream == StreamKind::cpu) {
        c.resource = Resource::host;
        c.duration = op_duration_ns(static_cast<double>(op.bytes) / cluster_.cpu.adam_bytes_per_s,
                                    "the CPU optimizer step");
      } else {
        c.resource = Resource::gpu;
        c.duration = compute_time(0, op.bytes);  // multi-tensor Adam is memory-bound
      }
      return c;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_reduce: {
      const auto& comm = s.communicators[static_cast<std::size_t>(op.comm)];
      c.resource = comm.nodes > 1 ? Resource::network : Resource::nvlink;
      c.duration = op.fixed_time
                       ? *op.fixed_time
                       : collectives_.estimate(op.kind, op.bytes, comm.size, comm.nodes).time;
      return c;
    }
    case OpKind::h2d:
    case OpKind::d2h: {
      c.resource = op.kind == OpKind::h2d ? Resource::pcie_h2d : Resource::pcie_d2h;
      double bw = pinned_ ? cluster_.pcie.pinned_bandwidth : cluster_.pcie.pageable_bandwidth;
      if (profile_) {  // measured rates win where the profile has them
        const bool h2d = op.kind == OpKind::h2d;
        const double measured = pinned_ ? (h2d ? profile_->h2d_pinned : profile_->d2h_pinned)
                                        : (h2d ? profile_->h2d_pageable : profile_->d2h_pageable);
        if (measured > 0) bw = measured;
      }
      c.duration = cluster_.pcie.latency +
                   op_duration_ns(static_cast<double>(op.bytes) / bw, "a host-device copy");
      return c;
    }
    case OpKind::stream_wait:
    case OpKind::cpu_wait:
    case OpKind::zero_grad:
    case OpKind::state_dict:
    case OpKind::other:
      c.cpu = kNsPerUs;  // bookkeeping on the CPU, no GPU work (other: only with a fixed time)
      return c;
  }
  return c;
}

}  // namespace shardscope::sim
