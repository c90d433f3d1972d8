#!/usr/bin/python3
"""SIGKILL at a random moment, then --resume: the same results as no kill.

A small 3-cell x 2-repeat experiment runs once uninterrupted (the
reference). Then, TRIALS times, a fresh run is killed with SIGKILL after a
seeded random delay within the reference run's duration, and rerun with
--resume until it finishes (a resumed run may be killed again at its own
random point, half the time). The final set must equal the reference: the
same cells, config hashes, baseline, number of repeats and bit-identical
per-step losses (the CPU backend is deterministic for a seed and thread
count), no leftover `.tmp` or partial/ files, a manifest that says the run
finished, and a summary.csv row per cell. A kill that lands mid-write can
leave a `.tmp`: the next run moves it to stale/, never reads it.

MPB_KILL_TRIALS / MPB_KILL_SEED change the number of trials and the seed,
e.g. for a longer run by hand.
"""

import csv
import glob
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from e2e_helpers import RUNNER, report, write_mlp_experiment

TRIALS = int(os.environ.get("MPB_KILL_TRIALS", "10"))
SEED = int(os.environ.get("MPB_KILL_SEED", "20261123"))
ENV = dict(os.environ, OMP_NUM_THREADS="1")  # one thread: deterministic and quick


def start(yaml_path, out, resume):
    args = [RUNNER, yaml_path, "--device", "cpu", "--out", out, "--quiet"] + (["--resume"] if resume else [])
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)


def run_to_end(yaml_path, out, resume=False):
    p = start(yaml_path, out, resume)
    _, err = p.communicate(timeout=600)
    return p.returncode, err


def result_set(out):
    d = os.path.join(out, "kr")
    cells = {}
    for f in sorted(glob.glob(os.path.join(d, "cells", "*.json"))):
        c = json.load(open(f))
        cells[c["cell_id"]] = {
            "file": os.path.basename(f), "config_hash": c["config_hash"], "is_baseline": c["is_baseline"],
            "repeats": [(r["repeat"], r["loss"]) for r in c["repeats"]],
            "has_speedup": c["summary"]["speedup"] is not None,
        }
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    with open(os.path.join(d, "summary.csv")) as f:
        rows = sorted(r["cell_id"] for r in csv.DictReader(f))
    leftovers = [os.path.relpath(p, d) for p in glob.glob(os.path.join(d, "cells", "*.tmp"))]
    leftovers += [os.path.relpath(p, d) for p in glob.glob(os.path.join(d, "partial", "*"))]
    return cells, manifest["finished"] is not None, rows, leftovers


def main():
    fails = []
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory(prefix="mpb_kill_") as tmp:
        yaml_path = write_mlp_experiment(tmp, "kr", steps=20, warmup_steps=2, repeats=2, batch_size=64, width=64,
                                         input_dim=16, eval_samples=64, matrix="fusion: [off, on]\n"
                                         "  precision: [fp32, amp_bf16]", baseline="fusion: off, precision: fp32")
        with open(yaml_path, "a") as f:
            f.write("exclude:\n  - {fusion: on, precision: fp32}\n")
        ref_out = os.path.join(tmp, "ref")
        t0 = time.time()
        code, err = run_to_end(yaml_path, ref_out)
        duration = time.time() - t0
        if code != 0:
            return report([f"reference run exited {code}:\n{err[-3000:]}"])
        reference = result_set(ref_out)
        print(f"reference: {len(reference[0])} cells in {duration:.1f} s")

        for trial in range(TRIALS):
            out = os.path.join(tmp, f"t{trial}")
            delay = rng.uniform(0.05, duration)
            p = start(yaml_path, out, resume=False)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
            resumes = 0
            while True:
                resumes += 1
                if resumes > 5:
                    fails.append(f"trial {trial}: not finished after 5 resumes")
                    break
                if rng.random() < 0.5:  # killed again, at its own random point
                    q = start(yaml_path, out, resume=True)
                    time.sleep(rng.uniform(0.05, duration))
                    q.send_signal(signal.SIGKILL)
                    q.wait()
                    if q.returncode == 0:
                        break  # it finished before the kill
                    continue
                code, err = run_to_end(yaml_path, out, resume=True)
                if code != 0:
                    fails.append(f"trial {trial} (killed after {delay:.2f} s): --resume exited {code}:\n{err[-3000:]}")
                break
            if not os.path.isfile(os.path.join(out, "kr", "manifest.json")):
                fails.append(f"trial {trial}: no manifest after resuming")
                continue
            got = result_set(out)
            verdict = "same" if got == reference else "DIFFERENT"
            print(f"trial {trial}: killed after {delay:.2f} s, {resumes} resume(s): {verdict}")
            if got != reference:
                cells, finished, rows, leftovers = got
                diff = [cid for cid in set(cells) | set(reference[0]) if cells.get(cid) != reference[0].get(cid)]
                fails.append(f"trial {trial} (killed after {delay:.2f} s): differs from the uninterrupted run: "
                             f"cells {diff}, finished {finished}, summary rows {rows}, leftovers {leftovers}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
