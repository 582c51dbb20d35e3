#!/usr/bin/env python3
"""Oracle A: the collectives real PyTorch FSDP issues, against `shardscope lower` of the same job.

For every case of the grid below, the same scenario keys (a) build, in plain PyTorch on the CPU,
the model shardscope describes, wrap it with FSDP2 `fully_shard` or FSDP1
`FullyShardedDataParallel` exactly as `plan --emit` writes it, and train two iterations over gloo
with 2 or 4 processes, recording every collective (kind, process group, bytes, FSDP group and hook,
phase, iteration, micro-batch); and (b) are lowered by `shardscope lower`. For each communicator
the two sequences must be identical: same kinds, same order, same bytes, same groups and phases.

    tests/pytorch/collective_oracle.py                 # every case; exit 1 on a mismatch
    tests/pytorch/collective_oracle.py --list          # the cases
    tests/pytorch/collective_oracle.py --case fsdp2    # the cases whose name contains fsdp2
    tests/pytorch/collective_oracle.py --json out.json # also write both sequences per case

Differences PyTorch's CPU path has and CUDA does not are listed in KNOWN_CPU_DIFFERENCES with
how we know; none is accepted silently.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from shardscope_torch.shapes import TINY_GPT, TINY_LLAMA  # noqa: E402

MODELS = {"llama": TINY_LLAMA, "gpt": TINY_GPT}


def case(name: str, world: int, model: str = "llama", **keys) -> dict:
    return {"name": name, "world": world, "model": model,
            "keys": {k.replace("__", "."): str(v).lower() if isinstance(v, bool) else str(v)
                     for k, v in keys.items()}}


def fsdp2_cases() -> list[dict]:
    c = []
    for model in ("llama", "gpt"):
        c.append(case(f"fsdp2 {model} default", 2, model))
    c += [
        case("fsdp2 reshard false", 2, fsdp__reshard_after_forward=False),
        case("fsdp2 reshard 2 of 4", 4, fsdp__reshard_after_forward=2),
        case("fsdp2 reshard root", 2, fsdp__reshard_root_after_forward=True),
        case("fsdp2 keep last", 2, fsdp__reshard_last_after_forward=False),
        case("fsdp2 forward prefetch 1", 2, fsdp__forward_prefetch_modules=1),
        case("fsdp2 forward prefetch 2", 2, fsdp__forward_prefetch_modules=2),
        case("fsdp2 unshard ahead 2", 2, fsdp__unshard_ahead=2),
        # register_fsdp_forward_method(model, "generate") called before each step
        case("fsdp2 generate", 2, training__generation__calls=1, training__generation__batch=2,
             training__generation__prompt_tokens=6, training__generation__new_tokens=3),
        case("fsdp2 generate keep unsharded", 2, training__generation__calls=2,
             training__generation__prompt_tokens=6, training__generation__new_tokens=3,
             training__generation__keep_unsharded=True),
        case("fsdp2 generate static cache prefetch", 2, training__generation__calls=1,
             training__generation__prompt_tokens=6, training__generation__new_tokens=2,
             training__generation__kv_cache="preallocated", fsdp__forward_prefetch_modules=1),
        case("fsdp2 backward prefetch 1", 2, fsdp__backward_prefetch_modules=1),
        case("fsdp2 backward prefetch 2", 2, fsdp__backward_prefetch_modules=2),
        case("fsdp2 bf16 fp32", 2, fsdp__mixed_precision__param_dtype="bf16",
             fsdp__mixed_precision__reduce_dtype="fp32"),
        case("fsdp2 bf16 bf16", 2, fsdp__mixed_precision__param_dtype="bf16",
             fsdp__mixed_precision__reduce_dtype="bf16"),
        case("fsdp2 fp32 bf16", 2, fsdp__mixed_precision__reduce_dtype="bf16"),
        case("fsdp2 cpu offload", 2, fsdp__cpu_offload__params=True),
        case("fsdp2 accumulate sync every", 2, training__grad_accum=2),
        case("fsdp2 accumulate sync last", 2, training__grad_accum=2,
             fsdp__requires_gradient_sync="last_microbatch"),
        case("fsdp2 accumulate bf16 sync last", 2, training__grad_accum=2,
             fsdp__requires_gradient_sync="last_microbatch",
             fsdp__mixed_precision__param_dtype="bf16", fsdp__mixed_precision__reduce_dtype="fp32"),
        case("fsdp2 hsdp 2x2", 4, fsdp__mesh__replicate=2, fsdp__mesh__shard=2),
        case("fsdp2 hsdp 2x2 all-reduce last", 4, fsdp__mesh__replicate=2, fsdp__mesh__shard=2,
             training__grad_accum=2, fsdp__requires_all_reduce="last_microbatch"),
        case("fsdp2 no reshard after backward", 2, fsdp__reshard_after_backward=False),
        case("fsdp2 full checkpointing", 2, training__activation_checkpointing="full"),
        case("fsdp2 gpt full checkpointing", 2, "gpt", training__activation_checkpointing="full"),
        case("fsdp2 every_2 checkpointing", 2, training__activation_checkpointing="every_2"),
        case("fsdp2 selective_op checkpointing", 2,
             training__activation_checkpointing="selective_op"),
        case("fsdp2 gpt selective_op checkpointing", 2, "gpt",
             training__activation_checkpointing="selective_op"),
        case("fsdp2 two blocks per group", 2, fsdp__wrap__blocks_per_group=2),
        case("fsdp2 fused loss", 2, training__loss="fused"),
        case("fsdp2 chunked loss", 2, training__loss="chunked"),
        case("fsdp2 chunked loss keep nothing", 2, training__loss="chunked",
             fsdp__reshard_last_after_forward=True, fsdp__backward_prefetch_modules=1),
    ]
    return c


def fsdp1_cases() -> list[dict]:
    c = []
    for strategy, prefetch, fwd, limit in itertools.product(
            ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD"],
            ["BACKWARD_PRE", "BACKWARD_POST", "none"], [False, True], [True, False]):
        c.append(case(f"fsdp1 {strategy} {prefetch} fwd-prefetch {fwd} limit {limit}",
                      4 if strategy == "HYBRID_SHARD" else 2, fsdp__api="fsdp1",
                      fsdp__sharding_strategy=strategy, fsdp__backward_prefetch=prefetch,
                      fsdp__forward_prefetch=fwd, fsdp__limit_all_gathers=limit))
    c += [
        case("fsdp1 gpt default", 2, "gpt", fsdp__api="fsdp1"),
        case("fsdp1 bf16 fp32", 2, fsdp__api="fsdp1", fsdp__mixed_precision__param_dtype="bf16",
             fsdp__mixed_precision__reduce_dtype="fp32"),
        # SGD: PyTorch's Adam and AdamW refuse gradients of another dtype than the parameters.
        case("fsdp1 keep low precision grads", 2, fsdp__api="fsdp1",
             fsdp__mixed_precision__param_dtype="bf16", fsdp__mixed_precision__reduce_dtype="bf16",
             fsdp__mixed_precision__keep_low_precision_grads=True, training__optimizer="sgd"),
        case("fsdp1 cpu offload", 2, fsdp__api="fsdp1", fsdp__cpu_offload__params=True),
        case("fsdp1 no_sync", 2, fsdp__api="fsdp1", training__grad_accum=2,
             fsdp__requires_gradient_sync="last_microbatch"),
        case("fsdp1 SHARD_GRAD_OP no_sync", 2, fsdp__api="fsdp1", training__grad_accum=2,
             fsdp__sharding_strategy="SHARD_GRAD_OP",
             fsdp__requires_gradient_sync="last_microbatch"),
        case("fsdp1 full checkpointing", 2, fsdp__api="fsdp1",
             training__activation_checkpointing="full"),
        # Forward prefetch moves a handle's post-backward hook behind the previous handle's
        # backward, except where checkpointing makes new views (fsdp1_lowerer.cpp).
        case("fsdp1 fwd-prefetch full checkpointing", 2, fsdp__api="fsdp1",
             fsdp__forward_prefetch=True, training__activation_checkpointing="full"),
        case("fsdp1 fwd-prefetch every_2 checkpointing", 2, fsdp__api="fsdp1",
             fsdp__forward_prefetch=True, training__activation_checkpointing="every_2"),
        case("fsdp1 NO_SHARD fwd-prefetch every_2 checkpointing", 2, fsdp__api="fsdp1",
             fsdp__sharding_strategy="NO_SHARD", fsdp__forward_prefetch=True,
             training__activation_checkpointing="every_2"),
        case("fsdp1 fwd-prefetch accumulate", 2, fsdp__api="fsdp1", fsdp__forward_prefetch=True,
             training__grad_accum=2),
        case("fsdp1 fwd-prefetch no_sync", 2, fsdp__api="fsdp1", fsdp__forward_prefetch=True,
             training__grad_accum=2, fsdp__requires_gradient_sync="last_microbatch"),
        case("fsdp1 gpt fwd-prefetch BACKWARD_POST", 2, "gpt", fsdp__api="fsdp1",
             fsdp__forward_prefetch=True, fsdp__backward_prefetch="BACKWARD_POST"),
        # The chunked loss runs inside the root's forward under FSDP1 (fsdp1_lowerer.cpp).
        case("fsdp1 chunked loss", 2, fsdp__api="fsdp1", training__loss="chunked"),
        case("fsdp1 chunked loss BACKWARD_POST", 2, fsdp__api="fsdp1", training__loss="chunked",
             fsdp__backward_prefetch="BACKWARD_POST"),
        case("fsdp1 chunked loss fwd-prefetch", 2, fsdp__api="fsdp1", training__loss="chunked",
             fsdp__forward_prefetch=True),
    ]
    return c


def all_cases() -> list[dict]:
    return fsdp2_cases() + fsdp1_cases()


def scenario_keys(c: dict) -> dict[str, str]:
    """The case as a whole scenario: the tiny model, one node of `world` GPUs (two nodes for
    FSDP1's hybrid strategies, whose default mesh is nodes x GPUs per node), tiny batches."""
    keys = MODELS[c["model"]].scenario_keys()
    hybrid = c["keys"].get("fsdp.sharding_strategy", "").startswith(("HYBRID", "_HYBRID"))
    nodes = 2 if hybrid else 1
    keys.update({
        "cluster.preset": "h100-sxm-80gb",
        "cluster.nodes": str(nodes),
        "cluster.gpus_per_node": str(c["world"] // nodes),
        "training.seq_len": "16",
        "training.micro_batch": "2",
        "training.iterations": "2",
    })
    keys.update(c["keys"])
    return keys


# ---------------------------------------------------------------------------------------------
# The PyTorch side: one process per rank runs every case of its world size.


def run_rank(rank: int, world: int, port: int, cases: list[dict], out: str,
             matmuls: bool = False) -> None:
    import torch
    import torch.distributed as dist

    from shardscope_torch.collectives import (CollectiveRecorder, fsdp1_communicators,
                                              fsdp2_communicators, mark_compute, tag_fsdp_calls)
    from shardscope_torch.fsdp import FsdpSettings, offload_without_cuda, shard_model
    from shardscope_torch.model import Transformer
    from shardscope_torch.train import TrainingSettings, train

    from shardscope_torch.ranks import finish_rank, init_gloo

    torch.set_num_threads(1)
    init_gloo(rank, world, port)
    device = torch.device("cpu")
    results = []
    for c in cases:
        keys = scenario_keys(c)
        started = time.monotonic()
        try:
            torch.manual_seed(0)
            shape = MODELS[c["model"]]
            fsdp = FsdpSettings.from_keys(keys, world, int(keys["cluster.gpus_per_node"]))
            training = TrainingSettings.from_keys(keys)
            model = Transformer.for_api(shape, fsdp.api, training.loss)
            with offload_without_cuda():
                model = shard_model(model, fsdp, training.activation_checkpointing, device)
            if fsdp.api == "fsdp2":
                comms = fsdp2_communicators(model)
            else:
                comms = fsdp1_communicators(model, fsdp.sharding_strategy)
            recorder = CollectiveRecorder(comms, matmuls,
                                          getattr(model, "module", model).loss_in_forward)
            names = {id(m): n for n, m in model.named_modules()}
            hooks = mark_compute(model, recorder, fsdp.blocks_per_group)
            with tag_fsdp_calls(recorder, names), recorder, offload_without_cuda():
                losses = train(model, fsdp, training, shape.vocab, device, recorder.set_phase)
            for h in hooks:
                h.remove()
            results.append({"name": c["name"], "collectives": recorder.rows,
                            "losses": losses, "seconds": time.monotonic() - started})
            del model
        except Exception as e:  # reported per case; the other cases go on
            import traceback
            results.append({"name": c["name"], "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()})
        dist.barrier()
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    finish_rank()


def run_pytorch(cases: list[dict], matmuls: bool = False) -> dict[str, dict]:
    """Every case under real PyTorch, grouped by world size; results by case name."""
    from shardscope_torch.ranks import spawn

    results = {}
    for world in sorted({c["world"] for c in cases}):
        batch = [c for c in cases if c["world"] == world]
        with tempfile.TemporaryDirectory() as tmp:
            out = str(Path(tmp) / "rows.json")
            print(f"pytorch: {len(batch)} cases on {world} gloo processes", file=sys.stderr,
                  flush=True)
            spawn(run_rank, world, batch, out, matmuls)
            for r in json.loads(Path(out).read_text()):
                results[r["name"]] = r
    return results


# ---------------------------------------------------------------------------------------------
# Comparison

FIELDS = ("iteration", "microbatch", "phase", "kind", "bytes", "group")

# Differences between PyTorch's CPU path and its CUDA path that show in what is issued, with how
# we know. Each entry: a case-name substring and a function that maps the PyTorch rows to what
# the CUDA path issues. None so far: every difference found was fixed in shardscope.
KNOWN_CPU_DIFFERENCES: list = []


def by_communicator(rows: list[dict]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for r in rows:
        if r["communicator"] != "compute":
            out.setdefault(r["communicator"], []).append(tuple(r[f] for f in FIELDS))
    return out


ORDER_FIELDS = ("iteration", "microbatch", "phase", "kind", "group")


def issue_order(rows: list[dict]) -> list[tuple]:
    """Collectives and compute ops in CPU issue order, consecutive repeats folded."""
    out: list[tuple] = []
    for r in rows:
        t = tuple(r[f] for f in ORDER_FIELDS)
        if not out or out[-1] != t:
            out.append(t)
    return out


def first_difference(what: str, pa: list[tuple], pb: list[tuple], fields) -> str:
    first = next((i for i, (x, y) in enumerate(zip(pa, pb)) if x != y), min(len(pa), len(pb)))

    def show(seq, i):
        return " ".join(str(v) for v in seq[i]) if i < len(seq) else "(none)"

    return (f"{what}: pytorch {len(pa)}, shardscope {len(pb)}; first difference at #{first}: "
            f"pytorch [{show(pa, first)}] vs shardscope [{show(pb, first)}]")


def compare(pytorch_rows: list[dict], shardscope_rows: list[dict]) -> tuple[list[str], list[str]]:
    """(differences in the collectives per communicator, differences in the issue order of
    collectives and compute), one line each; both empty when everything is identical."""
    a, b = by_communicator(pytorch_rows), by_communicator(shardscope_rows)
    collectives = [first_difference(f"communicator {comm}", a.get(comm, []), b.get(comm, []),
                                    FIELDS)
                   for comm in sorted(set(a) | set(b)) if a.get(comm, []) != b.get(comm, [])]
    oa, ob = issue_order(pytorch_rows), issue_order(shardscope_rows)
    order = [] if oa == ob else [first_difference("issue order", oa, ob, ORDER_FIELDS)]
    return collectives, order


def show_sequence(rows: list[dict]) -> None:
    """One line per collective; the matmuls between two collectives folded into a count."""
    matmuls = 0
    for r in rows:
        if r["kind"] == "matmul":
            matmuls += 1
            continue
        if matmuls:
            print(f"      {matmuls} matmuls")
            matmuls = 0
        if r["communicator"] == "compute":
            print(f"  it{r['iteration']} mb{r['microbatch']} {r['phase']:9} {r['kind']:14} "
                  f"{r['group']}")
            continue
        print(f"  it{r['iteration']} mb{r['microbatch']} {r['phase']:9} {r['kind']:14} "
              f"{r['communicator']:12} {r['bytes']:9} B  {r['group']:10} {r['hook']}")
    if matmuls:
        print(f"      {matmuls} matmuls")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--list", action="store_true", help="print the cases and stop")
    p.add_argument("--case", default="", help="only cases whose name contains this text")
    p.add_argument("--json", help="write both sequences of every case here")
    p.add_argument("--show", action="store_true",
                   help="print PyTorch's sequence of each case with its hooks and the matmuls "
                        "between the collectives (a diagnostic; compares nothing)")
    args = p.parse_args()
    cases = [c for c in all_cases() if args.case in c["name"]]
    if args.list:
        for c in cases:
            print(f"{c['name']:60} world {c['world']}  {c['keys']}")
        return 0
    if not cases:
        print(f"no case matches {args.case!r}", file=sys.stderr)
        return 2
    from shardscope_torch import shardscope

    started = time.monotonic()
    if args.show:
        for name, r in run_pytorch(cases, matmuls=True).items():
            print(f"== {name}")
            show_sequence(r.get("collectives", []))
        return 0
    measured = run_pytorch(cases)
    identical, same_order, failed, report = 0, 0, 0, []
    for c in cases:
        r = measured[c["name"]]
        if "error" in r:
            failed += 1
            print(f"FAIL  {c['name']}: PyTorch raised {r['error']}\n{r['traceback']}")
            continue
        predicted = shardscope.ir_sequence(shardscope.lower(scenario_keys(c)))
        collectives, order = compare(r["collectives"], predicted)
        report.append({"case": c, "pytorch": r["collectives"], "shardscope": predicted,
                       "collectives": collectives, "order": order})
        identical += not collectives
        same_order += not collectives and not order
        if collectives or order:
            failed += 1
            print(f"FAIL  {c['name']}")
            for line in collectives + order:
                print(f"      {line}")
        else:
            count = sum(1 for row in predicted if row["communicator"] != "compute")
            print(f"ok    {c['name']}: {count} collectives and the issue order identical")
    print(f"{identical} of {len(cases)} settings issue identical collectives per communicator; "
          f"{same_order} also in the same order among the compute ops "
          f"({time.monotonic() - started:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
