#!/usr/bin/python3
"""--resume continues an interleaved run in the middle of a round.

A 2-cell x 3-repeat experiment is interrupted (SIGINT) when its third repeat
starts: round 1 (repeat 1 of both cells) is done and lives in partial/
sidecars, no cell JSON exists yet. --resume must keep those repeats (same step
times, so they were not rerun), run the other four, and end with every cell
complete: the same losses as an uninterrupted run, no partial/ left, a
manifest that says the run finished.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, report, write_mlp_experiment


def run(args, stop_at_unit=None):
    proc = subprocess.Popen([RUNNER] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    for line in proc.stderr:
        err.append(line)
        if stop_at_unit and line.startswith(f"[{stop_at_unit}/") and line.rstrip().endswith("starting"):
            proc.send_signal(signal.SIGINT)
    proc.wait()
    return proc.returncode, "".join(err)


def cells(out):
    d = os.path.join(out, "mid", "cells")
    return {f: json.load(open(os.path.join(d, f))) for f in sorted(os.listdir(d))} if os.path.isdir(d) else {}


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_mid_") as tmp:
        yaml_path = write_mlp_experiment(tmp, "mid", steps=30, warmup_steps=2, repeats=3, batch_size=64,
                                         width=128, input_dim=32, eval_samples=64, matrix="fusion: [off, on]")
        out, ref = os.path.join(tmp, "out"), os.path.join(tmp, "ref")
        base = [yaml_path, "--device", "cpu"]

        code, err = run(base + ["--out", out], stop_at_unit=3)
        if code != 130:
            fails.append(f"interrupted run exited {code}, expected 130:\n{err}")
        partial_dir = os.path.join(out, "mid", "partial")
        partial = {f: json.load(open(os.path.join(partial_dir, f))) for f in os.listdir(partial_dir)} \
            if os.path.isdir(partial_dir) else {}
        if cells(out):
            fails.append(f"no cell has all its repeats yet, but cells/ has {list(cells(out))}")
        if len(partial) != 2 or any(len(p["repeats"]) != 1 for p in partial.values()):
            fails.append(f"expected two partial sidecars with one repeat each, got "
                         f"{ {k: len(v['repeats']) for k, v in partial.items()} }")

        code, err = run(base + ["--out", out, "--resume"])
        if code != 0:
            fails.append(f"resumed run exited {code}:\n{err}")
        if "some repeats finished earlier, skipped (--resume)" not in err:
            fails.append("the resumed run did not say it kept finished repeats")
        done = cells(out)
        if os.path.isdir(partial_dir):
            fails.append("partial/ was left behind after every cell finished")
        for name, p in partial.items():
            c = done.get(name)
            if c is None:
                fails.append(f"{name}: missing after --resume")
                continue
            if [r["repeat"] for r in c["repeats"]] != [0, 1, 2]:
                fails.append(f"{name}: repeats {[r['repeat'] for r in c['repeats']]}")
            if c["repeats"][0]["step_time_ms"] != p["repeats"][0]["step_time_ms"]:
                fails.append(f"{name}: the repeat finished before the interrupt was run again")
        manifest = json.load(open(os.path.join(out, "mid", "manifest.json")))
        if manifest["finished"] is None:
            fails.append("the resumed run's manifest is not marked finished")

        code, err = run(base + ["--out", ref, "--quiet"])
        if code != 0:
            fails.append(f"reference run exited {code}:\n{err}")
        for name, c in cells(ref).items():
            got = done.get(name)
            if got is None or [r["loss"] for r in got["repeats"]] != [r["loss"] for r in c["repeats"]]:
                fails.append(f"{name}: per-step losses differ from an uninterrupted run")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
