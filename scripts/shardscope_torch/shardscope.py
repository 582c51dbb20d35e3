"""Running the ``shardscope`` CLI on a set of scenario keys and reading what it predicts."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COLLECTIVE_KINDS = ("all_gather", "reduce_scatter", "all_reduce")
COMPUTE_KINDS = ("forward", "recompute", "backward")


def cli() -> str:
    """The shardscope binary: $SHARDSCOPE, else the default build's."""
    path = os.environ.get("SHARDSCOPE", str(REPO / "build" / "cli" / "shardscope"))
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no shardscope binary (build it with `make build`, or "
                                f"set SHARDSCOPE)")
    return path


def scenario_yaml(keys: dict[str, str]) -> str:
    """A scenario file of dotted keys, as nested YAML (every value quoted as text is read back
    as the typed value the key table wants)."""
    tree: dict = {}
    for key, value in sorted(keys.items()):
        node = tree
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value

    def emit(node: dict, indent: int) -> list[str]:
        lines = []
        for k, v in node.items():
            if isinstance(v, dict):
                lines.append(" " * indent + f"{k}:")
                lines += emit(v, indent + 2)
            else:
                lines.append(" " * indent + f"{k}: {v}")
        return lines

    return "\n".join(emit(tree, 0)) + "\n"


def run(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([cli(), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"shardscope {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stdout}{proc.stderr}")
    return proc


def with_scenario(keys: dict[str, str], fn):
    """Calls fn(path) with the keys written as a scenario file."""
    with tempfile.TemporaryDirectory(prefix="shardscope-oracle-") as tmp:
        path = Path(tmp) / "scenario.yaml"
        path.write_text(scenario_yaml(keys))
        return fn(path, Path(tmp))


def lower(keys: dict[str, str]) -> dict:
    """The schedule IR (shardscope.schedule JSON) of the scenario the keys describe."""

    def go(path: Path, tmp: Path) -> dict:
        out = tmp / "ir.json"
        run(["lower", str(path), "--json", str(out)])
        return json.loads(out.read_text())

    return with_scenario(keys, go)


def simulate(keys: dict[str, str]) -> dict:
    """The summary (shardscope.summary JSON) of simulating the scenario the keys describe."""

    def go(path: Path, tmp: Path) -> dict:
        out = tmp / "summary.json"
        proc = run(["simulate", str(path), "--json", str(out)], check=False)
        if proc.returncode not in (0, 3):  # 3: does not fit, still summarised
            raise RuntimeError(f"shardscope simulate exited {proc.returncode}:\n{proc.stderr}")
        return json.loads(out.read_text())

    return with_scenario(keys, go)


def ir_sequence(ir: dict) -> list[dict]:
    """The IR's collectives and compute ops (forward, recompute, backward) in CPU issue order,
    as ``CollectiveRecorder`` rows (compute on the communicator "compute")."""
    comms = [c["name"] for c in ir["communicators"]]
    groups = [g["name"] for g in ir["groups"]]
    rows = []
    for op in ir["ops"]:
        if op["kind"] in COMPUTE_KINDS:
            op = dict(op, comm=-1, bytes=0)
        elif op["kind"] not in COLLECTIVE_KINDS:
            continue
        rows.append({
            "phase": op["phase"],
            "iteration": op["iteration"],
            "microbatch": op["microbatch"],
            "kind": op["kind"],
            "communicator": comms[op["comm"]] if op.get("comm", -1) >= 0 else "compute",
            "bytes": op["bytes"],
            "group": groups[op["group"]] if op.get("group", -1) >= 0 else "-",
        })
    return rows
