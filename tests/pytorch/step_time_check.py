#!/usr/bin/env python3
"""PyTorch's measured step time beside shardscope's, for memory-oracle rows measured on a GPU.

    tests/pytorch/step_time_check.py CSV --device-profile PROFILE --max-error PCT
                                     [--max-preset-error PCT]

CSV is a `memory_oracle.py --device cuda --measure` file (its step_ms column: the median step of
real PyTorch on one GPU as rank 0 of the fake process group, so communication is free). Each row
is simulated twice: with its cluster preset's kernel efficiencies, and with PROFILE, a device
profile of the same GPU whose GEMM and attention times PyTorch measured
(tests/pytorch/torch_kernel_profile.py). The simulation with PROFILE must be within PCT of the
measured step time; with --max-preset-error the preset's too (else it is printed beside it). Exit
0 when every row holds, 1 when one does not, 2 for bad input.

The bound is what the cost model holds today (docs/validation.md, "The second GPU campaign"), so
a change that makes the prediction worse fails here; the fidelity target is tighter.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import memory_oracle
from shardscope_torch import shardscope


def simulated_ms(keys: dict[str, str], extra: list[str]) -> float:
    def go(path: Path, tmp: Path) -> float:
        out = tmp / "summary.json"
        shardscope.run(["simulate", str(path), *extra, "--json", str(out)])
        return 1e3 * json.loads(out.read_text())["step_time_s"]
    return shardscope.with_scenario(keys, go)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("csv", type=Path)
    p.add_argument("--device-profile", type=Path, required=True)
    p.add_argument("--max-error", type=float, required=True, metavar="PCT")
    p.add_argument("--max-preset-error", type=float, metavar="PCT")
    args = p.parse_args()
    for path in (args.csv, args.device_profile):
        if not path.is_file():
            print(f"error: {path}: no such file", file=sys.stderr)
            return 2
    rows = [r for r in memory_oracle.read_csv(args.csv) if "step_ms" in r]
    if not rows:
        print(f"error: {args.csv}: no row has a step_ms (measured on a GPU)", file=sys.stderr)
        return 2
    print(f"{'row':46} {'PyTorch':>10} {'preset':>18} {'PyTorch kernels':>18}")
    failed = 0
    for r in rows:
        keys = memory_oracle.scenario_keys(r, "cuda")
        ms = r["step_ms"]
        preset = simulated_ms(keys, [])
        profiled = simulated_ms(keys, ["--device-profile", str(args.device_profile)])
        error, preset_error = 100 * (profiled - ms) / ms, 100 * (preset - ms) / ms
        verdict = "" if abs(error) <= args.max_error else f"  FAIL (beyond {args.max_error} %)"
        if args.max_preset_error is not None and abs(preset_error) > args.max_preset_error:
            verdict += f"  FAIL (preset beyond {args.max_preset_error} %)"
        failed += bool(verdict)
        print(f"{r['name']:46} {ms:7.1f} ms {preset:7.1f} ms {preset_error:+6.1f} % "
              f"{profiled:7.1f} ms {error:+6.1f} %{verdict}")
    preset_bound = ("" if args.max_preset_error is None else
                    f", and within {args.max_preset_error} % with the preset")
    print(f"{len(rows) - failed} of {len(rows)} rows within {args.max_error} % with PyTorch's "
          f"kernel times{preset_bound}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
