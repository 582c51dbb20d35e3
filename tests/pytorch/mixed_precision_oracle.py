#!/usr/bin/env python3
"""Every MixedPrecisionPolicy / MixedPrecision combination shardscope refuses is one real PyTorch
refuses, for PyTorch's reason, and every one it accepts trains in PyTorch.

Each case is a scenario (the oracle suites' tiny Llama, shapes.TINY_LLAMA, at sequence length 64,
8 ranks of the fake process group, real tensors: FakeTensorMode's meta kernels accept a matmul of
mixed dtypes that the CPU kernel refuses) run for two steps by real FSDP; shardscope validates the
same scenario. A case passes when both accept it, or both refuse it and shardscope's message quotes PyTorch's error. Cases
shardscope refuses as "not modelled" are listed with what PyTorch does, not compared.
(docs/semantics.md, "Mixed-precision casts").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import memory_oracle as m  # noqa: E402  (the rows and scenarios of the memory oracle)

OUT_FP32 = {"fsdp__mixed_precision__output_dtype": "fp32"}
ROOT = {"fsdp__mixed_precision__output_dtype_modules": "root"}


def case(name: str, **keys) -> dict:
    """Accepting or refusing a dtype does not depend on sizes: the tiny Llama, which has every
    module kind, at a short sequence (real tensors on the CPU)."""
    return m.row(name, "tiny", training__seq_len=64, **keys)


def cases() -> list[dict]:
    return [
        case("fsdp2 output fp32 on every module", **OUT_FP32, **m.BF16),
        case("fsdp2 output fp32 on the root", **OUT_FP32, **ROOT, **m.BF16),
        case("fsdp2 output fp32 on the root, fused loss", training__loss="fused", **OUT_FP32,
             **ROOT, **m.BF16),
        case("fsdp2 output fp32 on the root, chunked loss", training__loss="chunked",
             **OUT_FP32, **ROOT, **m.BF16),
        case("fsdp2 output bf16 on every module, bf16 params",
             fsdp__mixed_precision__output_dtype="bf16", **m.BF16),
        case("fsdp2 output fp32 on every module, autocast with fp32 params", **OUT_FP32,
             **m.AUTOCAST),
        case("fsdp2 output bf16 on every module, autocast with fp32 params",
             fsdp__mixed_precision__output_dtype="bf16", **m.AUTOCAST),
        case("fsdp2 no input casts", fsdp__mixed_precision__cast_forward_inputs=False, **m.BF16),
        case("fsdp1 input casts, buffers bf16", fsdp__api="fsdp1",
             fsdp__mixed_precision__cast_forward_inputs=True,
             fsdp__mixed_precision__cast_root_forward_inputs=False,
             fsdp__mixed_precision__buffer_dtype="bf16", **m.BF16),
        case("fsdp1 module classes to ignore", fsdp__api="fsdp1",
             fsdp__mixed_precision__module_classes_to_ignore="_BatchNorm, SyncBatchNorm",
             **m.BF16),
    ]


def pytorch_error(r: dict) -> str:
    """'' when real FSDP trains the row; else the first line of what it raised."""
    r = dict(r, fake=False)
    try:
        m.measure_row(r)
    except Exception as e:  # noqa: BLE001  (whatever PyTorch raises is the answer)
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return ""


def shardscope_refusal(r: dict) -> str:
    """'' when shardscope validates the row's scenario; else its message."""
    from shardscope_torch import shardscope

    def go(path: Path, _tmp: Path) -> str:
        proc = shardscope.run(["validate", str(path)], check=False)
        if proc.returncode == 0:
            return ""
        if proc.returncode != 2:
            raise RuntimeError(f"shardscope validate exited {proc.returncode}:\n{proc.stderr}")
        return " ".join(proc.stderr.split())

    return shardscope.with_scenario(m.scenario_keys(r), go)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--case", default="", help="only cases whose name contains this text")
    args = p.parse_args()
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=8, store=FakeStore())
    failed = 0
    for r in [c for c in cases() if args.case in c["name"]]:
        torch_error, refusal = pytorch_error(r), shardscope_refusal(r)
        if "not modelled" in refusal:
            verdict = "not modelled"
        elif bool(torch_error) != bool(refusal):
            verdict = "FAIL"
        elif torch_error and torch_error.split(": ", 1)[1].split(",")[0] not in refusal:
            verdict = "FAIL (shardscope does not quote PyTorch's error)"
        else:
            verdict = "ok"
        failed += verdict.startswith("FAIL")
        print(f"{r['name']:62} pytorch: {torch_error or 'trains'}")
        print(f"{'':62} shardscope: {refusal or 'accepts'}  -> {verdict}")
    print(f"{failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
