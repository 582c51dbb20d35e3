#!/usr/bin/env python3
"""The hostile-input acceptance: a few hundred cases a hostile user tries on every surface that
reads a file, a flag or an environment (traces, timelines, device profiles, calibrations,
scenarios, the planner, multi-process runs, the GUI), each judged the same way:

  handled    the exit code expected (2 for bad input, 3 for "does not fit in memory", 0 where the
             tool must go on and say what it skipped) and a message matching the case's pattern,
             which names the file or flag, the field and what is allowed
  crash      killed by a signal, an exit of 128 or more, or "internal error"
  hang       still running after the case's time limit
  overwrite  an input of the command changed
  wrong      exit 0 where the input had to be refused, or a number made of malformed data
  unclear    the exit code expected, but the message does not name what it must

Usage: hostile_acceptance.py SHARDSCOPE EXAMPLES_DIR TEST_DATA_DIR [GUI] [--min-handled 95]
Prints one line per case that is not handled, a table per class, and exits 1 when fewer than
--min-handled percent are handled, when any case crashed, hung or overwrote an input, or when a
run leaves a shared-memory object behind.
"""

import argparse
import concurrent.futures
import gzip
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

CASE_TIMEOUT_S = 60


@dataclass
class Case:
    name: str
    klass: str
    args: list
    expect: int = 2
    pattern: str = ""  # a regex the combined stdout and stderr must match
    inputs: list = field(default_factory=list)  # files that must be unchanged
    env: dict = field(default_factory=dict)
    gui: bool = False  # runs the GUI binary instead of the CLI
    forbid: str = ""  # a regex the output must not match (a number from malformed data)


@dataclass
class Outcome:
    case: Case
    verdict: str
    detail: str


# --------------------------------------------------------------------------- inputs


class Inputs:
    """The files the cases read, made once in a scratch folder from the repository's data."""

    def __init__(self, cli, examples, data, scratch):
        self.cli = cli
        self.examples = examples
        self.data = data
        self.dir = scratch
        self.scenario = os.path.join(examples, "fsdp2-overlap-oracle.yaml")
        self.default = os.path.join(examples, "llama3-8b-h100x8.yaml")
        self.plan_scenario = os.path.join(examples, "plan-llama3-8b-2-nodes.yaml")
        self.trace_path = os.path.join(data, "traces", "fsdp2_tiny.json")
        with open(self.trace_path) as f:
            self.trace = json.load(f)
        self.profile_path = os.path.join(data, "device_profile_bandwidth_only.json")
        with open(self.profile_path) as f:
            self.profile = json.load(f)
        self.timeline = self.path("run.json")
        self._run([cli, "simulate", self.scenario, "--timeline", self.timeline])
        self.slow = self.path("slow.json")
        self._run([cli, "simulate", self.default, "--set", "training.iterations=4", "--set",
                   "cluster.gpu.matmul_efficiency=0.4", "--timeline", self.slow])
        self.calibration_path = self.path("cal.json")
        self._run([cli, "calibrate", "--scenario", self.default, self.slow, "--out",
                   self.calibration_path, "--bootstrap", "0"])
        with open(self.calibration_path) as f:
            self.calibration = json.load(f)
        self.fifo = self.path("fifo")
        os.mkfifo(self.fifo)
        self.folder = self.path("a-folder")
        os.mkdir(self.folder)

    def _run(self, argv):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=CASE_TIMEOUT_S)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        p = self.path(name)
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(p, mode) as f:
            f.write(text)
        return p

    def write_json(self, name, value):
        return self.write(name, json.dumps(value))

    def gzip(self, name, data):
        p = self.path(name)
        with gzip.open(p, "wb", compresslevel=9) as f:
            f.write(data)
        return p

    def scenario_with(self, name, extra):
        """The oracle scenario with `extra` YAML lines appended to a copy next to the inputs."""
        with open(self.scenario) as f:
            text = f.read()
        return self.write(name, text + "\n" + extra + "\n")


def mutate_event(trace, where, key, value):
    """A copy of `trace` with `key` of the first event matching `where` set to `value` (or
    removed when value is REMOVE); `key` may be "args.NAME"."""
    t = json.loads(json.dumps(trace))
    for e in t["traceEvents"]:
        if where(e):
            target, k = (e["args"], key[5:]) if key.startswith("args.") else (e, key)
            if value is REMOVE:
                target.pop(k, None)
            else:
                target[k] = value
            return t
    raise ValueError(f"no event for {key}")


REMOVE = object()

# Values a hostile trace puts in a numeric field: huge, negative, not a number, missing.
BAD_NUMBERS = {
    "huge": 1e300,
    "2^63": 9223372036854775808,
    "negative": -5,
    "string": "abc",
    "null": None,
    "nan-string": "NaN",
    "missing": REMOVE,
}


def is_kernel(e):
    return e.get("cat") == "kernel" and "Collective name" not in e.get("args", {})


def is_nccl(e):
    return "In msg nelems" in e.get("args", {})


def is_memory(e):
    return e.get("name") == "[memory]"


# --------------------------------------------------------------------------- the cases


def trace_field_cases(inp):
    """Malformed fields of one event: the event is counted and skipped, per field; the import
    goes on (exit 0) and says so. A malformed key fact is refused naming the field."""
    cases = []
    event_fields = [
        ("kernel.ts", is_kernel, "ts", "ts"),
        ("kernel.dur", is_kernel, "dur", "dur"),
        ("nccl.In msg nelems", is_nccl, "args.In msg nelems", "In msg nelems"),
        ("nccl.Out msg nelems", is_nccl, "args.Out msg nelems", "Out msg nelems"),
        ("nccl.Group size", is_nccl, "args.Group size", "Group size"),
        ("memory.Total Allocated", is_memory, "args.Total Allocated", "Total Allocated"),
        ("memory.Total Reserved", is_memory, "args.Total Reserved", "Total Reserved"),
    ]
    for label, where, key, shown in event_fields:
        for bad, value in BAD_NUMBERS.items():
            if key in ("ts", "dur") and bad == "missing":
                continue  # an event without ts or dur is not a complete event: not imported
            if bad == "missing" and key.startswith("args."):
                continue  # an optional argument: the event is imported without it
            if bad == "negative" and key == "ts":
                continue  # a time before the profiler's origin is a time
            name = f"trace-{label}-{bad}".replace(" ", "_")
            p = inp.write_json(name + ".json", mutate_event(inp.trace, where, key, value))
            cases.append(Case(name, "trace fields", ["import", p], expect=0,
                              pattern=rf"malformed events +1 skipped \(by field: {re.escape(shown)} 1\)",
                              inputs=[p]))
    facts = [
        ("distributedInfo.rank", lambda t, v: t["distributedInfo"].__setitem__("rank", v)),
        ("distributedInfo.world_size",
         lambda t, v: t["distributedInfo"].__setitem__("world_size", v)),
        ("deviceProperties[0].totalGlobalMem",
         lambda t, v: t["deviceProperties"][0].__setitem__("totalGlobalMem", v)),
    ]
    for key, set_value in facts:
        for bad, value in [("huge", 1e300), ("2^56", 2**56), ("negative", -8), ("string", "abc"),
                           ("null", None), ("zero", 0)]:
            if key == "distributedInfo.rank" and bad == "zero":
                continue  # rank 0 is a rank
            t = json.loads(json.dumps(inp.trace))
            set_value(t, value)
            name = f"trace-fact-{key}-{bad}"
            p = inp.write_json(name + ".json", t)
            cases.append(Case(name, "trace fields", ["summarize", p],
                              pattern=re.escape(os.path.basename(p)) + r".*" + re.escape(key),
                              inputs=[p]))
    return cases


def degenerate_run_cases(inp):
    cases = []
    empty = inp.write_json("empty-events.json", {"traceEvents": []})
    cpu_only = json.loads(json.dumps(inp.trace))
    cpu_only["traceEvents"] = [e for e in cpu_only["traceEvents"]
                               if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    cpu = inp.write_json("cpu-only.json", cpu_only)
    zero = json.loads(json.dumps(inp.trace))
    for e in zero["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            e["dur"] = 0
    zero_path = inp.write_json("zero-durations.json", zero)
    no_work = r"no device work was recorded|none of which took any time|has no GPU event"
    for label, p in [("no-events", empty), ("no-gpu-work", cpu), ("zero-durations", zero_path)]:
        b = re.escape(os.path.basename(p))
        cases += [
            Case(f"degenerate-summarize-{label}", "degenerate runs", ["summarize", p],
                 pattern=b + ".*(" + no_work + ")", inputs=[p], forbid=r"step time +0 ns"),
            Case(f"degenerate-compare-a-{label}", "degenerate runs",
                 ["compare", p, inp.timeline, "--allow-mismatch"],
                 pattern=b + ".*(" + no_work + ")", inputs=[p], forbid=r"inf %"),
            Case(f"degenerate-compare-b-{label}", "degenerate runs",
                 ["compare", inp.timeline, p, "--allow-mismatch"],
                 pattern=b + ".*(" + no_work + ")", inputs=[p], forbid=r"inf %"),
            Case(f"degenerate-calibrate-{label}", "degenerate runs",
                 ["calibrate", "--scenario", inp.scenario, p, "--allow-mismatch"],
                 pattern=b + ".*(" + no_work + ")", inputs=[p]),
            Case(f"degenerate-breakdown-{label}", "degenerate runs", ["breakdown", p],
                 pattern=b + ".*(" + no_work + ")", inputs=[p]),
        ]
    cases.append(Case("degenerate-calibrate-same-run-twice", "degenerate runs",
                      ["calibrate", "--scenario", inp.default, inp.slow, inp.slow],
                      pattern=r"is given twice", inputs=[inp.slow]))
    copies = []
    for k in range(3):
        copies.append(inp.path(f"slow-copy-{k}.json"))
        shutil.copy(inp.slow, copies[-1])
    cases.append(Case("degenerate-calibrate-copies-of-one-run", "degenerate runs",
                      ["calibrate", "--scenario", inp.default, inp.slow, *copies],
                      pattern=r"slow-copy-0.json: is the same run as .*slow.json", inputs=copies))
    return cases


def unbounded_reader_cases(inp):
    """Inputs with no end, no size bound or that block: each reader refuses them naming the
    file."""
    bomb = inp.gzip("bomb.json.gz",
                    b'{"traceEvents": [{"name": "' + b"a" * 100_000_000 + b'"}]}')
    deep = inp.write("deep.json", '{"traceEvents": [{"args": ' + "[" * 100_000)
    garbage = inp.write("garbage.json", bytes(range(256)) * 64)
    empty = inp.write("empty.json", "")
    truncated_gz = inp.path("truncated.json.gz")
    with open(inp.gzip("whole.json.gz", json.dumps(inp.trace).encode()), "rb") as f:
        data = f.read()
    inp.write("truncated.json.gz", data[: len(data) // 2])
    not_regular = {
        "dev-zero": ("/dev/zero", r"/dev/zero: is not a regular file"),
        "dev-urandom": ("/dev/urandom", r"/dev/urandom: is not a regular file"),
        "fifo": (inp.fifo, r"fifo: is not a regular file"),
        "folder": (inp.folder, r"a-folder: (is not a regular file|is a directory)"),
        "missing": (inp.path("nope.json"), r"nope.json: (cannot read|does not exist|no such)"),
    }
    malformed = {
        "gzip-bomb": (bomb, r"bomb.json.gz: expands more than 200 times"),
        "deep-nesting": (deep, r"deep.json: .*(nest deeper than 64 levels|not valid JSON)"),
        "binary-garbage": (garbage, r"garbage.json: .*(not valid JSON|parse error|invalid)"),
        "empty-file": (empty, r"empty.json: .*(not valid JSON|empty|parse error)"),
        "truncated-gzip": (truncated_gz, r"truncated.json.gz: .*(corrupt or truncated|not valid "
                                         r"JSON)"),
    }
    commands = {
        "summarize": lambda p: ["summarize", p],
        "import": lambda p: ["import", p],
        "compare": lambda p: ["compare", inp.timeline, p],
        "breakdown": lambda p: ["breakdown", p],
        "calibrate": lambda p: ["calibrate", "--scenario", inp.scenario, p],
        "device-profile": lambda p: ["simulate", inp.scenario, "--device-profile", p],
        "calibration": lambda p: ["simulate", inp.scenario, "--calibration", p],
        "scenario": lambda p: ["validate", p],
    }
    cases = []
    for cmd, argv in commands.items():
        for label, (p, pattern) in list(not_regular.items()) + list(malformed.items()):
            if cmd == "scenario" and label in ("gzip-bomb", "truncated-gzip"):
                pattern = os.path.basename(p) + r": is compressed"
            if cmd in ("device-profile", "calibration", "scenario") and label in (
                    "binary-garbage", "empty-file", "deep-nesting"):
                pattern = re.escape(os.path.basename(p)) + r": .*(JSON|YAML|parse|document|" \
                          r"mapping|syntax|invalid)"
            if cmd in ("device-profile", "calibration") and label in ("gzip-bomb",
                                                                      "truncated-gzip"):
                pattern = re.escape(os.path.basename(p)) + r": .*(JSON|parse|invalid|syntax)"
            if cmd == "scenario" and label == "empty-file":
                pattern = r"empty.json: model: no model given"  # an empty document is a mapping
            cases.append(Case(f"reader-{cmd}-{label}", "unbounded readers", argv(p),
                              pattern=pattern,
                              inputs=[p] if os.path.isfile(p) else []))
    return cases


def gui_cases(inp, gui):
    if not gui:
        return []
    shot = inp.path("gui.png")
    empty = inp.write_json("gui-no-work.json", {"traceEvents": []})
    return [
        Case("gui-measured-fifo", "GUI", [inp.scenario, "--measured", inp.fifo, "--screenshot",
                                          shot], pattern=r"fifo: is not a regular file", gui=True),
        Case("gui-measured-no-work", "GUI", [inp.scenario, "--measured", empty, "--screenshot",
                                             shot], pattern=r"gui-no-work.json: has no ops",
             inputs=[empty], gui=True),
        Case("gui-open-no-work", "GUI", [empty, "--screenshot", shot],
             pattern=r"gui-no-work.json: has no ops", inputs=[empty], gui=True),
        Case("gui-measured-dev-zero", "GUI", [inp.scenario, "--measured", "/dev/zero",
                                              "--screenshot", shot],
             pattern=r"/dev/zero: is not a regular file", gui=True),
        Case("gui-open-fifo", "GUI", [inp.fifo, "--screenshot", shot],
             pattern=r"fifo: is not a regular file", gui=True),
        Case("gui-open-bomb", "GUI", [inp.path("bomb.json.gz"), "--screenshot", shot],
             pattern=r"bomb.json.gz: expands more than 200 times", gui=True),
        Case("gui-set-out-of-range", "GUI", [inp.scenario, "--set", "training.seq_len=0",
                                             "--screenshot", shot],
             pattern=r"training.seq_len: 0 is out of range", gui=True),
    ]


def overwrite_cases(inp):
    """An output that is an input of the command, named directly or through the scenario."""
    cases = []
    profile = inp.write_json("ow-profile.json", inp.profile)
    calibration = inp.write_json("ow-cal.json", inp.calibration)
    timeline = inp.path("ow-run.json")
    shutil.copy(inp.timeline, timeline)
    scenario_p = inp.scenario_with("ow-scenario-profile.yaml", "")
    via_profile = ["--set", f"cluster.gpu.device_profile={profile}"]
    via_calibration = ["--set", f"cluster.calibration={calibration}"]
    for flag in ("--json", "--timeline", "--trace"):
        cases += [
            Case(f"overwrite-simulate{flag}-scenario", "overwritten inputs",
                 ["simulate", scenario_p, flag, scenario_p],
                 pattern=re.escape(os.path.basename(scenario_p)) + f": {flag}: is the input",
                 inputs=[scenario_p]),
            Case(f"overwrite-simulate{flag}-profile-via-scenario", "overwritten inputs",
                 ["simulate", inp.scenario, *via_profile, flag, profile],
                 pattern=f"ow-profile.json: {flag}: is the input", inputs=[profile]),
            Case(f"overwrite-simulate{flag}-calibration-via-scenario", "overwritten inputs",
                 ["simulate", inp.default, *via_calibration, flag, calibration],
                 pattern=f"ow-cal.json: {flag}: is the input", inputs=[calibration]),
            Case(f"overwrite-simulate{flag}-profile-flag", "overwritten inputs",
                 ["simulate", inp.scenario, "--device-profile", profile, flag, profile],
                 pattern=f"ow-profile.json: {flag}: is the input", inputs=[profile]),
            Case(f"overwrite-run{flag}-scenario", "overwritten inputs",
                 ["run", scenario_p, flag, scenario_p],
                 pattern=re.escape(os.path.basename(scenario_p)) + f": {flag}: is the input",
                 inputs=[scenario_p]),
        ]
    cases += [
        Case("overwrite-plan-json-profile-via-scenario", "overwritten inputs",
             ["plan", inp.scenario, *via_profile, "--json", profile],
             pattern="ow-profile.json: --json: is the input", inputs=[profile]),
        Case("overwrite-plan-emit-scenario", "overwritten inputs",
             ["plan", scenario_p, "--emit", "scenario", scenario_p],
             pattern=re.escape(os.path.basename(scenario_p)) + ": --emit: is the input",
             inputs=[scenario_p]),
        Case("overwrite-calibrate-out-measured", "overwritten inputs",
             ["calibrate", "--scenario", inp.scenario, timeline, "--out", timeline],
             pattern="ow-run.json: --out: is the input", inputs=[timeline]),
        Case("overwrite-calibrate-out-scenario-calibration", "overwritten inputs",
             ["calibrate", "--scenario", inp.default, inp.slow, *via_calibration, "--out",
              calibration], pattern="ow-cal.json: --out: is the input", inputs=[calibration]),
        Case("overwrite-import-timeline-trace", "overwritten inputs",
             ["import", inp.write_json("ow-trace.json", inp.trace), "--timeline",
              inp.path("ow-trace.json")],
             pattern="ow-trace.json: --timeline: is the input", inputs=[inp.path("ow-trace.json")]),
        Case("overwrite-compare-json-a", "overwritten inputs",
             ["compare", timeline, inp.timeline, "--json", timeline],
             pattern="ow-run.json: --json: is the input", inputs=[timeline]),
        Case("overwrite-summarize-json", "overwritten inputs",
             ["summarize", timeline, "--json", timeline],
             pattern="ow-run.json: --json: is the input", inputs=[timeline]),
    ]
    return cases


def profile_cases(inp):
    """Device profile and calibration values outside their physical ranges."""
    cases = []
    # 0 is the profile's "not measured" (the scenario's value stands), so not among them.
    bad_values = {"negative": -1, "tiny": 1e-300, "huge": 1e300, "string": "fast", "null": None,
                  "below-1MBps": 999.0}
    for key in ("memory_bandwidth_bytes_per_s", "h2d_pinned_bytes_per_s",
                "d2h_pageable_bytes_per_s"):
        for bad, value in bad_values.items():
            p = dict(inp.profile)
            p[key] = value
            path = inp.write_json(f"profile-{key}-{bad}.json", p)
            cases.append(Case(f"profile-{key}-{bad}", "profile and calibration values",
                              ["simulate", inp.scenario, "--device-profile", path],
                              pattern=re.escape(os.path.basename(path)) + ".*" + key,
                              inputs=[path]))
    for key in ("launch_overhead_ns", "event_overhead_ns"):
        for bad, value in [("2^63-1", 2**63 - 1), ("negative", -1), ("string", "x"),
                           ("float", 1.5e12)]:
            p = dict(inp.profile)
            p[key] = value
            path = inp.write_json(f"profile-{key}-{bad}.json", p)
            cases.append(Case(f"profile-{key}-{bad}", "profile and calibration values",
                              ["simulate", inp.scenario, "--device-profile", path],
                              pattern=re.escape(os.path.basename(path)) + ".*" + key,
                              inputs=[path]))
    gemm = {"m": 4096, "n": 4096, "k": 4096, "batch": 1, "transpose_a": False,
            "transpose_b": False, "input": "bf16", "output": "bf16"}
    for bad, value in [("zero", 0), ("2^63-1", 2**63 - 1), ("negative", -3), ("string", "1ms")]:
        p = dict(inp.profile)
        p["gemms"] = [dict(gemm, time_ns=value)]
        path = inp.write_json(f"profile-gemm-time-{bad}.json", p)
        cases.append(Case(f"profile-gemm-time_ns-{bad}", "profile and calibration values",
                          ["simulate", inp.scenario, "--device-profile", path],
                          pattern=re.escape(os.path.basename(path)) + r".*gemms\[0\].*time_ns",
                          inputs=[path]))
    wrong_schema = dict(inp.profile, schema="shardscope.device_profile/99")
    path = inp.write_json("profile-schema.json", wrong_schema)
    cases.append(Case("profile-wrong-schema", "profile and calibration values",
                      ["simulate", inp.scenario, "--device-profile", path],
                      pattern=r"profile-schema.json: schema", inputs=[path]))
    # Calibration values.
    share_values = [("zero", 0.0), ("above-one", 1.5), ("negative", -0.2), ("string", "high")]
    compute_keys = {"matmul_efficiency": share_values, "attention_efficiency": share_values,
                    "hbm_efficiency": share_values,
                    # A scale on the SM model: 0 (no contention) and 1.5 are scales; 5 is past 4.
                    "contention_scale": [("above-four", 5.0), ("negative", -0.2),
                                         ("string", "high")]}
    for key, values in compute_keys.items():
        for bad, value in values:
            c = json.loads(json.dumps(inp.calibration))
            c.setdefault("compute", {})[key] = {"value": value, "low": 0.1, "high": 0.9,
                                                "samples": 10}
            path = inp.write_json(f"cal-{key}-{bad}.json", c)
            cases.append(Case(f"calibration-{key}-{bad}", "profile and calibration values",
                              ["simulate", inp.default, "--calibration", path],
                              pattern=re.escape(os.path.basename(path)) + ".*" + key,
                              inputs=[path]))
    for bad, value in [("tiny", 1e-300), ("zero", 0), ("negative", -5e9), ("huge", 1e300)]:
        c = json.loads(json.dumps(inp.calibration))
        c["collectives"] = [{"kind": "all_gather", "ranks": 8, "nodes": 1,
                             "latency_s": {"value": 1e-5, "low": 1e-5, "high": 1e-5,
                                           "samples": 5},
                             "busbw_bytes_per_s": {"value": value, "low": 1e9, "high": 1e11,
                                                   "samples": 5}}]
        path = inp.write_json(f"cal-busbw-{bad}.json", c)
        cases.append(Case(f"calibration-busbw-{bad}", "profile and calibration values",
                          ["simulate", inp.default, "--calibration", path],
                          pattern=re.escape(os.path.basename(path)) + r".*busbw_bytes_per_s",
                          inputs=[path]))
    for bad, value in [("negative", -1.0), ("huge", 1e9)]:
        c = json.loads(json.dumps(inp.calibration))
        c["collectives"] = [{"kind": "all_gather", "ranks": 8, "nodes": 1,
                             "latency_s": {"value": value, "low": 0, "high": 1, "samples": 5},
                             "busbw_bytes_per_s": {"value": 1e11, "low": 1e9, "high": 1e11,
                                                   "samples": 5}}]
        path = inp.write_json(f"cal-latency-{bad}.json", c)
        cases.append(Case(f"calibration-latency-{bad}", "profile and calibration values",
                          ["simulate", inp.default, "--calibration", path],
                          pattern=re.escape(os.path.basename(path)) + r".*latency_s",
                          inputs=[path]))
    c = json.loads(json.dumps(inp.calibration))
    c["collectives"] = [{"kind": "broadcast", "ranks": 8, "nodes": 1,
                         "latency_s": {"value": 1e-5, "low": 0, "high": 1, "samples": 5},
                         "busbw_bytes_per_s": {"value": 1e11, "low": 1e9, "high": 1e11,
                                               "samples": 5}}]
    path = inp.write_json("cal-kind.json", c)
    cases.append(Case("calibration-unknown-collective", "profile and calibration values",
                      ["simulate", inp.default, "--calibration", path],
                      pattern=r"cal-kind.json.*kind", inputs=[path]))
    return cases


def rank_alignment_cases(inp):
    t4 = json.loads(json.dumps(inp.trace))
    t4["distributedInfo"] = dict(t4["distributedInfo"], rank=1, world_size=4)
    other_world = inp.write_json("rank1-of-4.json", t4)
    same = inp.write_json("rank0-again.json", inp.trace)
    t_far = json.loads(json.dumps(inp.trace))
    t_far["distributedInfo"] = dict(t_far["distributedInfo"], rank=9)
    beyond = inp.write_json("rank9-of-8.json", t_far)
    t_gpu = json.loads(json.dumps(inp.trace))
    t_gpu["distributedInfo"] = dict(t_gpu["distributedInfo"], rank=1)
    t_gpu["deviceProperties"][0]["name"] = "NVIDIA A100-SXM4-40GB"
    other_gpu = inp.write_json("rank1-a100.json", t_gpu)
    return [
        Case("ranks-different-world-sizes", "rank alignment",
             ["import", inp.trace_path, other_world],
             pattern=r"rank1-of-4.json.*(world|4 ranks|8 ranks)"),
        Case("ranks-same-rank-twice", "rank alignment", ["import", inp.trace_path, same],
             pattern=r"rank 0 again"),
        Case("ranks-rank-beyond-world", "rank alignment", ["import", inp.trace_path, beyond],
             pattern=r"rank9-of-8.json.*distributedInfo.rank"),
        Case("ranks-different-gpus", "rank alignment", ["import", inp.trace_path, other_gpu],
             pattern=r"rank1-a100.json: deviceProperties\[0\].name: is 'NVIDIA A100-SXM4-40GB'"),
        Case("ranks-compare-different-jobs", "rank alignment", ["compare", inp.slow, inp.timeline],
             pattern=r"are not one job"),
        Case("ranks-calibrate-other-job", "rank alignment",
             ["calibrate", "--scenario", inp.default, inp.timeline],
             pattern=r"are not one job"),
    ]


def planner_cases(inp):
    s = inp.plan_scenario
    small = ["--api", "fsdp2", "--fix", "training.micro_batch=1", "--fix", "training.loss=fused",
             "--fix", "training.activation_checkpointing=none"]
    cases = []
    for key, value, pattern in [
        ("training.seq_len", "0", r"--fix: training.seq_len=0: 0 is out of range"),
        ("training.seq_len", "abc", r"--fix: training.seq_len=abc: expected an integer"),
        ("training.seq_len", "1e300", r"--fix: training.seq_len=1e300: "),
        ("model.hidden", "-3", r"--fix: model.hidden=-3: -3 is out of range"),
        ("cluster.gpu.memory", "-1GiB", r"--fix: cluster.gpu.memory=-1GiB: "),
        ("cluster.nvlink.bandwidth", "0", r"--fix: cluster.nvlink.bandwidth=0: "),
        ("training.loss", "magic", r"--fix: training.loss=magic: .*(fused|chunked)"),
        ("fsdp.mixed_precision.param_dtype", "int3",
         r"--fix: fsdp.mixed_precision.param_dtype=int3"),
        ("nosuch.key", "1", r"--fix: nosuch.key: not a scenario key"),
        ("training.micro_batch", "3", r"no fsdp2 choice of micro-batch"),
    ]:
        cases.append(Case(f"plan-fix-{key}-{value}", "planner",
                          ["plan", s, "--api", "fsdp2", "--fix", f"{key}={value}"],
                          pattern=pattern))
    cases += [
        Case("plan-fix-none-valid", "planner", ["plan", s, *small, "--fix", "model.kv_heads=5"],
             pattern=r"every one of the .* configurations simulated is invalid.*\n.*model.kv_heads"),
        Case("plan-allow-bad-value", "planner",
             ["plan", s, "--allow", "fsdp.forward_prefetch_modules=1,-4"],
             pattern=r"--allow: fsdp.forward_prefetch_modules=-4: -4 is out of range"),
        Case("plan-margin-no-unit", "planner", ["plan", s, "--margin", "5"],
             pattern=r"--margin: 5: needs a unit"),
        Case("plan-margin-100", "planner", ["plan", s, "--margin", "100%"],
             pattern=r"--margin: 100%: not a percentage below 100"),
        Case("plan-group-within-100", "planner", ["plan", s, "--group-within", "100%,1GiB"],
             pattern=r"--group-within: 100%,1GiB: '100%' is not a percentage from 0 to below 100"),
        Case("plan-group-within-negative-size", "planner",
             ["plan", s, "--group-within", "0.5%,-1GiB"],
             pattern=r"--group-within: 0.5%,-1GiB: '-1GiB' is not a size"),
        Case("plan-work-limit-exceeded", "planner", ["plan", s, "--work-limit", "1000"],
             pattern=r"plan space: .* above --work-limit 1,000: about .*narrow its widest"),
        Case("plan-work-limit-zero", "planner", ["plan", s, "--work-limit", "0"],
             pattern=r"--work-limit"),
        Case("plan-budget-negative", "planner", ["plan", s, "--memory-budget", "-4GiB"],
             pattern=r"--memory-budget"),
        Case("plan-budget-no-unit", "planner", ["plan", s, "--memory-budget", "80"],
             pattern=r"--memory-budget"),
        Case("plan-top-zero", "planner", ["plan", s, "--top", "0"], pattern=r"--top"),
        Case("plan-nodes-zero", "planner", ["plan", s, "--nodes", "0"], pattern=r"--nodes"),
        Case("plan-nodes-indivisible", "planner", ["plan", s, "--nodes", "3"],
             pattern=r"on each of 24 ranks"),
        Case("plan-global-batch-indivisible", "planner",
             ["plan", s, "--global-batch-seqs", "20"], pattern=r"--global-batch-tokens"),
        Case("plan-threads-zero", "planner", ["plan", s, "--threads", "100000"],
             pattern=r"--threads"),
        Case("plan-emit-bad-target", "planner", ["plan", s, "--emit", "deepspeed",
                                                  inp.path("x.py")],
             pattern=r"--emit: deepspeed: not an emit target"),
    ]
    return cases


def scenario_cases(inp):
    """Scenario keys set hostile on the command line: the first hardening's surface, kept."""
    cases = []
    for key, value in [("training.seq_len", "0"), ("training.seq_len", "-1"),
                       ("training.micro_batch", "1e9"), ("model.layers", "abc"),
                       ("cluster.nodes", "0"), ("cluster.gpus_per_node", "100000"),
                       ("cluster.gpu.memory", "1PB"), ("cluster.nvlink.bandwidth", "1e-300B/s"),
                       ("training.iterations", "100000"), ("fsdp.reshard_after_forward", "7"),
                       ("training.grad_accum", "65536"), ("allocator.expandable_segments", "2")]:
        cases.append(Case(f"scenario-set-{key}-{value}", "scenario keys",
                          ["simulate", inp.scenario, "--set", f"{key}={value}"],
                          pattern=re.escape(key)))
    trace_as_scenario = ["simulate", inp.trace_path]
    cases += [
        Case("scenario-is-a-trace", "scenario keys", trace_as_scenario,
             pattern=r"fsdp2_tiny.json: traceEvents: is a PyTorch profiler trace, not a scenario"),
        Case("scenario-is-a-timeline", "scenario keys", ["validate", inp.timeline],
             pattern=r"run.json: schema: is a shardscope.timeline/\d file, not a scenario"),
        Case("scenario-is-gzip", "scenario keys", ["plan", inp.path("whole.json.gz")],
             pattern=r"whole.json.gz: is compressed"),
    ]
    return cases


def multi_process_cases(inp):
    env = {"RANK": "0", "WORLD_SIZE": "2"}
    run = ["run", inp.scenario, "--timeout", "2"]
    return [
        Case("job-world-mismatch", "multi-process", run, env={"RANK": "0", "WORLD_SIZE": "3"},
             pattern=r"WORLD_SIZE.*3 ranks but the schedule is for 2"),
        Case("job-rank-beyond-world", "multi-process", run, env={"RANK": "5", "WORLD_SIZE": "2"},
             pattern=r"rank 5 is not below the world size 2"),
        Case("job-rank-not-a-number", "multi-process", run, env={"RANK": "x", "WORLD_SIZE": "2"},
             pattern=r"RANK: 'x' is not an integer"),
        Case("job-port-zero", "multi-process", run, env=dict(env, MASTER_PORT="0"),
             pattern=r"MASTER_PORT: '0' is not an integer ≥ 1"),
        Case("job-port-too-big", "multi-process", run, env=dict(env, MASTER_PORT="70000"),
             pattern=r"MASTER_PORT: 70000 is not a port"),
        Case("job-port-text", "multi-process", run, env=dict(env, MASTER_PORT="http"),
             pattern=r"MASTER_PORT: 'http' is not an integer"),
        Case("job-nproc-wrong", "multi-process",
             ["run", inp.scenario, "--nproc-per-node", "3"],
             pattern=r"--nproc-per-node.*the scenario has 2 GPUs"),
        Case("job-nothing-joins", "multi-process", run,
             env=dict(env, MASTER_PORT=str(21000 + os.getpid() % 20000)), expect=1,
             pattern=r"rendezvous: only 1 of 2 ranks joined within 2000 ms \(not joined: rank 1\)"),
        Case("job-slow-rank-beyond-world", "multi-process",
             ["run", inp.scenario, "--slow-rank", "7:2"], pattern=r"--slow-rank"),
        Case("job-slow-rank-negative", "multi-process",
             ["run", inp.scenario, "--slow-rank", "1:-2"], pattern=r"--slow-rank"),
        Case("job-timeout-zero", "multi-process", ["run", inp.scenario, "--timeout", "0"],
             pattern=r"--timeout"),
    ]


# --------------------------------------------------------------------------- running


def digest(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def run_case(case, cli, gui):
    before = {p: digest(p) for p in case.inputs}
    env = dict(os.environ, **case.env)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    argv = [gui if case.gui else cli, *case.args]
    try:
        proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Outcome(case, "hang", f"still running after {CASE_TIMEOUT_S} s")
    out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    for p, d in before.items():
        if digest(p) != d:
            return Outcome(case, "overwrite", f"{p} changed")
    rc = proc.returncode
    if rc < 0 or rc >= 128 or "internal error" in out:
        return Outcome(case, "crash", f"exit {rc}: {out[-300:]}")
    if case.expect != 0 and rc == 0:
        return Outcome(case, "wrong", f"exit 0: {out[-300:]}")
    if case.forbid and re.search(case.forbid, out):
        return Outcome(case, "wrong", f"printed /{case.forbid}/: {out[-300:]}")
    if rc != case.expect:
        return Outcome(case, "wrong" if case.expect == 0 else "unclear",
                       f"exit {rc}, expected {case.expect}: {out[-300:]}")
    if case.pattern and not re.search(case.pattern, out):
        return Outcome(case, "unclear", f"lacks /{case.pattern}/: {out[-400:]}")
    return Outcome(case, "handled", "")


def shm_objects():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith("shardscope")}
    except OSError:
        return set()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("examples")
    ap.add_argument("data")
    ap.add_argument("gui", nargs="?", default="")
    ap.add_argument("--min-handled", type=float, default=95.0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    gui = args.gui if args.gui and os.access(args.gui, os.X_OK) else ""

    scratch = tempfile.mkdtemp(prefix="shardscope-hostile-")
    try:
        inp = Inputs(args.cli, args.examples, args.data, scratch)
        cases = (trace_field_cases(inp) + degenerate_run_cases(inp) +
                 unbounded_reader_cases(inp) + overwrite_cases(inp) + profile_cases(inp) +
                 rank_alignment_cases(inp) + planner_cases(inp) + scenario_cases(inp) +
                 multi_process_cases(inp) + gui_cases(inp, gui))
        names = [c.name for c in cases]
        assert len(names) == len(set(names)), "case names must be unique"
        shm_before = shm_objects()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            outcomes = list(pool.map(lambda c: run_case(c, args.cli, gui), cases))
        leaked = shm_objects() - shm_before
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    by_class = {}
    for o in outcomes:
        counts = by_class.setdefault(o.case.klass, {})
        counts[o.verdict] = counts.get(o.verdict, 0) + 1
        if o.verdict != "handled":
            print(f"{o.verdict:<9} {o.case.name}: {o.detail.strip()}")
    verdicts = ["handled", "crash", "hang", "overwrite", "wrong", "unclear"]
    print(f"\n{'class':<32}" + "".join(f"{v:>10}" for v in verdicts))
    for klass, counts in by_class.items():
        print(f"{klass:<32}" + "".join(f"{counts.get(v, 0):>10}" for v in verdicts))
    total = len(outcomes)
    handled = sum(o.verdict == "handled" for o in outcomes)
    severe = [o for o in outcomes if o.verdict in ("crash", "hang", "overwrite")]
    share = 100.0 * handled / total
    print(f"\n{handled} of {total} hostile cases handled ({share:.1f} %); "
          f"{len(severe)} crashes, hangs or overwrites; shared memory left: {len(leaked)}")
    ok = share >= args.min_handled and not severe and not leaked
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
