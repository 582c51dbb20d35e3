#pragma once
// Where it runs: GPUs, nodes and the links between them. Every number can be overridden.

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "shardscope/core/units.hpp"

namespace shardscope {

struct Calibration;
struct DeviceProfile;

struct PeakFlops {
  FlopsPerSecond fp32 = 0;  // dense, no TF32
  FlopsPerSecond bf16 = 0;  // dense tensor-core
  FlopsPerSecond fp16 = 0;
  FlopsPerSecond fp8 = 0;  // equals bf16 where the GPU has no FP8 tensor cores

  FlopsPerSecond for_dtype(DType dtype) const;
};

struct GpuSpec {
  std::string name;
  Bytes memory = 0;  // total device memory as CUDA reports it
  PeakFlops peak_flops;
  BytesPerSecond hbm_bandwidth = 0;
  int sm_count = 0;
  double matmul_efficiency = 0.7;      // share of dense peak large GEMMs reach in PyTorch eager
  double attention_efficiency = 0.35;  // share of dense peak of PyTorch SDPA flash attention (FA2)
  double tdp_w = 0;                    // board power limit of the stock part
  std::optional<double> power_cap_w;   // a lower administrative cap, when set
  // Kernel times measured on this GPU (cluster.gpu.device_profile); null: the roofline only.
  std::shared_ptr<const DeviceProfile> device_profile;
  // Device memory the process holds outside PyTorch's caching allocator: the CUDA context with
  // the kernels a training step loads lazily (docs/semantics.md, "Memory outside PyTorch").
  Bytes context_memory = 512 * kMiB;
  // The cuBLAS workspace PyTorch allocates per (handle, stream) through its caching allocator:
  // CUBLAS_WORKSPACE_CONFIG's default, 32 MiB on sm90 (CublasHandlePool.cpp).
  Bytes cublas_workspace = 32 * kMiB;
  // The device supports multicast objects (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: Hopper and
  // later on NVSwitch). PyTorch's NCCL process group allocates tensors from its registered pool
  // only then (ProcessGroupNCCL::supportsTensorAlloc → c10d::cuda::deviceSupportsMulticast).
  bool multicast = false;
  // attention_efficiency of SDPA's cuDNN attention (model.attention: cudnn), faster than
  // FlashAttention-2 on Hopper.
  double cudnn_attention_efficiency = 0.35;
  // attention_efficiency of the Triton FlashAttention llm-foundry's MPT runs (model.attention:
  // triton, outside SDPA), fitted to the published runs that used it; its per-tile overhead
  // as a share of FlashAttention-2's (the attention half-lengths of kernel_shape_model.hpp), so
  // that short sequences cost it less over its asymptote; and its cost of a small head
  // dimension as a share of FlashAttention-2's (the head-dimension overhead d0 there).
  double triton_attention_efficiency = 0.35;
  double triton_attention_overhead = 1;
  double triton_attention_head_dim_overhead = 1;
  // Share of the fp8 dense peak the fp8 GEMMs of TransformerEngine's Linear reach
  // (training.fp8); unused on a GPU without fp8 tensor cores.
  double fp8_matmul_efficiency = 0.7;
  // × the throughput the SM model says collectives take from the GEMMs and attentions beside them
  // (docs/simulator.md, "SMs held by collectives"): 1 is the model as is; a calibration's fitted
  // contention_scale replaces it.
  double contention_scale = 1;
};

/// One direction of a link as one GPU sees it.
struct LinkSpec {
  BytesPerSecond bandwidth = 0;
  TimeNs latency = 0;
};

struct HostLinkSpec {
  BytesPerSecond pinned_bandwidth = 0;    // cudaMemcpyAsync from/to pinned host memory
  BytesPerSecond pageable_bandwidth = 0;  // staged through a driver bounce buffer
  TimeNs latency = 0;
};

struct CpuSpec {
  TimeNs launch_overhead = 0;     // CPU time to issue one kernel or collective from PyTorch eager
  TimeNs fsdp_hook_overhead = 0;  // CPU time of one FSDP pre/post hook (per group and pass)
  double adam_bytes_per_s = 0;    // CPU optimizer throughput over parameter bytes (offload)
};

/// NCCL's settings that decide its device buffers (docs/semantics.md, "Memory outside PyTorch").
struct NcclSpec {
  Bytes buffsize = 4 * kMiB;  // NCCL_BUFFSIZE: the Simple protocol's buffer per connection
  int channels = 24;          // channels a communicator builds; 0: no NCCL (a fake group)
};

/// How nodes reach each other (cluster.network.fabric). efa and roce: Ethernet fabrics, whose
/// multi-node all-gather bandwidth falls with the node count as measured on EFA (a ring's flows
/// hash over the fabric's paths and collide more as it spans more nodes; llm-foundry's RoCE A100
/// runs agree, docs/validation.md); infiniband: a rail-optimised fabric, each GPU's NIC on its
/// own rail, so a ring's inter-node steps run on every NIC of a node at once at a share of the
/// line rate that does not fall with the node count.
enum class NetworkFabric { efa, infiniband, roce };

struct ClusterSpec {
  std::string name;  // preset name
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  // GPUs on one NVLink fabric, a multiple of gpus_per_node (GB200 NVL72: 72 GPUs, 4 per node);
  // 0: each node's own. A collective whose ranks lie in one domain runs on NVLink.
  int nvlink_domain = 0;
  LinkSpec nvlink;   // NVLink/NVSwitch fabric of a domain, per GPU
  LinkSpec network;  // one inter-node NIC
  // NICs a node has (cluster.network.nics_per_node); 0: one per GPU, as every preset has. Fewer
  // NICs than GPUs share them: each GPU's share of the node's NICs is what a collective across
  // nodes gets (network_bandwidth_per_gpu).
  int nics_per_node = 0;
  NetworkFabric fabric = NetworkFabric::efa;
  HostLinkSpec pcie;  // host link, per GPU
  CpuSpec cpu;
  NcclSpec nccl;
  // Cost-model parameters fitted to measured runs (cluster.calibration, shardscope calibrate);
  // null: the preset's and the cost model's own values.
  std::shared_ptr<const Calibration> calibration;

  int world_size() const { return nodes * gpus_per_node; }
  /// Each GPU's share of its node's NIC bandwidth, one direction: the NIC's rate with one NIC per
  /// GPU, else the node's NICs' total over its GPUs.
  BytesPerSecond network_bandwidth_per_gpu() const {
    if (nics_per_node <= 0) return network.bandwidth;
    return network.bandwidth * nics_per_node / std::max(1, gpus_per_node);
  }
  int gpus_per_nvlink_domain() const { return nvlink_domain > 0 ? nvlink_domain : gpus_per_node; }
  /// The SMs one collective on every channel holds (a thread block per channel), fewer than the
  /// GPU's: what compute beside a collective is priced at and what profile-device holds.
  int collective_sms() const { return std::clamp(nccl.channels, 0, std::max(0, gpu.sm_count - 1)); }
};

struct ClusterPreset {
  std::string_view name;
  std::string_view description;
  ClusterSpec spec;
  // Where the numbers come from: the datasheet's (peaks, memory, links) and the kernel
  // efficiencies' (a measurement, a fit to a run, or a guess), as `shardscope presets` shows them.
  std::string_view datasheet;
  std::string_view efficiencies;
};

std::span<const ClusterPreset> cluster_presets();
std::optional<ClusterSpec> find_cluster_preset(std::string_view name);

}  // namespace shardscope
