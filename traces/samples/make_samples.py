#!/usr/bin/env python3
"""Writes the real Kineto traces under traces/samples/: FSDP2 and FSDP1 training a tiny Llama on
the CPU over gloo, two ranks, profiled by torch.profiler with profile_memory and record_shapes.

    build/pytorch-venv/bin/python traces/samples/make_samples.py [OUTDIR] [--check]

Each run trains three steps and profiles the last two (one warm-up step); each rank writes
<api>_rank<r>.json.gz beside <api>.yaml, the scenario of the same job (its model, world, batch
and wrapping) for `shardscope compare`. The traces are trimmed to what a reader of FSDP traces
uses: flow events and the op args no reader of shardscope or HTA needs (Concrete Inputs, Input
Strides, Ev Idx, Record function id, External id, Sequence number, Fwd thread id) are dropped;
every op, range, collective and memory event is kept with its times, shapes and types. gzip
with no timestamp, so the bytes depend only on the run. --check then imports each trace with
shardscope and fails unless every FSDP range and gloo collective was mapped (the PyTorch suite
runs it into a scratch directory: the script keeps working with the pinned PyTorch).
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


def scenario_keys(api: str) -> dict[str, str]:
    keys = TINY_LLAMA.scenario_keys()
    keys.update({
        "cluster.preset": "h100-sxm-80gb",
        "cluster.nodes": "1",
        "cluster.gpus_per_node": str(WORLD),
        "training.seq_len": "16",
        "training.micro_batch": "2",
        "training.iterations": str(STEPS - 1),
        "fsdp.api": api,
    })
    return keys


def run_rank(rank: int, world: int, port: int, api: str, raw: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from shardscope_torch.fsdp import FsdpSettings, shard_model
    from shardscope_torch.model import Transformer
    from shardscope_torch.ranks import finish_rank, init_gloo
    from shardscope_torch.train import TrainingSettings, train

    torch.set_num_threads(1)
    init_gloo(rank, world, port)
    keys = scenario_keys(api)
    keys["training.iterations"] = str(STEPS)
    fsdp = FsdpSettings.from_keys(keys, world, world)
    training = TrainingSettings.from_keys(keys)
    torch.manual_seed(0)
    model = shard_model(Transformer.for_api(TINY_LLAMA, api, training.loss), fsdp,
                        training.activation_checkpointing, torch.device("cpu"))
    path = f"{raw}/{api}_rank{rank}.json"
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                   schedule=schedule(wait=0, warmup=1, active=STEPS - 1),
                   on_trace_ready=lambda p: p.export_chrome_trace(path))
    with prof:
        train(model, fsdp, training, TINY_LLAMA.vocab, torch.device("cpu"),
              on_step=lambda it: prof.step())
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


def check(paths: list[Path]) -> int:
    """shardscope's import report of each trace: every FSDP range and collective mapped."""
    failed = 0
    for path in paths:
        report = shardscope.run(["import", str(path), "--report"]).stdout
        wanted = ("unmapped FSDP ranges            0 ranges",
                  "0 with no issuing c10d op, 0 c10d ops with no gloo collective")
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
    args = p.parse_args()
    out = args.outdir
    written = []
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as raw:
        for api in ("fsdp2", "fsdp1"):
            print(f"{api}: {WORLD} gloo ranks, {STEPS} steps", file=sys.stderr, flush=True)
            spawn(run_rank, WORLD, api, raw)
            (out / f"{api}.yaml").write_text(
                f"# The job traces/samples/{api}_rank*.json.gz ran (make_samples.py).\n"
                + shardscope.scenario_yaml(scenario_keys(api)))
            for rank in range(WORLD):
                trace = json.loads(Path(f"{raw}/{api}_rank{rank}.json").read_text())
                data = json.dumps(trimmed(trace), separators=(",", ":")).encode()
                target = out / f"{api}_rank{rank}.json.gz"
                with open(target, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0,
                                                            filename="") as z:
                    z.write(data)
                print(f"  {target}: {target.stat().st_size / 1024:.0f} KiB", file=sys.stderr)
                written.append(target)
    return check(written) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
