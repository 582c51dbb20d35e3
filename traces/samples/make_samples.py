#!/usr/bin/env python3
"""Writes the real Kineto traces under traces/samples/: FSDP2 and FSDP1 training a tiny Llama on
the CPU over gloo, two ranks, profiled by torch.profiler with profile_memory and record_shapes;
and FSDP2 generating before each step (fsdp2_generate: a registered generate, one call of a
2-sequence batch, 8 prompt tokens, 3 new, as an RL rollout does).

    build/pytorch-venv/bin/python traces/samples/make_samples.py [OUTDIR] [--check]
    python3 traces/samples/make_samples.py OUTDIR --device cuda --check   # on a GPU

Each run trains three steps and profiles the last two (one warm-up step); each rank writes
<sample>_rank<r>.json.gz beside <sample>.yaml, the scenario of the same job (its model, world, batch
and wrapping) for `shardscope compare`. The traces are trimmed to what a reader of FSDP traces
uses: flow events and the op args no reader of shardscope or HTA needs (Concrete Inputs, Input
Strides, Ev Idx, Record function id, External id, Sequence number, Fwd thread id) are dropped;
every op, range, collective and memory event is kept with its times, shapes and types. gzip
with no timestamp, so the bytes depend only on the run. --check then imports each trace with
shardscope and fails unless every FSDP range and gloo collective was mapped (the PyTorch suite
runs it into a scratch directory: the script keeps working with the pinned PyTorch).

--device cuda (scripts/gpu-campaign) traces the same job on one GPU instead: one rank over NCCL
(NCCL takes one GPU per rank), CPU and CUDA activities, so the traces hold the GPU kernels, NCCL's
and the caching allocator's memory events.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "scripts"))

from shardscope_torch import shardscope  # noqa: E402
from shardscope_torch.shapes import TINY_LLAMA  # noqa: E402

WORLD = 2
STEPS = 3  # the first is not profiled (warm-up)
DROPPED_ARGS = ("Concrete Inputs", "Input Strides", "Ev Idx", "Record function id", "External id",
                "Sequence number", "Fwd thread id")


# Each sample's scenario keys beyond the common ones.
SAMPLES = {
    "fsdp2": {"fsdp.api": "fsdp2"},
    "fsdp1": {"fsdp.api": "fsdp1"},
    "fsdp2_generate": {"fsdp.api": "fsdp2", "training.generation.calls": "1",
                       "training.generation.batch": "2",
                       "training.generation.prompt_tokens": "8",
                       "training.generation.new_tokens": "3"},
}


def scenario_keys(sample: str, world: int = WORLD) -> dict[str, str]:
    keys = TINY_LLAMA.scenario_keys()
    keys.update({
        "cluster.preset": "h100-sxm-80gb",
        "cluster.nodes": "1",
        "cluster.gpus_per_node": str(world),
        "training.seq_len": "16",
        "training.micro_batch": "2",
        "training.iterations": str(STEPS - 1),
        **SAMPLES[sample],
    })
    return keys


def run_rank(rank: int, world: int, port: int, sample: str, raw: str, device_type: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from shardscope_torch.fsdp import FsdpSettings, shard_model
    from shardscope_torch.model import Transformer
    from shardscope_torch.ranks import finish_rank, init_gloo
    from shardscope_torch.train import TrainingSettings, train

    torch.set_num_threads(1)
    cuda = device_type == "cuda"
    init_gloo(rank, world, port, backend="nccl" if cuda else "gloo")
    keys = scenario_keys(sample, world)
    keys["training.iterations"] = str(STEPS)
    fsdp = FsdpSettings.from_keys(keys, world, world)
    training = TrainingSettings.from_keys(keys)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = shard_model(Transformer.for_api(TINY_LLAMA, fsdp.api, training.loss), fsdp,
                        training.activation_checkpointing, device)
    path = f"{raw}/{sample}_rank{rank}.json"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(activities=activities, profile_memory=True, record_shapes=True,
                   schedule=schedule(wait=0, warmup=1, active=STEPS - 1),
                   on_trace_ready=lambda p: p.export_chrome_trace(path))
    with prof:
        train(model, fsdp, training, TINY_LLAMA.vocab, device, on_step=lambda it: prof.step())
    finish_rank()


def trimmed(trace: dict) -> dict:
    events = []
    for e in trace["traceEvents"]:
        if e.get("cat") == "fwdbwd":
            continue
        args = e.get("args")
        if isinstance(args, dict):
            for key in DROPPED_ARGS:
                args.pop(key, None)
        events.append(e)
    trace["traceEvents"] = events
    return trace


def check(paths: list[Path], device_type: str) -> int:
    """shardscope's import report of each trace: every FSDP range and collective mapped."""
    failed = 0
    for path in paths:
        report = shardscope.run(["import", str(path), "--report"]).stdout
        wanted = ("unmapped FSDP ranges            0 ranges",
                  "0 with no issuing c10d op, 0 c10d ops with no gloo collective"
                  if device_type == "cpu" else "(0 with no CPU launch found)")
        missing = [w for w in wanted if w not in report]
        failed += bool(missing)
        print(f"{'FAIL' if missing else 'ok  '} {path.name}" +
              (f": the report lacks {missing}\n{report}" if missing else
               ": every FSDP range and gloo collective mapped"))
    return 1 if failed else 0


def main() -> int:
    import argparse
    import tempfile

    from shardscope_torch.ranks import spawn

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("outdir", nargs="?", type=Path, default=HERE)
    p.add_argument("--check", action="store_true", help="import each trace and check the report")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: one rank on this machine's GPU over NCCL")
    p.add_argument("--sample", choices=sorted(SAMPLES), action="append",
                   help="only this sample (repeatable; default: every one)")
    args = p.parse_args()
    out = args.outdir
    world = 1 if args.device == "cuda" else WORLD
    written = []
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as raw:
        for sample in args.sample or SAMPLES:
            print(f"{sample}: {world} {args.device} ranks, {STEPS} steps", file=sys.stderr,
                  flush=True)
            spawn(run_rank, world, sample, raw, args.device)
            (out / f"{sample}.yaml").write_text(
                f"# The job {sample}_rank*.json.gz ran (traces/samples/make_samples.py).\n"
                + shardscope.scenario_yaml(scenario_keys(sample, world)))
            for rank in range(world):
                trace = json.loads(Path(f"{raw}/{sample}_rank{rank}.json").read_text())
                data = json.dumps(trimmed(trace), separators=(",", ":")).encode()
                target = out / f"{sample}_rank{rank}.json.gz"
                with open(target, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0,
                                                            filename="") as z:
                    z.write(data)
                print(f"  {target}: {target.stat().st_size / 1024:.0f} KiB", file=sys.stderr)
                written.append(target)
    return check(written, args.device) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
