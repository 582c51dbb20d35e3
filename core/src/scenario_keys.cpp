// The scenario key table. Bounds are physical: wide enough for any real model or cluster (and for
// what-if questions a decade out), narrow enough that no product of them overflows the integer
// arithmetic of lowering and simulation, and that a unit typo (1B/s, latencies of hours) is caught.
#include "shardscope/core/scenario_keys.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <unordered_map>

#include "shardscope/core/config_tree.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/model_presets.hpp"
#include "shardscope/core/scenario.hpp"
#include "shardscope/core/units.hpp"

namespace shardscope {
namespace {

using K = KeyType;
constexpr double kMaxInt = 9.0e15;  // where a bound is "any count this tool can hold"

// Spellings of resolved values for ScenarioKey::value_of.
std::string bool_text(bool value) {
  return value ? "true" : "false";
}

// A factor list as variation.slow_nodes spells it; "none" for none.
std::string factors_text(const std::map<int, double>& factors) {
  return factors.empty() ? "none" : factor_list_text(factors);
}

std::string reshard_text(const ReshardAfterForward& r) {
  if (r.mode == ReshardAfterForward::Mode::to_size) return std::to_string(r.size);
  return bool_text(r.mode == ReshardAfterForward::Mode::on);
}

// FSDP's param_dtype, unset: the parameters' own dtype, fp32.
DType param_dtype(const Scenario& s) {
  return param_dtype(s.fsdp.mixed_precision);
}

constexpr std::array kKeys{
    // ---------------------------------------------------------------- top level
    ScenarioKey{"name", K::text, 0, 0, "", "a label", "the file name", "a name for reports"},
    ScenarioKey{"description", K::text, 0, 0, "", "free text", "", "free text, ignored"},
    // ---------------------------------------------------------------- model
    ScenarioKey{"model", K::section, 0, 0, "", "", "",
                "the model: exactly one of preset, family or hf_config"},
    ScenarioKey{.path = "model.preset",
                .type = K::text,
                .choices = "a model preset (shardscope presets)",
                .models = "a built-in model with exact parameter counts",
                .label = "model",
                .value_of = [](const Scenario& s) { return s.model.name; }},
    ScenarioKey{"model.family", K::choice, 0, 0, "", "transformer, custom", "",
                "a transformer from its shape keys, or custom groups"},
    ScenarioKey{.path = "model.hf_config",
                .type = K::text,
                .choices = "a Hugging Face config.json path, relative to the scenario",
                .default_value = "",
                .models = "a transformer read from a Hugging Face config.json",
                .names_a_file = true},
    ScenarioKey{"model.name", K::text, 0, 0, "", "a label", "the preset, family or file name",
                "the model's name in reports"},
    ScenarioKey{"model.hidden", K::integer, 1, 262'144, "elements", "", "from the preset",
                "hidden size (d_model)"},
    ScenarioKey{"model.layers", K::integer, 1, 10'000, "blocks", "", "from the preset",
                "transformer blocks"},
    ScenarioKey{"model.heads", K::integer, 1, 16'384, "heads", "", "from the preset",
                "attention heads; must divide hidden"},
    ScenarioKey{"model.kv_heads", K::integer, 1, 16'384, "heads", "", "heads",
                "key/value heads (GQA); must divide heads"},
    ScenarioKey{"model.ffn_hidden", K::integer, 1, 2'097'152, "elements", "", "from the preset",
                "MLP inner size"},
    ScenarioKey{"model.vocab", K::integer, 1, 16'777'216, "tokens", "", "from the preset",
                "vocabulary size (embedding and output head rows)"},
    ScenarioKey{"model.max_seq", K::integer, 1, 134'217'728, "positions", "", "none",
                "learned position table size (pos_emb: learned)"},
    ScenarioKey{"model.mlp", K::choice, 0, 0, "", "swiglu, gelu, gelu_new", "swiglu",
                "MLP kind: three projections (swiglu), or two with a fused GELU (gelu) or with "
                "Hugging Face's gelu_new, whose elementwise ops save their intermediates"},
    ScenarioKey{"model.norm", K::choice, 0, 0, "",
                "rmsnorm, layernorm, low_precision_layernorm, unfused_rmsnorm", "rmsnorm",
                "norm kind (a LayerNorm has a bias unless norm_bias is false); rmsnorm: one "
                "fused kernel (nn.RMSNorm on CUDA, torchtitan's fused_rmsnorm); "
                "low_precision_layernorm: llm-foundry's LPLayerNorm (MPT), which under autocast "
                "runs and keeps its tensors in the autocast dtype; unfused_rmsnorm: RMSNorm as "
                "PyTorch ops in fp32 (torchtitan's RMSNorm class before 2025, Hugging Face's "
                "LlamaRMSNorm), slower and keeping an fp32 copy of its input"},
    ScenarioKey{"model.norm_bias", K::boolean, 0, 0, "", "", "true",
                "a LayerNorm's bias (MPT's LayerNorms have none); rmsnorm has none either way"},
    ScenarioKey{"model.pos_emb", K::choice, 0, 0, "", "rope, learned, alibi", "rope",
                "position embedding: rotary (no parameters), a learned table, or ALiBi's "
                "attention bias (no parameters, no rotary kernel)"},
    ScenarioKey{"model.parallel_residual", K::boolean, 0, 0, "", "", "false",
                "attention and MLP both read the block input (GPT-NeoX, GPT-J): one residual "
                "tensor fewer saved"},
    ScenarioKey{"model.bias", K::boolean, 0, 0, "", "", "false",
                "sets qkv_bias, out_proj_bias and mlp_bias together"},
    ScenarioKey{"model.qkv_bias", K::boolean, 0, 0, "", "", "false",
                "bias on the q, k, v projections"},
    ScenarioKey{"model.out_proj_bias", K::boolean, 0, 0, "", "", "false",
                "bias on the attention output projection"},
    ScenarioKey{"model.mlp_bias", K::boolean, 0, 0, "", "", "false", "bias on the MLP projections"},
    ScenarioKey{"model.tie_embeddings", K::boolean, 0, 0, "", "", "false",
                "the output head shares the token embedding"},
    ScenarioKey{"model.attention", K::choice, 0, 0, "", "flash, math, cudnn, triton", "flash",
                "SDPA's kernel: FlashAttention-2 (the FLASH_ATTENTION backend), cuDNN's fused "
                "attention (CUDNN_ATTENTION, torchtitan's first choice since 2025: the same "
                "memory, priced at cluster.gpu.cudnn_attention_efficiency), or the math path "
                "that keeps the s × s probabilities (efficient is not modelled yet); or, outside "
                "SDPA, the Triton FlashAttention of llm-foundry's MPT (attn_impl: triton): "
                "FlashAttention-2's memory, priced at cluster.gpu.triton_attention_efficiency"},
    ScenarioKey{"model.dropout", K::number, 0, 0.99, "probability", "", "0",
                "nn.Dropout at the embedding, both residuals and the attention: a saved mask per "
                "site when > 0"},
    ScenarioKey{"model.groups", K::list, 0, 0, "", "", "",
                "family custom: the FSDP groups in forward order"},
    ScenarioKey{"model.groups[]", K::section, 0, 0, "", "", "", "one FSDP group"},
    ScenarioKey{"model.groups[].name", K::text, 0, 0, "", "a unique name (root, layers.0, ...)", "",
                "the group's name; groups before root hold no FSDP parameters"},
    ScenarioKey{"model.groups[].params", K::integer, 0, 1e13, "parameters", "", "",
                "parameters in the group"},
    ScenarioKey{"model.groups[].forward_flops", K::number, 0, 1e21, "FLOP", "", "",
                "forward FLOPs per micro-batch"},
    ScenarioKey{"model.groups[].backward_flops", K::number, 0, 1e21, "FLOP", "",
                "2 × forward_flops", "backward FLOPs per micro-batch"},
    ScenarioKey{"model.groups[].activation_bytes", K::bytes, 1, 0x1p40, "", "", "0",
                "activations saved for backward per micro-batch"},
    ScenarioKey{"model.groups[].forward_time_ms", K::number, 0, 1e6, "ms", "", "from forward_flops",
                "a fixed forward time, instead of FLOPs"},
    ScenarioKey{"model.groups[].backward_time_ms", K::number, 0, 1e6, "ms", "",
                "2 × forward_time_ms", "a fixed backward time"},
    ScenarioKey{"model.groups[].all_gather_time_ms", K::number, 0, 1e6, "ms", "",
                "from the collective model", "a fixed all-gather time"},
    ScenarioKey{"model.groups[].reduce_scatter_time_ms", K::number, 0, 1e6, "ms", "",
                "from the collective model", "a fixed reduce-scatter time"},
    // ---------------------------------------------------------------- cluster
    ScenarioKey{"cluster", K::section, 0, 0, "", "", "", "the GPUs and their links"},
    ScenarioKey{.path = "cluster.preset",
                .type = K::text,
                .choices = "a cluster preset (shardscope presets)",
                .default_value = "h100-sxm-80gb",
                .models = "a built-in node type; the keys below refine it",
                .label = "GPU",
                .value_of = [](const Scenario& s) { return s.cluster.name; }},
    ScenarioKey{.path = "cluster.nodes",
                .type = K::integer,
                .min = 1,
                .max = 100'000,
                .unit = "nodes",
                .default_value = "from the preset (1; gb200-nvl72: one rack, 18)",
                .models = "nodes",
                .label = "nodes",
                .value_of = [](const Scenario& s) { return std::to_string(s.cluster.nodes); }},
    ScenarioKey{
        .path = "cluster.gpus_per_node",
        .type = K::integer,
        .min = 1,
        .max = 256,
        .unit = "GPUs",
        .default_value = "from the preset (8; gb200-nvl72: 4)",
        .models = "GPUs per node (one NVLink domain unless cluster.nvlink.domain joins several)",
        .label = "GPUs per node",
        .value_of = [](const Scenario& s) { return std::to_string(s.cluster.gpus_per_node); }},
    ScenarioKey{"cluster.gpu", K::section, 0, 0, "", "", "", "one GPU"},
    ScenarioKey{"cluster.gpu.memory", K::bytes, 0x1p30, 0x1p40, "", "", "from the preset",
                "device memory as CUDA reports it (total_memory); the caching allocator may "
                "reserve it less the CUDA context and NCCL's buffers"},
    ScenarioKey{"cluster.gpu.peak_flops", K::section, 0, 0, "", "", "",
                "dense tensor-core peaks per dtype"},
    ScenarioKey{"cluster.gpu.peak_flops.fp32", K::flops_rate, 1e9, 1e17, "", "", "from the preset",
                "peak FLOP/s in fp32"},
    ScenarioKey{"cluster.gpu.peak_flops.bf16", K::flops_rate, 1e9, 1e17, "", "", "from the preset",
                "peak FLOP/s in bf16"},
    ScenarioKey{"cluster.gpu.peak_flops.fp16", K::flops_rate, 1e9, 1e17, "", "", "from the preset",
                "peak FLOP/s in fp16"},
    ScenarioKey{"cluster.gpu.peak_flops.fp8", K::flops_rate, 1e9, 1e17, "", "", "from the preset",
                "peak FLOP/s in fp8 (the GEMMs of training.fp8's linears)"},
    ScenarioKey{"cluster.gpu.hbm_bandwidth", K::bandwidth, 1e9, 1e14, "", "", "from the preset",
                "HBM bandwidth (memory-bound kernels)"},
    ScenarioKey{"cluster.gpu.sm_count", K::integer, 1, 10'000, "SMs", "", "from the preset",
                "streaming multiprocessors: a GEMM runs in waves of this many tiles (its time "
                "follows its shape); communication still slows compute by a fitted factor"},
    ScenarioKey{"cluster.gpu.multicast", K::boolean, 0, 0, "", "", "from the preset",
                "the GPU supports multicast (H100/H200 SXM on NVSwitch: true; A100: false): "
                "only then does fsdp.comm_buffer_pool: process_group use NCCL's pool"},
    ScenarioKey{"cluster.gpu.tdp_w", K::number, 1, 10'000, "W", "", "from the preset",
                "the board power limit that power_cap_w is compared with"},
    ScenarioKey{"cluster.gpu.power_cap_w", K::number, 1, 10'000, "W", "", "none",
                "a power cap (nvidia-smi -pl): lowers the compute clock"},
    ScenarioKey{"cluster.gpu.matmul_efficiency", K::number, 0.01, 1, "fraction of peak", "",
                "from the preset", "achieved fraction of peak FLOP/s on large GEMMs"},
    ScenarioKey{"cluster.gpu.fp8_matmul_efficiency", K::number, 0.01, 1, "fraction of fp8 peak", "",
                "from the preset",
                "achieved fraction of the fp8 peak on large fp8 GEMMs (training.fp8)"},
    ScenarioKey{"cluster.gpu.attention_efficiency", K::number, 0.01, 1, "fraction of peak", "",
                "from the preset",
                "achieved fraction of peak FLOP/s in FlashAttention-2 (model.attention: flash) at "
                "long sequences"},
    ScenarioKey{"cluster.gpu.cudnn_attention_efficiency", K::number, 0.01, 1, "fraction of peak",
                "", "from the preset",
                "the same for cuDNN's fused attention (model.attention: cudnn)"},
    ScenarioKey{"cluster.gpu.triton_attention_efficiency", K::number, 0.01, 1, "fraction of peak",
                "", "from the preset",
                "the same for the Triton FlashAttention of llm-foundry's MPT (model.attention: "
                "triton)"},
    ScenarioKey{"cluster.gpu.triton_attention_overhead", K::number, 0, 4,
                "share of FlashAttention-2's", "", "from the preset",
                "that Triton kernel's per-tile overhead (the keys per query at which it runs at "
                "half its efficiency) as a share of FlashAttention-2's"},
    ScenarioKey{"cluster.gpu.triton_attention_head_dim_overhead", K::number, 0, 4,
                "share of FlashAttention-2's", "", "from the preset",
                "that Triton kernel's slowdown at a head dimension below 128 (the head-dimension "
                "overhead d0) as a share of FlashAttention-2's"},
    ScenarioKey{"cluster.gpu.contention_scale", K::number, 0, 4, "× the SM model", "", "1",
                "how much compute collectives take beside them, as a multiple of what the SMs "
                "their channels hold take from GEMMs and attention (docs/simulator.md)"},
    ScenarioKey{
        .path = "cluster.gpu.device_profile",
        .type = K::text,
        .choices = "a device profile JSON (shardscope profile-device), relative to the scenario",
        .default_value = "none",
        .models = "kernel times measured on this GPU: the cost model uses them where the profile "
                  "has the kernel, the roofline elsewhere (--device-profile overrides it)",
        .names_a_file = true},
    ScenarioKey{"cluster.gpu.context_memory", K::bytes, 0, 0x1p36, "", "", "512 MiB",
                "device memory outside PyTorch's allocator: the CUDA context with the kernels a "
                "training step loads (nvidia-smi's process memory less "
                "torch.cuda.memory_reserved)"},
    ScenarioKey{"cluster.gpu.cublas_workspace", K::bytes, 0, 0x1p32, "", "",
                "32 MiB (H100, H200), 8.125 MiB (A100)",
                "the cuBLAS workspace PyTorch allocates per thread running GEMMs (forward, "
                "autograd), as CUBLAS_WORKSPACE_CONFIG sets it"},
    ScenarioKey{"cluster.nccl", K::section, 0, 0, "", "", "",
                "NCCL's settings that size its device buffers"},
    ScenarioKey{"cluster.nccl.buffsize", K::bytes, 0x1p12, 0x1p32, "", "", "4 MiB",
                "NCCL_BUFFSIZE: the Simple protocol's buffer per connection (LL and LL128 add "
                "5,248 KiB)"},
    ScenarioKey{"cluster.nccl.channels", K::integer, 0, 64, "channels", "", "24",
                "channels per communicator (NCCL's log prints them as 'Channel 00/24'); each "
                "holds one ring connection's buffers and, while a collective runs, one SM that "
                "compute cannot use; 0: no NCCL (a fake process group)"},
    ScenarioKey{"cluster.nvlink", K::section, 0, 0, "", "", "",
                "the NVLink fabric: a node's, or a domain of several (cluster.nvlink.domain)"},
    ScenarioKey{"cluster.nvlink.domain", K::integer, 1, 100'000, "GPUs", "", "from the preset",
                "GPUs on one NVLink fabric, a multiple of cluster.gpus_per_node (GB200 NVL72: "
                "72 GPUs, 4 per node): a collective within it runs on NVLink, not the network"},
    ScenarioKey{"cluster.nvlink.bandwidth", K::bandwidth, 1e9, 1e13, "", "", "from the preset",
                "NVLink bandwidth per GPU, one direction"},
    ScenarioKey{"cluster.nvlink.latency", K::duration, 0, 1e6, "", "", "from the preset",
                "per-step latency of a collective within an NVLink domain"},
    ScenarioKey{"cluster.network", K::section, 0, 0, "", "", "", "the inter-node network"},
    ScenarioKey{"cluster.network.bandwidth", K::bandwidth, 1e8, 1e13, "", "", "from the preset",
                "one NIC's bandwidth, one direction (a NIC per GPU unless "
                "cluster.network.nics_per_node says otherwise)"},
    ScenarioKey{"cluster.network.nics_per_node", K::integer, 1, 256, "NICs", "",
                "one per GPU (cluster.gpus_per_node)",
                "NICs a node has for the inter-node network: fewer than its GPUs share them, each "
                "GPU getting the node's NIC bandwidth over its GPU count"},
    ScenarioKey{"cluster.network.latency", K::duration, 0, 1e7, "", "", "from the preset",
                "per-step latency of an inter-node collective"},
    ScenarioKey{"cluster.network.fabric", K::choice, 0, 0, "", "efa, infiniband, roce", "efa",
                "how nodes reach each other: an Ethernet fabric, AWS EFA or RoCE (the multi-node "
                "all-gather bandwidth measured on EFA, falling with the node count, scaled to the "
                "NIC rate), or a rail-optimised InfiniBand fabric (one NIC per GPU on its own "
                "rail: a ring crosses nodes on every NIC of a node at once, at the share of the "
                "line rate nccl-tests measured, whatever the node count); docs/simulator.md"},
    ScenarioKey{"cluster.pcie", K::section, 0, 0, "", "", "", "the host link (CPU offload)"},
    ScenarioKey{"cluster.pcie.bandwidth", K::bandwidth, 1e8, 1e12, "", "", "from the preset",
                "host↔device copy bandwidth from pinned memory"},
    ScenarioKey{"cluster.pcie.pageable_bandwidth", K::bandwidth, 1e8, 1e12, "", "",
                "from the preset", "host↔device copy bandwidth from pageable memory"},
    ScenarioKey{"cluster.pcie.latency", K::duration, 0, 1e6, "", "", "from the preset",
                "latency of one host↔device copy"},
    ScenarioKey{"cluster.cpu", K::section, 0, 0, "", "", "", "the issuing CPU thread"},
    ScenarioKey{"cluster.cpu.launch_overhead", K::duration, 0, 1e6, "", "", "from the preset",
                "CPU time to launch one kernel or collective"},
    ScenarioKey{"cluster.cpu.fsdp_hook_overhead", K::duration, 0, 1e7, "", "", "from the preset",
                "CPU time of one FSDP pre/post hook"},
    ScenarioKey{"cluster.cpu.optimizer_bandwidth", K::bandwidth, 1e7, 1e12, "", "",
                "from the preset", "bytes/s of the CPU optimizer step under CPU offload"},
    ScenarioKey{.path = "cluster.calibration",
                .type = K::text,
                .choices = "a calibration JSON (shardscope calibrate), relative to the scenario",
                .default_value = "none",
                .models =
                    "cost-model parameters fitted to measured runs: each one the file has replaces "
                    "the preset's and the model's value (--calibration overrides it)",
                .names_a_file = true},
    // ---------------------------------------------------------------- training
    ScenarioKey{"training", K::section, 0, 0, "", "", "", "one training step"},
    ScenarioKey{.path = "training.seq_len",
                .type = K::integer,
                .min = 1,
                .max = 16'777'216,
                .unit = "tokens",
                .default_value = "4096",
                .models = "sequence length",
                .label = "sequence length",
                .value_of = [](const Scenario& s) { return std::to_string(s.training.seq_len); }},
    ScenarioKey{
        .path = "training.micro_batch",
        .type = K::integer,
        .min = 1,
        .max = 65'536,
        .unit = "sequences",
        .default_value = "1",
        .models = "sequences per micro-batch per GPU (seq_len × micro_batch ≤ 134,217,728 tokens)",
        .label = "micro-batch",
        .value_of = [](const Scenario& s) { return std::to_string(s.training.micro_batch); }},
    ScenarioKey{
        .path = "training.grad_accum",
        .type = K::integer,
        .min = 1,
        .max = 10'000,
        .unit = "micro-batches",
        .default_value = "1",
        .models = "micro-batches per optimizer step",
        .label = "gradient accumulation",
        .value_of = [](const Scenario& s) { return std::to_string(s.training.grad_accum); }},
    ScenarioKey{"training.iterations", K::integer, 1, 1'000, "steps", "", "2",
                "optimizer steps simulated; the last is reported as the steady state"},
    ScenarioKey{
        .path = "training.optimizer",
        .type = K::choice,
        .choices = "adamw, adam, sgd",
        .default_value = "adamw",
        .models = "optimizer states per parameter (2, 2, 0)",
        .label = "optimizer",
        .value_of = [](const Scenario& s) { return std::string(to_string(s.training.optimizer)); }},
    ScenarioKey{
        .path = "training.optimizer_impl",
        .type = K::choice,
        .choices = "foreach, fused",
        .default_value = "foreach",
        .models = "torch.optim's kernels: foreach (PyTorch's default on CUDA; AdamW passes over "
                  "parameters and states eight times, Adam seven, and both keep an fp32 "
                  "temporary) or fused (fused=True, torchtitan's default: one pass)",
        .label = "optimizer implementation",
        .value_of =
            [](const Scenario& s) { return std::string(to_string(s.training.optimizer_impl)); }},
    ScenarioKey{"training.synchronize", K::choice, 0, 0, "", "none, after_forward, after_step",
                "none", "a torch.cuda.synchronize() in the step"},
    ScenarioKey{
        .path = "training.activation_checkpointing",
        .type = K::text,
        .choices = "none, full, selective_op, every_N (N ≥ 1)",
        .default_value = "none",
        .models = "what each block saves for backward and recomputes",
        .label = "activation checkpointing",
        .offered = "none, selective_op, full, every_2, every_4",
        .value_of =
            [](const Scenario& s) {
              return to_string(s.training.activation_checkpointing, s.training.checkpoint_every);
            }},
    ScenarioKey{
        .path = "training.loss",
        .type = K::choice,
        .choices = "upcast_fp32, fused, chunked",
        .default_value = "upcast_fp32",
        .models = "the cross-entropy: fp32 copy of the logits (torchtitan, Hugging Face), in-place "
                  "fused (flash-attn xentropy, Megatron), or chunked with no full logits (Liger, "
                  "cut-cross-entropy); docs/semantics.md",
        .label = "loss",
        .value_of = [](const Scenario& s) { return std::string(to_string(s.training.loss)); },
        .search = {"upcast_fp32, fused, chunked", true, false}},
    ScenarioKey{"training.loss_chunk_tokens", K::integer, 1, 134'217'728, "tokens", "",
                "Liger's: next power of two of tokens ÷ ⌈vocab ÷ hidden⌉",
                "training.loss chunked: tokens per chunk (a chunk's logits are live at once)"},
    ScenarioKey{
        .path = "training.autocast",
        .type = K::choice,
        .choices = "none, bf16, fp16",
        .default_value = "none",
        .models =
            "torch.autocast over forward and loss: matmuls in this dtype, each weight cast per "
            "use when the parameters are in another (fp32 all-gathers under FSDP's default "
            "param_dtype); docs/semantics.md",
        .label = "autocast",
        .value_of =
            [](const Scenario& s) {
              return s.training.autocast ? std::string(to_string(*s.training.autocast)) : "none";
            }},
    ScenarioKey{
        .path = "training.fp8",
        .type = K::choice,
        .choices = "none, transformer_engine",
        .default_value = "none",
        .models = "the blocks' projections as TransformerEngine fp8 Linear modules (delayed "
                  "scaling; llm-foundry's amp_fp8 with fc_type te): their GEMMs at the fp8 peak, "
                  "their casts, their fp8 saved tensors; docs/semantics.md",
        .label = "fp8",
        .value_of = [](const Scenario& s) { return std::string(to_string(s.training.fp8)); }},
    ScenarioKey{.path = "training.generation",
                .type = K::section,
                .models = "calls of a method registered with register_fsdp_forward_method "
                          "(generate) before each step's first micro-batch, under no_grad: RL "
                          "rollouts; docs/semantics.md, \"Generation\"",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1 generates under summon_full_params, not modelled; use fsdp.api: "
                           "fsdp2"},
    ScenarioKey{
        .path = "training.generation.calls",
        .type = K::integer,
        .max = 1'000,
        .unit = "calls",
        .default_value = "0 (no generation)",
        .models = "calls of the registered method per optimizer step",
    },
    ScenarioKey{
        .path = "training.generation.batch",
        .type = K::integer,
        .min = 1,
        .max = 65'536,
        .unit = "sequences",
        .default_value = "1",
        .models = "sequences per call per GPU",
    },
    ScenarioKey{
        .path = "training.generation.prompt_tokens",
        .type = K::integer,
        .min = 1,
        .max = 1'048'576,
        .unit = "tokens",
        .default_value = "512",
        .models = "prompt tokens per sequence: one prefill forward of batch × prompt tokens",
    },
    ScenarioKey{
        .path = "training.generation.new_tokens",
        .type = K::integer,
        .min = 1,
        .max = 65'536,
        .unit = "tokens",
        .default_value = "128",
        .models = "tokens generated per sequence: the prefill makes the first, one decode "
                  "forward each of the rest",
    },
    ScenarioKey{
        .path = "training.generation.keep_unsharded",
        .type = K::boolean,
        .default_value = "false",
        .models = "true: set_reshard_after_forward(False) for the call, reshard() after "
                  "it (each group all-gathered once per call, not once per forward)",
    },
    ScenarioKey{
        .path = "training.generation.kv_cache",
        .type = K::choice,
        .choices = "dynamic, preallocated",
        .default_value = "dynamic",
        .models = "Hugging Face's DynamicCache (torch.cat per step) or a preallocated "
                  "StaticCache of prompt + new tokens",
    },
    // ---------------------------------------------------------------- fsdp
    ScenarioKey{"fsdp", K::section, 0, 0, "", "", "", "the FSDP configuration"},
    ScenarioKey{.path = "fsdp.api",
                .type = K::choice,
                .choices = "fsdp2, fsdp1",
                .default_value = "fsdp2",
                .models = "fully_shard (fsdp2) or FullyShardedDataParallel (fsdp1)",
                .label = "API",
                .value_of = [](const Scenario& s) { return std::string(to_string(s.fsdp.api)); }},
    ScenarioKey{
        .path = "fsdp.sharding_strategy",
        .type = K::choice,
        .choices = "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2",
        .default_value = "FULL_SHARD",
        .models = "fsdp1: what is sharded and across which ranks",
        .api = FsdpApi::fsdp1,
        .instead = "under fsdp2 use fsdp.reshard_after_forward (false = SHARD_GRAD_OP) and "
                   "fsdp.mesh.replicate/shard (HYBRID_SHARD)",
        .label = "sharding_strategy",
        .value_of =
            [](const Scenario& s) { return std::string(to_string(s.fsdp.sharding_strategy)); }},
    ScenarioKey{"fsdp.mesh", K::section, 0, 0, "", "", "",
                "the device mesh; replicate × shard = world size"},
    ScenarioKey{
        .path = "fsdp.mesh.replicate",
        .type = K::integer,
        .min = 1,
        .max = 1'000'000,
        .unit = "ranks",
        .default_value = "1 (fsdp1 hybrid: nodes)",
        .models = "replicas (HSDP); gradients are all-reduced across them",
        .label = "HSDP replicas",
        .value_of = [](const Scenario& s) { return std::to_string(s.fsdp.mesh_replicate); }},
    ScenarioKey{"fsdp.mesh.shard", K::integer, 1, 1'000'000, "ranks", "",
                "world size (fsdp1 hybrid: GPUs per node)",
                "ranks each parameter is sharded across"},
    ScenarioKey{
        .path = "fsdp.reshard_after_forward",
        .type = K::bool_or_int,
        .min = 2,
        .max = 1'000'000,
        .unit = "ranks",
        .default_value = "true",
        .models = "fsdp2: free unsharded parameters after forward (true), keep them (false), or "
                  "reshard to a smaller group (a divisor of shard)",
        .api = FsdpApi::fsdp2,
        .instead =
            "under fsdp1 use fsdp.sharding_strategy (FULL_SHARD reshards, SHARD_GRAD_OP does not)",
        .label = "reshard_after_forward",
        .offered = "true, false, 2, 4, 8",
        .value_of = [](const Scenario& s) { return reshard_text(s.fsdp.reshard_after_forward); }},
    ScenarioKey{.path = "fsdp.reshard_root_after_forward",
                .type = K::boolean,
                .default_value = "false",
                .models = "fsdp2: also reshard the root group after forward",
                .api = FsdpApi::fsdp2,
                .instead = "under fsdp1 the root never reshards after forward"},
    ScenarioKey{.path = "fsdp.reshard_last_after_forward",
                .type = K::boolean,
                .default_value = "true",
                .models =
                    "fsdp2: whether the last block group follows reshard_after_forward; torchtitan "
                    "sets false (backward starts with that group, so it keeps its parameters)",
                .api = FsdpApi::fsdp2,
                .instead = "under fsdp1 use fsdp.sharding_strategy"},
    ScenarioKey{
        .path = "fsdp.backward_prefetch",
        .type = K::choice,
        .choices = "BACKWARD_PRE, BACKWARD_POST, none",
        .default_value = "BACKWARD_PRE",
        .models = "fsdp1: when the next all-gather is issued in backward",
        .api = FsdpApi::fsdp1,
        .instead = "under fsdp2 use fsdp.backward_prefetch_modules (fully_shard prefetches one "
                   "group implicitly)",
        .label = "backward_prefetch",
        .value_of =
            [](const Scenario& s) { return std::string(to_string(s.fsdp.backward_prefetch)); },
        .search = {"BACKWARD_PRE, BACKWARD_POST, none", false, false, true}},
    ScenarioKey{.path = "fsdp.forward_prefetch",
                .type = K::boolean,
                .default_value = "false",
                .models = "fsdp1: issue the next forward all-gather before this group's compute",
                .api = FsdpApi::fsdp1,
                .instead = "under fsdp2 use fsdp.forward_prefetch_modules",
                .label = "forward_prefetch",
                .value_of = [](const Scenario& s) { return bool_text(s.fsdp.forward_prefetch); },
                .search = {"false, true", false, false, true}},
    ScenarioKey{
        .path = "fsdp.forward_prefetch_modules",
        .type = K::integer,
        .max = 1'000,
        .unit = "groups",
        .default_value = "0",
        .models = "fsdp2: explicit forward prefetch of the next N groups",
        .api = FsdpApi::fsdp2,
        .instead = "under fsdp1 use fsdp.forward_prefetch: true",
        .label = "forward prefetch",
        .value_of =
            [](const Scenario& s) { return std::to_string(s.fsdp.forward_prefetch_modules); },
        .search = {"0, 1, 2", false, false, true}},
    ScenarioKey{
        .path = "fsdp.backward_prefetch_modules",
        .type = K::integer,
        .max = 1'000,
        .unit = "groups",
        .default_value = "0 (implicit: one group)",
        .models = "fsdp2: explicit backward prefetch of the next N groups",
        .api = FsdpApi::fsdp2,
        .instead = "under fsdp1 use fsdp.backward_prefetch",
        .label = "backward prefetch",
        .value_of =
            [](const Scenario& s) { return std::to_string(s.fsdp.backward_prefetch_modules); },
        .search = {"0, 1, 2", false, false, true}},
    ScenarioKey{.path = "fsdp.unshard_ahead",
                .type = K::integer,
                .max = 1'000,
                .unit = "groups",
                .default_value = "0 (never)",
                .models = "fsdp2: the training step calls unshard(async_op=True) on the first N "
                          "block groups before each forward: copy-in on the default stream, the "
                          "all-gathers ahead of the root's",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1 has no public unshard; use fsdp.forward_prefetch"},
    ScenarioKey{.path = "fsdp.all_gather_buffer",
                .type = K::choice,
                .choices = "caching_allocator, persistent",
                .default_value = "caching_allocator",
                .models = "fsdp2: where all-gather outputs live: the caching allocator, or one "
                          "buffer per group that a custom AllGather (set_custom_all_gather) "
                          "allocates on first use and keeps",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1 has no custom all-gather"},
    ScenarioKey{.path = "fsdp.comm_buffer_pool",
                .type = K::choice,
                .choices = "caching_allocator, process_group",
                .default_value = "caching_allocator",
                .models = "fsdp2: where all-gather outputs and reduce-scatter inputs and outputs "
                          "are allocated: the caching allocator, or the process group's pool "
                          "(set_allocate_memory_from_process_group_for_comm: NCCL's registered "
                          "memory on GPUs with multicast, kept reserved; elsewhere PyTorch falls "
                          "back to the caching allocator)",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1 allocates its communication buffers itself"},
    ScenarioKey{
        .path = "fsdp.separate_reduce_scatter_group",
        .type = K::boolean,
        .default_value = "false",
        .models = "fsdp2: reduce-scatter on its own process group",
        .api = FsdpApi::fsdp2,
        .instead = "fsdp1 reduce-scatters on its process group",
        .label = "separate reduce-scatter group",
        .value_of =
            [](const Scenario& s) { return bool_text(s.fsdp.separate_reduce_scatter_group); },
        .search = {"false, true", false, false, true}},
    ScenarioKey{
        .path = "fsdp.limit_all_gathers",
        .type = K::boolean,
        .default_value = "true",
        .models = "fsdp1: the rate limiter (at most two all-gathers in flight)",
        .api = FsdpApi::fsdp1,
        .instead =
            "fsdp2 needs no rate limiter: its all-gather buffers are freed through stream events",
        .label = "limit_all_gathers",
        .value_of = [](const Scenario& s) { return bool_text(s.fsdp.limit_all_gathers); },
        .search = {"true, false", false, false, true}},
    ScenarioKey{"fsdp.wrap", K::section, 0, 0, "", "", "",
                "how modules are wrapped into FSDP groups"},
    ScenarioKey{
        .path = "fsdp.wrap.blocks_per_group",
        .type = K::integer,
        .min = 1,
        .max = 10'000,
        .unit = "blocks",
        .default_value = "1",
        .models = "transformer blocks per FSDP group",
        .label = "blocks per group",
        .value_of = [](const Scenario& s) { return std::to_string(s.fsdp.blocks_per_group); },
        .search = {"1, 2", false, false, true}},
    ScenarioKey{"fsdp.cpu_offload", K::section, 0, 0, "", "", "", "CPUOffload / CPUOffloadPolicy"},
    // Offloaded first: keeping parameters, gradients and states on the GPU never needs less.
    ScenarioKey{.path = "fsdp.cpu_offload.params",
                .type = K::boolean,
                .default_value = "false",
                .models = "sharded parameters, gradients and the optimizer step on the CPU",
                .label = "CPU offload",
                .value_of = [](const Scenario& s) { return bool_text(s.fsdp.cpu_offload.params); },
                .search = {"true, false", false, true}},
    ScenarioKey{"fsdp.cpu_offload.pin_memory", K::boolean, 0, 0, "", "", "true",
                "pinned host memory (faster copies)"},
    ScenarioKey{"fsdp.mixed_precision", K::section, 0, 0, "", "", "",
                "MixedPrecision / MixedPrecisionPolicy"},
    // The planner tries bf16 mixed precision or none (fp32 throughout: twice the unsharded bytes
    // and the activations); fp16 needs a gradient scaler the simulator does not model.
    ScenarioKey{
        .path = "fsdp.mixed_precision.param_dtype",
        .type = K::dtype,
        .choices = "fp32, bf16, fp16",
        .default_value = "the parameters' dtype (fp32)",
        .models = "all-gather and compute dtype",
        .label = "parameter dtype",
        .value_of = [](const Scenario& s) { return std::string(to_string(param_dtype(s))); },
        .search = {"bf16, fp32", true, true}},
    ScenarioKey{
        .path = "fsdp.mixed_precision.reduce_dtype",
        .type = K::dtype,
        .choices = "fp32, bf16, fp16",
        .default_value = "param_dtype",
        .models = "gradient reduction dtype",
        .label = "reduce dtype",
        .value_of =
            [](const Scenario& s) {
              return std::string(
                  to_string(s.fsdp.mixed_precision.reduce_dtype.value_or(param_dtype(s))));
            },
        .search = {"fp32, bf16", false, false}},
    ScenarioKey{
        .path = "fsdp.mixed_precision.keep_low_precision_grads",
        .type = K::boolean,
        .default_value = "false",
        .models = "fsdp1: keep the sharded gradients in reduce_dtype instead of upcasting them to "
                  "the parameters' dtype (gradient memory and the optimizer's reads)",
        .api = FsdpApi::fsdp1,
        .instead = "under fsdp2 set fsdp.mixed_precision.reduce_dtype"},
    ScenarioKey{.path = "fsdp.mixed_precision.output_dtype",
                .type = K::dtype,
                .choices = "fp32, bf16, fp16",
                .default_value = "none (outputs keep their dtype)",
                .models = "fsdp2: each module's floating-point forward outputs cast to it in its "
                          "post-forward (the root's: the logits the loss reads)",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1's MixedPrecision has no output_dtype"},
    ScenarioKey{.path = "fsdp.mixed_precision.output_dtype_modules",
                .type = K::choice,
                .choices = "every_module, root",
                .default_value = "every_module",
                .models = "fsdp2: which fully_shard calls get output_dtype: the one policy passed "
                          "to every call, or a policy that sets it on the root's call only",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1's MixedPrecision has no output_dtype"},
    ScenarioKey{.path = "fsdp.mixed_precision.cast_forward_inputs",
                .type = K::boolean,
                .default_value = "fsdp2 true, fsdp1 false",
                .models = "each module's floating-point forward inputs cast to param_dtype in its "
                          "pre-forward"},
    ScenarioKey{.path = "fsdp.mixed_precision.cast_root_forward_inputs",
                .type = K::boolean,
                .default_value = "true",
                .models = "fsdp1: the root module's floating-point forward inputs cast to "
                          "param_dtype",
                .api = FsdpApi::fsdp1,
                .instead = "under fsdp2 the root's inputs follow cast_forward_inputs"},
    ScenarioKey{.path = "fsdp.mixed_precision.buffer_dtype",
                .type = K::dtype,
                .choices = "fp32, bf16, fp16",
                .default_value = "param_dtype",
                .models = "fsdp1: the dtype module buffers are cast to (RoPE's inv_freq)",
                .api = FsdpApi::fsdp1,
                .instead = "fsdp2 leaves buffers in their own dtype"},
    ScenarioKey{.path = "fsdp.mixed_precision.module_classes_to_ignore",
                .type = K::text,
                .choices = "module class names, comma-separated",
                .default_value = "_BatchNorm",
                .models = "fsdp1: _module_classes_to_ignore, classes auto-wrap puts in their own "
                          "full-precision unit (batch norms: the modelled models have none)",
                .api = FsdpApi::fsdp1,
                .instead = "fsdp2 takes a policy per fully_shard call"},
    ScenarioKey{"fsdp.requires_gradient_sync", K::choice, 0, 0, "",
                "every_microbatch, last_microbatch", "every_microbatch",
                "reduce-scatter every micro-batch, or only the last (no_sync / "
                "set_requires_gradient_sync)"},
    ScenarioKey{.path = "fsdp.requires_all_reduce",
                .type = K::choice,
                .choices = "every_microbatch, last_microbatch",
                .default_value = "every_microbatch",
                .models = "fsdp2 HSDP: all-reduce every micro-batch or only the last",
                .api = FsdpApi::fsdp2,
                .instead = "under fsdp1 no_sync skips both reductions"},
    ScenarioKey{.path = "fsdp.is_last_backward",
                .type = K::choice,
                .choices = "every_microbatch, last_microbatch",
                .default_value = "every_microbatch",
                .models = "fsdp2: set_is_last_backward(True) on every backward, or only the last "
                          "micro-batch's: the others skip finalize_backward and leave the last "
                          "reduce-scatter pending into the next forward",
                .api = FsdpApi::fsdp2,
                .instead = "FSDP1 finalizes every backward"},
    ScenarioKey{.path = "fsdp.reshard_after_backward",
                .type = K::boolean,
                .default_value = "true",
                .models = "fsdp2: free unsharded parameters after backward",
                .api = FsdpApi::fsdp2,
                .instead = "under fsdp1 the sharding strategy decides"},
    ScenarioKey{
        .path = "fsdp.post_optim_event",
        .type = K::boolean,
        .default_value = "false",
        .models = "fsdp2: the next forward's all-gather waits on an event after the optimizer",
        .api = FsdpApi::fsdp2,
        .instead = "fsdp1 has no post-optimizer event"},
    ScenarioKey{"fsdp.checkpoint", K::section, 0, 0, "", "", "", "state-dict checkpoints"},
    ScenarioKey{"fsdp.checkpoint.every", K::integer, 0, 1'000'000, "steps", "", "0 (never)",
                "save a state dict every N optimizer steps"},
    ScenarioKey{"fsdp.checkpoint.state_dict_type", K::choice, 0, 0, "",
                "FULL_STATE_DICT, SHARDED_STATE_DICT, LOCAL_STATE_DICT", "SHARDED_STATE_DICT",
                "what a checkpoint gathers"},
    ScenarioKey{"fsdp.checkpoint.offload_to_cpu", K::boolean, 0, 0, "", "", "false",
                "state dict tensors copied to the CPU"},
    ScenarioKey{"fsdp.checkpoint.rank0_only", K::boolean, 0, 0, "", "", "false",
                "FULL_STATE_DICT only on rank 0"},
    // ---------------------------------------------------------------- allocator
    ScenarioKey{"allocator", K::section, 0, 0, "", "", "",
                "PyTorch's CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF)"},
    ScenarioKey{
        .path = "allocator.expandable_segments",
        .type = K::boolean,
        .default_value = "false",
        .models = "one growing segment per stream and pool, mapped in 2 MiB pages "
                  "(expandable_segments:True; --expandable-segments sets it)",
        .label = "expandable segments",
        .value_of = [](const Scenario& s) { return bool_text(s.allocator.expandable_segments); },
        .search = {.values = "false, true", .tuning = true, .memory_only = true}},
    ScenarioKey{"allocator.max_split_size_mb", K::integer, 21, 1'048'576, "MiB", "", "unlimited",
                "max_split_size_mb: blocks this large are never split nor given to smaller "
                "requests, and are released first when memory runs short"},
    ScenarioKey{"allocator.roundup_power2_divisions", K::integer, 1, 64, "divisions",
                "a power of two", "1 (512 B rounding)",
                "roundup_power2_divisions: requests round up to N steps between powers of two"},
    ScenarioKey{"allocator.memory_fraction", K::number, 0, 1, "fraction", "", "1",
                "torch.cuda.set_per_process_memory_fraction: the share of the device the "
                "allocator may reserve (0 < F ≤ 1)"},
    ScenarioKey{"allocator.garbage_collection_threshold", K::number, 0, 1, "fraction", "", "off",
                "garbage_collection_threshold (0 < T < 1): above T of the allowed memory, cached "
                "segments unused the longest are freed; PyTorch applies it only with a memory "
                "fraction"},
    ScenarioKey{"allocator.tight_margin", K::number, 0, 0.5, "fraction of capacity", "", "0.02",
                "not PyTorch's: a run that fits with less than this share of the GPU's capacity "
                "free is reported as tight (fragmentation, another library or a longer sequence "
                "can take that much)"},
    // ---------------------------------------------------------------- variation
    ScenarioKey{"variation", K::section, 0, 0, "", "", "",
                "how the ranks of the job differ; any of these replays every rank "
                "(docs/simulator.md, \"Every rank\")"},
    ScenarioKey{"variation.gpu_sigma", K::number, 0, 1, "relative σ", "", "0",
                "each rank's GPU time × max(0.1, 1 + σ·N(0,1)), drawn once per rank (GPUs of one "
                "SKU differ by a few % under power and thermal limits)"},
    ScenarioKey{"variation.slow_ranks", K::text, 0, 0, "", "RANK:FACTOR items, \"3:1.1, 5:1.2\"",
                "none", "those ranks' GPU ops take FACTOR× as long (factor in (0, 100])"},
    ScenarioKey{.path = "variation.slow_nodes",
                .type = K::text,
                .choices = "NODE:FACTOR items, \"3:1.1\"",
                .default_value = "none",
                .models = "every GPU of those nodes so (a rank in slow_ranks wins over its node)",
                .label = "slow node",
                .offered = "none, 0:1.05, 0:1.1, 0:1.2, 0:1.5",
                .value_of = [](const Scenario& s) { return factors_text(s.variation.slow_nodes); }},
    ScenarioKey{.path = "variation.slow_links",
                .type = K::text,
                .choices = "NODE:FACTOR items, \"3:2\"",
                .default_value = "none",
                .models = "those nodes' network links move bytes FACTOR× as long: a collective "
                          "across nodes that include one runs its bandwidth part at the slowest "
                          "link's pace",
                .label = "slow link",
                .offered = "none, 0:1.5, 0:2, 0:4",
                .value_of = [](const Scenario& s) { return factors_text(s.variation.slow_links); }},
    ScenarioKey{"variation.jitter", K::number, 0, 1, "relative σ", "", "0",
                "each GPU op of each rank takes max(0, 1 + σ·N(0,1))× its time"},
    ScenarioKey{"variation.issue_delay", K::duration, 0, 1e9, "", "", "0",
                "mean time the CPU thread is away after issuing each op, exponentially "
                "distributed (the Python thread descheduled now and then)"},
    ScenarioKey{"variation.seed", K::integer, 0, 4'294'967'295.0, "", "", "1",
                "the random seed of every draw above"},
};

std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < kMaxInt)
    return format_count(static_cast<std::int64_t>(v));
  return fmt::format("{:g}", v);
}

}  // namespace

std::span<const ScenarioKey> scenario_keys() {
  return kKeys;
}

const ScenarioKey* find_scenario_key(std::string_view normalised_path) {
  // Every scenario read looks up each key it reads (a sweep, thousands of times a second).
  static const std::unordered_map<std::string_view, const ScenarioKey*> kByPath = [] {
    std::unordered_map<std::string_view, const ScenarioKey*> map;
    for (const auto& k : kKeys) map.emplace(k.path, &k);
    return map;
  }();
  const auto it = kByPath.find(normalised_path);
  return it == kByPath.end() ? nullptr : it->second;
}

const ScenarioKey& key_of(std::string_view path) {
  const ScenarioKey* key = find_scenario_key(path);  // most paths are already normal
  if (!key) key = find_scenario_key(normalise_key_path(path));
  if (!key) throw std::logic_error(fmt::format("scenario key '{}' is not in the key table", path));
  return *key;
}

std::vector<std::string_view> split_choices(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    out.push_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    while (list.starts_with(' ')) list.remove_prefix(1);
  }
  return out;
}

std::vector<std::string> offered_values(const ScenarioKey& key) {
  std::vector<std::string> out;
  if (key.path == "model.preset") {
    for (const auto& p : model_presets()) out.emplace_back(p.name);
  } else if (key.path == "cluster.preset") {
    for (const auto& p : cluster_presets()) out.emplace_back(p.name);
  } else if (!key.offered.empty()) {
    for (const auto v : split_choices(key.offered)) out.emplace_back(v);
  } else if (key.type == K::choice || key.type == K::dtype) {
    for (const auto v : split_choices(key.choices)) out.emplace_back(v);
  } else if (key.type == K::boolean) {
    out = {"false", "true"};
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> job_settings(const Scenario& scenario) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& key : kKeys) {
    if (key.value_of && key_applies(key, scenario.fsdp.api))
      out.emplace_back(key.path, key.value_of(scenario));
  }
  return out;
}

bool key_applies(const ScenarioKey& key, FsdpApi api) {
  return !key.api || *key.api == api;
}

std::optional<std::size_t> choice_index(std::string_view path, std::string_view text) {
  const auto choices = split_choices(key_of(path).choices);
  const auto it = std::find(choices.begin(), choices.end(), text);
  if (it == choices.end()) return std::nullopt;
  return static_cast<std::size_t>(it - choices.begin());
}

std::string_view choice_text(std::string_view path, std::size_t index) {
  const auto choices = split_choices(key_of(path).choices);
  if (index >= choices.size())
    throw std::logic_error(fmt::format("scenario key '{}' has no choice {}", path, index));
  return choices[index];
}

std::string_view to_string(KeyType type) {
  switch (type) {
    case K::section:
      return "section";
    case K::list:
      return "list";
    case K::integer:
      return "integer";
    case K::number:
      return "number";
    case K::boolean:
      return "boolean";
    case K::text:
      return "text";
    case K::choice:
      return "choice";
    case K::dtype:
      return "dtype";
    case K::bytes:
      return "size";
    case K::duration:
      return "duration";
    case K::bandwidth:
      return "bandwidth";
    case K::flops_rate:
      return "FLOP rate";
    case K::bool_or_int:
      return "boolean or integer";
  }
  return "?";
}

std::string key_range_text(const ScenarioKey& k) {
  const std::string unit = k.unit.empty() ? std::string() : fmt::format(" {}", k.unit);
  switch (k.type) {
    case K::integer:
    case K::number:
    case K::bool_or_int:
      return fmt::format("{}..{}{}", number_text(k.min), number_text(k.max), unit);
    case K::bytes:
      return fmt::format("{}..{}", format_bytes(static_cast<Bytes>(k.min)),
                         format_bytes(static_cast<Bytes>(k.max)));
    case K::duration:
      return fmt::format("{}..{}", format_duration(static_cast<TimeNs>(k.min)),
                         format_duration(static_cast<TimeNs>(k.max)));
    case K::bandwidth:
      return fmt::format("{}..{}", format_bandwidth(k.min), format_bandwidth(k.max));
    case K::flops_rate:
      return fmt::format("{}..{}", format_flops_rate(k.min), format_flops_rate(k.max));
    default:
      return {};
  }
}

namespace {
std::string allowed_text(const ScenarioKey& k) {
  if (k.type == K::bool_or_int) return fmt::format("true, false, or {}", key_range_text(k));
  if (!k.choices.empty()) return std::string(k.choices);
  if (k.type == K::boolean) return "true, false";
  return key_range_text(k);
}
}  // namespace

std::string scenario_keys_text(std::string_view prefix) {
  std::string out;
  for (const auto& k : kKeys) {
    if (!k.path.starts_with(prefix) || k.type == K::section || k.type == K::list) continue;
    out += fmt::format("{:<48} {:<10} {}\n", k.path, to_string(k.type), k.models);
    if (const auto allowed = allowed_text(k); !allowed.empty())
      out += fmt::format("{:<48} {:<10} allowed: {}\n", "", "", allowed);
    if (!k.default_value.empty())
      out += fmt::format("{:<48} {:<10} default: {}\n", "", "", k.default_value);
  }
  return out;
}

std::string scenario_keys_markdown() {
  std::string out =
      "# Scenario keys\n\n"
      "Every key a scenario file (YAML or JSON) or `--set key=value` may set. Generated from the "
      "table the\n"
      "reader uses (`core/src/scenario_keys.cpp`) by `shardscope keys --markdown`; `shardscope "
      "keys [PREFIX]`\n"
      "prints the same in a terminal. A value outside its range, of the wrong type, or a key not "
      "listed here is\n"
      "an error naming the file, the key and what is allowed (exit code 2). Sizes take B, KiB, "
      "MiB, GiB, TiB,\n"
      "kB, MB, GB, TB; durations ns, us, µs, ms, s; bandwidths B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, "
      "MiB/s,\n"
      "GiB/s, Mb/s, Gb/s, Gbps; FLOP rates FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s.\n";
  std::string_view section;
  for (const auto& k : kKeys) {
    if (k.type == K::section && k.path.find('.') == std::string_view::npos) {
      section = k.path;
      std::string about(k.models);  // a sentence in the docs: capitalised
      about[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(about[0])));
      out += fmt::format(
          "\n## {}\n\n{}.\n\n| key | type | allowed | default | models |\n|---|---|---|---|---|\n",
          section, about);
      continue;
    }
    if (section.empty()) {
      section = "(top level)";
      out +=
          "\n## Top level\n\n| key | type | allowed | default | models |\n|---|---|---|---|---|\n";
    }
    const std::string allowed = allowed_text(k);
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", k.path, to_string(k.type),
                       allowed.empty() ? "—" : allowed,
                       k.default_value.empty() ? "—" : k.default_value, k.models);
  }
  return out;
}

}  // namespace shardscope
