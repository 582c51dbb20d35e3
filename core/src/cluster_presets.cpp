#include <array>

#include "shardscope/core/cluster_spec.hpp"

namespace shardscope {

FlopsPerSecond PeakFlops::for_dtype(DType dtype) const {
  switch (dtype) {
    case DType::fp32:
      return fp32;
    case DType::bf16:
      return bf16;
    case DType::fp16:
      return fp16;
    case DType::fp8:
      return fp8;
  }
  return fp32;
}

namespace {

// Numbers from NVIDIA's datasheets (dense tensor-core peaks, no sparsity); memory is what
// cudaGetDeviceProperties reports (less than nvidia-smi's total, and a few hundred MiB apart
// between driver versions); NIC is one 200 Gb/s (A100, HDR) or 400 Gb/s (H100/H200, NDR)
// port per GPU; PCIe is what cudaMemcpyAsync reaches (Gen4 x16 / Gen5 x16).
// The 80 GB A100's total_memory: 81,158 MiB as deviceQuery prints it under driver 12.5
// (thamada/nvidia-smi, nvsim/A100SXMx4_deviceQuery.py); other drivers' deviceQuery outputs give
// 81,038–81,221 MiB, never nvidia-smi's 81,920.
ClusterSpec a100() {
  ClusterSpec c;
  c.name = "a100-sxm-80gb";
  c.gpu = {"A100-SXM4-80GB",
           81158 * kMiB,
           {19.5e12, 312e12, 312e12, 312e12},
           2.039e12,
           108,
           0.749,
           0.403,
           400,
           std::nullopt,
           nullptr};
  c.nvlink = {300e9, 1 * kNsPerUs};
  c.network = {25e9, 5 * kNsPerUs};
  c.pcie = {24e9, 10e9, 10 * kNsPerUs};
  c.cpu = {6 * kNsPerUs, 60 * kNsPerUs, 8e9};
  // CUBLAS_WORKSPACE_CONFIG's default before sm90, ":4096:2:16:8" (CublasHandlePool.cpp).
  c.gpu.cublas_workspace = 8 * kMiB + 128 * kKiB;  // 2 × 4,096 KiB + 8 × 16 KiB
  // Matmul and the Triton FlashAttention fitted to llm-foundry's A100 tables (139 runs of both
  // memory sizes on RoCE, `scripts/published-runs --fit`; each table left out in
  // docs/validation.md), the Triton kernel's per-tile overhead and small-head cost, a quarter of
  // FlashAttention-2's each, with the H100's tables (only the A100's have small heads, 64 wide).
  // SDPA's FlashAttention-2 (0.403) fitted to TorchTitan's eight runs on 64 A100
  // (tests/data/published/torchtitan_a100.csv, `scripts/published-runs --fit-a100-attention`; each
  // run left out in docs/validation.md). cuDNN attention is a guess: no run of it on an A100.
  c.gpu.triton_attention_efficiency = 0.349;
  c.gpu.triton_attention_overhead = 0.25;
  c.gpu.triton_attention_head_dim_overhead = 0.25;
  return c;
}

// The 40 GB A100: the same GPU with 40 GB of HBM2 at 1,555 GB/s (NVIDIA A100 datasheet, 2021);
// total_memory 40,536 MiB as CUDA reports it (the device properties PaddlePaddle's
// get_device_properties documentation prints for an A100-SXM4-40GB).
ClusterSpec a100_40gb() {
  ClusterSpec c = a100();
  c.name = "a100-sxm-40gb";
  c.gpu.name = "A100-SXM4-40GB";
  c.gpu.memory = 40536 * kMiB;
  c.gpu.hbm_bandwidth = 1.555e12;
  return c;
}

ClusterSpec h100() {
  ClusterSpec c;
  c.name = "h100-sxm-80gb";
  c.gpu = {"H100-SXM5-80GB",
           81559 * kMiB,
           {66.9e12, 989.4e12, 989.4e12, 1978.9e12},
           3.35e12,
           132,
           0.60,
           0.24,
           700,
           std::nullopt,
           nullptr};
  // The efficiencies are one calibrated number: matmul fitted to TorchTitan's 8-GPU Llama 3.1 8B
  // run (500 W, HBM2e; the 128-GPU run held out, docs/validation.md), attention at the ratio
  // PyTorch's GEMMs and FlashAttention-2 have on the H200 (0.30 / 0.76). They sit below the
  // H200's measured kernels: what the run has and the model lacks (the cap's clock beyond the
  // cube law, real communication's effect on compute) lands in them.
  c.nvlink = {450e9, 1 * kNsPerUs};
  c.network = {50e9, 5 * kNsPerUs};
  c.pcie = {50e9, 20e9, 10 * kNsPerUs};
  c.cpu = {6 * kNsPerUs, 60 * kNsPerUs, 10e9};
  c.gpu.multicast = true;                   // sm90 on NVSwitch (NVLink SHARP)
  c.gpu.cudnn_attention_efficiency = 0.51;  // the H200's ratio, 0.65 / 0.76 of matmul
  // Fitted to llm-foundry's H100 tables (70 runs, `scripts/published-runs --fit`), the matmul
  // efficiency held at TorchTitan's; the H200 and later carry it over.
  c.gpu.triton_attention_efficiency = 0.198;
  c.gpu.triton_attention_overhead = 0.25;
  c.gpu.triton_attention_head_dim_overhead = 0.25;
  // Fitted to llm-foundry's seven fp8 runs on 8 H100 (TransformerEngine Linear, `scripts/
  // published-runs --fit-fp8`; each run left out and predicted within 6.5 %): fp8 GEMMs at 1.84×
  // the bf16 GEMMs' rate here.
  c.gpu.fp8_matmul_efficiency = 0.551;
  return c;
}

ClusterSpec h200() {
  ClusterSpec c = h100();
  c.name = "h200-sxm-141gb";
  c.gpu.name = "H200-SXM-141GB";
  c.gpu.memory = 143771 * kMiB;
  c.gpu.hbm_bandwidth = 4.8e12;
  // PyTorch's own kernels measured on an H200 (scripts/fit_kernel_shapes.py), not a training
  // run's average: GEMMs over the kernel sweep, attention as FlashAttention-2 (SDPA's
  // FLASH_ATTENTION backend, `model.attention: flash`) ran in a profiled training step.
  c.gpu.matmul_efficiency = 0.76;
  c.gpu.attention_efficiency = 0.30;
  c.gpu.cudnn_attention_efficiency = 0.65;  // the sweep's unrestricted SDPA
  // Not measured on the H200: the H100's fp8 GEMMs' share of the bf16 ones' (0.551 / 0.60)
  // carried over to the measured bf16 efficiency.
  c.gpu.fp8_matmul_efficiency = 0.698;
  return c;
}

// HGX B200 at 1,000 W, 8 per node on NVLink 5 (NVSwitch), one 400 Gb/s ConnectX-7 per GPU (DGX
// B200), a PCIe Gen5 host. Dense peaks from NVIDIA's HGX B200 datasheet (FP32 80, BF16/FP16 2,250,
// FP8 4,500 TFLOP/s); 148 SMs and the HBM rate from the driver: a 7,680-bit bus at 3,996 MHz,
// 7.67 TB/s (pytorch/ao#4002; the datasheet's 8 TB/s assumed 8,192 bits); 183,359 MiB as
// nvidia-smi reports it (NVIDIA/TensorRT-LLM#10278). No B200 run has been measured for this
// project or checks the preset. Its GEMM efficiency comes from XLA's published B200 and H100 GEMM
// tables, measured one way on both (tests/data/published/xla_matmul_{b200,h100}.csv): at the
// kernel model's k overhead XLA's B200 GEMMs reach 0.865 of the share of peak its H100 GEMMs do,
// times the H200's measured 0.76 (scripts/fit_kernel_shapes.py, whose --check holds it); the
// fp8 GEMMs at the H100's fp8/bf16 ratio. Attention and the rest are the H200's carried over.
ClusterSpec b200() {
  ClusterSpec c = h200();
  c.name = "b200-sxm-180gb";
  c.gpu.name = "B200-SXM-180GB";
  c.gpu.memory = 183359 * kMiB;
  c.gpu.peak_flops = {80e12, 2250e12, 2250e12, 4500e12};
  c.gpu.hbm_bandwidth = 7.67e12;
  c.gpu.sm_count = 148;
  c.gpu.tdp_w = 1000;
  c.gpu.matmul_efficiency = 0.66;
  c.gpu.fp8_matmul_efficiency = 0.606;  // 0.66 × 0.551 / 0.60
  c.nvlink = {900e9, 1 * kNsPerUs};     // NVLink 5: 1.8 TB/s both directions
  return c;
}

// One GB200 NVL72 rack: 18 nodes (compute trays) of 4 Blackwell GPUs at 1,200 W, all 72 on one
// NVLink 5 domain, one 400 Gb/s ConnectX-7 per GPU, each pair of GPUs hosted by a Grace CPU over
// NVLink-C2C. NVIDIA's GB200 NVL72 datasheet: per GPU 2,500 TFLOP/s bf16 dense (360 PFLOP/s
// sparse over 72), 186 GB of HBM3e at 8 TB/s (13.4 TB and 576 TB/s over 72), 1.8 TB/s NVLink;
// NVLink-C2C 900 GB/s both ways per Grace and its two GPUs: 225 GB/s a GPU and a direction.
// FP32 90 TFLOP/s (the 1,200 W part's table). The SM count and the efficiencies are the B200's
// (XLA's B200 table is taken to hold at GB200's clocks); nothing here has been checked by a run.
ClusterSpec gb200_nvl72() {
  ClusterSpec c = b200();
  c.name = "gb200-nvl72";
  c.gpu.name = "GB200-NVL72";
  c.gpu.memory = Bytes{186'000'000'000};
  c.gpu.peak_flops = {90e12, 2500e12, 2500e12, 5000e12};
  c.gpu.hbm_bandwidth = 8e12;
  c.gpu.tdp_w = 1200;
  c.nodes = 18;
  c.gpus_per_node = 4;
  c.nvlink_domain = 72;
  c.pcie = {225e9, 90e9, 10 * kNsPerUs};  // NVLink-C2C stands for PCIe
  return c;
}

const std::array<ClusterPreset, 6>& presets() {
  static const std::array<ClusterPreset, 6> kPresets{
      ClusterPreset{"a100-sxm-80gb",
                    "8x A100 SXM4 80GB per node, NVLink3/NVSwitch, 200 Gb/s NIC per GPU", a100(),
                    "NVIDIA A100 datasheet (2021): 312 TFLOP/s bf16, 2,039 GB/s, 108 SMs",
                    "matmul and Triton attention fitted to llm-foundry's MPT runs on A100 "
                    "(scripts/published-runs --fit; its 2023 table, held out, within 3.6 % on "
                    "average), FlashAttention-2 to TorchTitan's (--fit-a100-attention); cuDNN a "
                    "guess"},
      ClusterPreset{"a100-sxm-40gb",
                    "8x A100 SXM4 40GB per node, NVLink3/NVSwitch, 200 Gb/s NIC per GPU",
                    a100_40gb(),
                    "NVIDIA A100 datasheet (2021): 312 TFLOP/s bf16, 1,555 GB/s, 108 SMs; "
                    "40,536 MiB as CUDA reports it",
                    "the 80 GB A100's (one fit over both tables)"},
      ClusterPreset{"h100-sxm-80gb",
                    "8x H100 SXM5 80GB per node, NVLink4/NVSwitch, 400 Gb/s NIC per GPU", h100(),
                    "NVIDIA H100 datasheet (2023): 989 TFLOP/s bf16, 3.35 TB/s, 132 SMs",
                    "matmul fitted to TorchTitan's Llama 3.1 8B on 8 H100 at 500 W "
                    "(published_runs.csv), attention (FlashAttention-2) at the H200's ratio, "
                    "Triton attention and fp8 GEMMs (TransformerEngine) fitted to llm-foundry's "
                    "MPT runs on H100"},
      ClusterPreset{"h200-sxm-141gb",
                    "8x H200 SXM 141GB per node, NVLink4/NVSwitch, 400 Gb/s NIC per GPU", h200(),
                    "NVIDIA H200 datasheet (2024): 989 TFLOP/s bf16, 4.8 TB/s, 132 SMs",
                    "PyTorch's GEMMs (kernel_sweep.csv) and FlashAttention-2 (a profiled step) "
                    "measured on an H200 (tests/data/measured/2026-11-27-h200-2/); Triton "
                    "attention carried over from the H100, fp8 GEMMs at the H100's fp8/bf16 "
                    "ratio"},
      ClusterPreset{"b200-sxm-180gb",
                    "8x B200 SXM 180GB per node (HGX, 1000 W), NVLink5/NVSwitch, 400 Gb/s NIC "
                    "per GPU",
                    b200(),
                    "datasheet, not yet validated: NVIDIA HGX B200 (2025): 2,250 TFLOP/s bf16; "
                    "the driver's 7.67 TB/s and 148 SMs",
                    "not validated: GEMMs from XLA's published B200 and H100 GEMM tables "
                    "(0.865 of the H100's share) times the H200's measured 0.76, the rest the "
                    "H200's carried over (no published B200 run checks them)"},
      ClusterPreset{"gb200-nvl72",
                    "GB200 NVL72 rack: 18 nodes x 4 GPUs (1200 W) on one 72-GPU NVLink5 "
                    "domain, Grace hosts over NVLink-C2C, 400 Gb/s NIC per GPU",
                    gb200_nvl72(),
                    "datasheet, not yet validated: NVIDIA GB200 NVL72 (2025): 2,500 TFLOP/s "
                    "bf16, 186 GB at 8 TB/s, NVLink-C2C 900 GB/s per 2 GPUs",
                    "not validated: the B200's (GEMMs from XLA's B200 table, the rest the "
                    "H200's carried over; no published GB200 run checks them)"},
  };
  return kPresets;
}

}  // namespace

std::span<const ClusterPreset> cluster_presets() {
  return presets();
}

std::optional<ClusterSpec> find_cluster_preset(std::string_view name) {
  for (const auto& p : presets()) {
    if (p.name == name) return p.spec;
  }
  return std::nullopt;
}

}  // namespace shardscope
