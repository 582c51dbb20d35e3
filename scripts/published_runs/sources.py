"""The published runs the repo ships, and each as the scenario its run was set up as."""

import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# llm-foundry's MPT tables: those of January 2024, and the A100 80 GB table they replaced (July
# 2023, held out of every fit).
MPT_DATA = [os.path.join(ROOT, "tests", "data", "published", name)
            for name in ("llm_foundry_mpt.csv", "llm_foundry_mpt_2023.csv")]
# Tables no number of the model is fitted to (fitting.py's FITS and ONE_TABLE_FITS name none of
# them): what they show is how the model does on runs it never saw.
HELD_OUT_TABLES = {"a100-80gb-roce-2023"}
TORCHTITAN = os.path.join(ROOT, "tests", "data", "published_runs.csv")
TORCHTITAN_TABLE = "torchtitan-h100"
TORCHTITAN_A100 = os.path.join(ROOT, "tests", "data", "published", "torchtitan_a100.csv")
TORCHTITAN_A100_TABLE = "torchtitan-a100"
# The model presets TorchTitan's rows name (`shardscope presets`): parameters, layers, heads and
# head dimension (for the A100 table's MFU check).
TORCHTITAN_MODELS = {
    "llama3.1-8b": (8_030_261_248, 32, 32, 128),
    "llama3.1-70b": (70_553_706_496, 80, 64, 128),
    "llama2-13b": (13_015_864_320, 40, 40, 128),
    "llama2-70b": (68_976_648_192, 80, 64, 128),
}
A100_PEAK_FLOPS = 312e12  # the A100's dense bf16 peak, torchtitan's MFU denominator
# torchtitan's norm_type (the CSVs' norm column) as shardscope's model.norm: its Triton
# fused_rmsnorm is one kernel; its rmsnorm was an RMSNorm class of PyTorch ops until
# pytorch/torchtitan#985 (March 2025), after every run shipped.
TORCHTITAN_NORMS = {"fused_rmsnorm": "rmsnorm", "rmsnorm": "unfused_rmsnorm"}
# The CSV's techniques other than eager, which shardscope does not model.
TORCHTITAN_NOT_MODELLED = {
    "compile": "torch.compile is not modelled (its fused kernels and the tensors it saves)",
    "compile+float8": "torch.compile and torchao's Float8 linears (fp8 GEMMs and all-gathers) "
                      "are not modelled"}

# MPT shapes of scripts/train/yamls/pretrain/mpt-<size>.yaml (d_model, n_heads, n_layers), the
# same at the commits both CSVs' headers name.
MPT_SHAPES = {
    "125m": (768, 12, 12),
    "350m": (1024, 16, 24),
    "760m": (1536, 12, 24),
    "1b": (2048, 16, 24),
    "3b": (2560, 20, 32),
    "7b": (4096, 32, 32),
    "13b": (5120, 40, 40),
    "30b": (7168, 56, 48),
    "70b": (8192, 64, 80),
}
MPT_VOCAB = 50368
# The dense peak each MPT table's MFU divides by: Composer's GPU_AVAILABLE_FLOPS
# (composer/callbacks/speed_monitor.py, which llm-foundry's collect_results.py reads), by GPU and,
# on the H100, precision.
MPT_PEAK_FLOPS = {"a100_80gb": 312e12, "a100_40gb": 312e12, "h100_80gb": 989e12}
MPT_FP8_PEAK_FLOPS = 1979e12  # the H100's dense fp8 peak, for precision amp_fp8
# How far a row's MFU by the tables' formula may be from the MFU it states: its tokens/s per GPU
# are rounded to the token (0.11 points at most over every shipped row, a 70B one).
MPT_MFU_TOLERANCE = 0.15

# The clusters of the tables' titles. MosaicML's A100 nodes have 1,600 Gb/s of RoCE between
# nodes: 25 GB/s a GPU, the a100 preset's NIC, on RoCE (an Ethernet fabric). The H100 tables do
# not name theirs: MosaicML benchmarked H100s on CoreWeave's HGX H100 (MosaicML's blog,
# "Benchmarking Large Language Models on NVIDIA H100 GPUs with CoreWeave", 2023), whose H100
# clusters are on InfiniBand; a rail-optimised InfiniBand fabric at the h100 preset's 400 Gb/s a
# GPU is assumed (--h100-fabric efa shows the other answer; --a100-fabric infiniband, the A100
# tables on the rail-optimised model).
CLUSTERS = {
    "h100_80gb": "preset: h100-sxm-80gb, network: {{fabric: {h100}}}",
    "a100_80gb": "preset: a100-sxm-80gb, network: {{fabric: {a100}}}",
    "a100_40gb": "preset: a100-sxm-40gb, network: {{fabric: {a100}}}",
}
# The fabric of each GPU's tables, the default of --h100-fabric, --a100-fabric and
# --titan-a100-fabric (TORCHTITAN_CLUSTERS).
DEFAULT_FABRICS = {"h100": "infiniband", "a100": "roce", "titan_a100": "infiniband"}


def mpt_params(size, seq_len):
    """The MPT model's parameter count: tied embedding, position table, biases everywhere."""
    d, _, layers = MPT_SHAPES[size]
    return MPT_VOCAB * d + seq_len * d + layers * (12 * d * d + 13 * d) + 2 * d


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def mfu_percent(params, layers, width, seq_len, tokens_per_s, peak):
    """MFU in per cent as both sources' tables compute it (llm-foundry's README, "MFU";
    torchtitan's train.py of the time): 6 FLOPs per parameter and token plus the attention's
    12 · layers · width · seq_len (width: heads × head dimension), over the dense peak."""
    return 100 * (6 * params + 12 * layers * width * seq_len) * tokens_per_s / peak


def check_mfu(where, tokens_per_s, mfu, stated, tolerance, formula):
    """Exits naming the row when its tokens/s and its published MFU disagree beyond `tolerance`
    points: a mistyped number in a CSV."""
    if abs(mfu - float(stated)) > tolerance:
        sys.exit(f"{where}: {tokens_per_s} tokens/s is {mfu:.2f} % MFU by {formula}, the table "
                 f"says {stated} %")


def mpt_mfu(row):
    """An MPT row's MFU in per cent by its table's formula and Composer's peak."""
    d, _, layers = MPT_SHAPES[row["model"]]
    peak = MPT_FP8_PEAK_FLOPS if row["precision"] == "amp_fp8" else MPT_PEAK_FLOPS[row["gpu"]]
    return mfu_percent(int(row["num_params"]), layers, d, int(row["seq_len"]),
                       float(row["tokens_per_s_per_gpu"]), peak)


def mpt_rows():
    """The rows of every MPT_DATA file, each row's parameter count checked against its shape's and
    its tokens/s against its MFU."""
    rows = []
    for path in MPT_DATA:
        for i, row in enumerate(read_rows(path), 1):
            where = f"{path}: row {i}: mpt-{row['model']} at seq {row['seq_len']}"
            expected = mpt_params(row["model"], int(row["seq_len"]))
            if expected != int(row["num_params"]):
                sys.exit(f"{where} has {expected} parameters by its shape, the table says "
                         f"{row['num_params']}")
            check_mfu(f"{where} on {row['gpus']}", row["tokens_per_s_per_gpu"], mpt_mfu(row),
                      row["mfu_percent"], MPT_MFU_TOLERANCE, "the tables' formula")
            rows.append(row)
    return rows


def torchtitan_row(r, table, gpu):
    """A TorchTitan row in the MPT rows' columns."""
    return {"table": table, "model": r["model"], "seq_len": r["seq_len"], "gpus": r["gpus"],
            "gpu": gpu, "nodes": r["nodes"], "micro_batch": r["local_batch"],
            "activation_checkpointing": r["activation_checkpointing"],
            "techniques": r.get("techniques", "eager"), "ran": r.get("outcome", "ran") == "ran",
            "norm": TORCHTITAN_NORMS[r["norm"]],
            "tokens_per_s_per_gpu": r["tps_per_gpu"] or None, "reserved_gib": r.get("mem_gib"),
            "num_params": TORCHTITAN_MODELS[r["model"]][0]}


def torchtitan_rows():
    """TorchTitan's H100 runs (with the published peak reserved memory) and A100 runs (with the
    two that did not fit), each A100 row's WPS checked against its MFU by torchtitan's formula."""
    rows = [torchtitan_row(r, TORCHTITAN_TABLE, "h100_96gb") for r in read_rows(TORCHTITAN)]
    for i, r in enumerate(read_rows(TORCHTITAN_A100), 1):
        if r["tps_per_gpu"] and r["mfu_percent"]:
            params, layers, heads, head_dim = TORCHTITAN_MODELS[r["model"]]
            mfu = mfu_percent(params, layers, heads * head_dim, int(r["seq_len"]),
                              float(r["tps_per_gpu"]), A100_PEAK_FLOPS)
            check_mfu(f"{TORCHTITAN_A100}: row {i}", r["tps_per_gpu"], mfu, r["mfu_percent"],
                      0.06, "torchtitan's formula")
        rows.append(torchtitan_row(r, TORCHTITAN_A100_TABLE, "a100_80gb"))
    return rows


# Each TorchTitan table's cluster: the H100 runs' GPUs (96 GB of HBM2e at about 2.4 TB/s capped at
# 500 W) and expandable segments, which torchtitan's launch script has set since 2024-10-22
# (pytorch/torchtitan#643), before those December 2024 runs; the A100 runs of April 2024, before
# it, on an unnamed 200 Gb/s fabric (the CSV's header), taken as rail-optimised InfiniBand
# (--titan-a100-fabric roce: shardscope's Ethernet model instead).
TORCHTITAN_CLUSTERS = {
    TORCHTITAN_TABLE: ("H100", "preset: h100-sxm-80gb",
                       {"memory": "96GB", "hbm_bandwidth": "2.4TB/s", "power_cap_w": 500},
                       "allocator: {expandable_segments: true}\n"),
    TORCHTITAN_A100_TABLE: ("A100", "preset: a100-sxm-80gb, network: {{fabric: {titan_a100}}}",
                            {}, ""),
}


def gpu_keys(keys):
    """`keys` as a scenario's cluster.gpu mapping, in flow style ("" when there are none)."""
    return (", gpu: {" + ", ".join(f"{k}: {v}" for k, v in sorted(keys.items())) + "}"
            if keys else "")


def torchtitan_scenario(row, fabric, gpu=None):
    """TorchTitan's setup as the CSVs' headers state it: FSDP2 with bf16 parameters and fp32
    reduction, the last block kept unsharded after forward; the cluster of its table, with the
    cluster.gpu keys `gpu` set over it."""
    gpus, nodes = int(row["gpus"]), int(row["nodes"])
    gpu_name, cluster, table_gpu, allocator = TORCHTITAN_CLUSTERS[row["table"]]
    return (
        f"name: torchtitan {row['model']} on {gpus} {gpu_name}\n"
        f"model: {{preset: {row['model']}, norm: {row['norm']}}}\n"
        f"cluster: {{{cluster.format(**fabric)}, nodes: {nodes}, "
        f"gpus_per_node: {gpus // nodes}{gpu_keys({**table_gpu, **(gpu or {})})}}}\n"
        f"training: {{seq_len: {row['seq_len']}, micro_batch: {row['micro_batch']}, "
        f"activation_checkpointing: {row['activation_checkpointing']}, iterations: 2}}\n"
        f"fsdp: {{mixed_precision: {{param_dtype: bf16, reduce_dtype: fp32}}, "
        f"reshard_last_after_forward: false}}\n"
        + allocator
    ), None


def scenario(row, fabric=None, gpu=None):
    """The scenario of a published row, or (None, reason) when shardscope cannot model it.
    `fabric`: each GPU's tables' fabric (DEFAULT_FABRICS); `gpu`: cluster.gpu keys set over the
    preset's (MPT rows)."""
    fabric = fabric or DEFAULT_FABRICS
    if row["table"] in TORCHTITAN_CLUSTERS:
        if row["techniques"] != "eager":
            return None, TORCHTITAN_NOT_MODELLED[row["techniques"]]
        return torchtitan_scenario(row, fabric, gpu)
    if row["precision"] not in ("amp_bf16", "bf16", "amp_fp8"):
        return None, f"precision {row['precision']} is not modelled"
    if row["activation_cpu_offload"] != "false":
        return None, "activation CPU offload is not modelled"
    d, heads, layers = MPT_SHAPES[row["model"]]
    seq, gpus = int(row["seq_len"]), int(row["gpus"])
    nodes = max(1, gpus // 8)
    # amp_bf16: autocast over the FSDP parameters' dtype; bf16 is Composer's older name for it
    # (deprecated on 2022-11-30, mosaicml/composer bd774514e), which the A100 tables of 2023 ran.
    # Composer's FSDP mixed precision of the time: DEFAULT keeps parameters (and all-gathers) in
    # fp32 and reduces in bf16; PURE gathers and reduces in bf16, so autocast casts no weight.
    # The loss is llm-foundry's default, fused_crossentropy: flash-attn's in-place cross-entropy.
    # Attention is what the benchmark script sets, attn_impl: triton (llm-foundry's Triton
    # FlashAttention).
    # amp_fp8: Composer's bf16 autocast with TransformerEngine's fp8_autocast inside it, which
    # runs llm-foundry's `fc_type: te` projections (TE Linear) in fp8 (llm-foundry's README,
    # "TransformerEngine and amp_fp8 support").
    # After every batch Composer's training loop all-reduces the batch's loss and reads it with
    # .cpu().item() (composer/trainer/trainer.py, _train_loop): the host waits for the step's end,
    # synchronize: after_step (worth about 0.001 % of these runs' throughput in the model).
    autocast = "bf16"
    fp8 = "transformer_engine" if row["precision"] == "amp_fp8" else "none"
    param = "fp32" if row["mp_mode"] == "DEFAULT" else "bf16"
    ckpt = "full" if row["activation_checkpointing"] == "true" else "none"
    return (
        f"name: mpt-{row['model']} seq {seq} on {gpus} {row['gpu']} ({row['table']})\n"
        f"model: {{family: transformer, hidden: {d}, layers: {layers}, heads: {heads}, "
        f"kv_heads: {heads}, ffn_hidden: {4 * d}, vocab: {MPT_VOCAB}, max_seq: {seq}, mlp: gelu, "
        f"norm: low_precision_layernorm, pos_emb: learned, bias: true, tie_embeddings: true, "
        f"attention: triton}}\n"
        f"cluster: {{{CLUSTERS[row['gpu']].format(**fabric)}, nodes: {nodes}, "
        f"gpus_per_node: {gpus // nodes}{gpu_keys(gpu or {})}}}\n"
        f"training: {{seq_len: {seq}, micro_batch: {row['micro_batch']}, "
        f"grad_accum: {row['grad_accum']}, activation_checkpointing: {ckpt}, autocast: {autocast}, "
        f"fp8: {fp8}, loss: fused, optimizer: adamw, synchronize: after_step, iterations: 2}}\n"
        f"fsdp: {{api: fsdp1, sharding_strategy: {row['sharding']}, "
        f"backward_prefetch: BACKWARD_POST, forward_prefetch: false, limit_all_gathers: true, "
        f"mixed_precision: {{param_dtype: {param}, reduce_dtype: bf16}}}}\n"
    ), None
