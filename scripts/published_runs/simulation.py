"""Simulating published runs with the shardscope CLI, on every core."""

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile

from .sources import scenario


def simulate(shardscope, text, workdir):
    path = os.path.join(workdir, "run.yaml")
    out = os.path.join(workdir, "summary.json")
    with open(path, "w") as f:
        f.write(text)
    proc = subprocess.run([shardscope, "simulate", path, "--json", out],
                          capture_output=True, text=True)
    if proc.returncode not in (0, 3):  # 3: it ran out of memory, the summary still written
        raise RuntimeError(f"shardscope simulate exited {proc.returncode}: {proc.stderr.strip()}")
    with open(out) as f:
        return json.load(f)


def simulate_job(job):
    shardscope, text = job
    with tempfile.TemporaryDirectory() as workdir:
        return simulate(shardscope, text, workdir)


def simulate_all(shardscope, texts, what):
    """The summaries of `texts`, simulated on every core, in order; progress on stderr."""
    summaries = []
    with multiprocessing.Pool(os.cpu_count()) as pool:
        jobs = [(shardscope, text) for text in texts]
        for i, summary in enumerate(pool.imap(simulate_job, jobs, chunksize=2), 1):
            print(f"\r{what} {i}/{len(texts)}", end="", file=sys.stderr, flush=True)
            summaries.append(summary)
    print(file=sys.stderr)
    return summaries


def tokens_per_s_at(shardscope, rows, fabric, gpu, what):
    """The predicted tokens/s per GPU of `rows` with cluster.gpu keys `gpu` set."""
    texts = [scenario(r, fabric, gpu)[0] for r in rows]
    return [s["tokens_per_s_per_gpu"] for s in simulate_all(shardscope, texts, what)]



def errors_at(shardscope, rows, fabric, gpu, what):
    return [t / float(r["tokens_per_s_per_gpu"]) - 1
            for r, t in zip(rows, tokens_per_s_at(shardscope, rows, fabric, gpu, what))]

