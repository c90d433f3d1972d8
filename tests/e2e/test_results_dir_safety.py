#!/usr/bin/python3
"""A results directory never loses a result and never mixes two experiments.

Regression tests for issue 13, each the reported reproduction, made small:
- D3: a diverged cell (SGD at lr 1e6) is a result: exit 0, "diverged" in the
  table, null losses; --fail-on-divergence exits 3 with every file written.
- D4a: the baseline edited, then --resume: nothing reruns, but every cell file
  and summary.csv name the new baseline and speed-ups are relative to it.
- D4b: steps edited, then --resume: the cells run again, their old files go to
  stale/<time>/ (with why.txt), never deleted; report.py reads the set.
- Two runners on one --out: the second exits 4 naming the first one's PID,
  and writes nothing.
- A fresh run (no --resume) into a used directory moves the earlier files of
  the cells it reruns to stale/ instead of mixing with them.
"""

import csv
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from e2e_helpers import RUNNER, SOURCE_DIR, report, write_mlp_experiment

SMALL = dict(steps=6, warmup_steps=1, repeats=1, batch_size=32, width=32, input_dim=16, eval_samples=32)


def run(args, **kw):
    return subprocess.run([RUNNER] + args + ["--device", "cpu"], capture_output=True, text=True, **kw)


def cells(out, name):
    files = sorted(glob.glob(os.path.join(out, name, "cells", "*.json")))
    return {c["cell_id"]: c for c in (json.load(open(f)) for f in files)}


def summary_rows(out, name):
    with open(os.path.join(out, name, "summary.csv")) as f:
        return {r["cell_id"]: r for r in csv.DictReader(f)}


def check_divergence(tmp, fails):
    yaml_path = write_mlp_experiment(tmp, "div", matrix="optimizer.lr: [0.001, 1000000]",
                                     baseline="optimizer.lr: 0.001", **SMALL)
    with open(yaml_path, "a") as f:
        f.write("optimizer: {kind: sgd}\n")
    out = os.path.join(tmp, "div_out")
    p = run([yaml_path, "--out", out])
    if p.returncode != 0:
        fails.append(f"D3: a diverged cell made the run exit {p.returncode}, expected 0:\n{p.stderr[-2000:]}")
    if "diverged" not in p.stdout:
        fails.append(f"D3: the table does not say 'diverged':\n{p.stdout}")
    got = cells(out, "div")
    bad = [c for c in got.values() if c["summary"]["eval_loss"] is None]
    if len(got) != 2 or len(bad) != 1:
        fails.append(f"D3: expected 2 cells, one with a null eval loss; got {len(got)} cells, {len(bad)} null")
    p = run([yaml_path, "--out", out, "--fail-on-divergence"])
    if p.returncode != 3 or "diverged: optimizer.lr=1e6" not in p.stderr:
        fails.append(f"D3: --fail-on-divergence exited {p.returncode} (expected 3, naming the cell):\n"
                     f"{p.stderr[-2000:]}")
    if len(cells(out, "div")) != 2:
        fails.append("D3: --fail-on-divergence lost a cell's file")


def check_baseline_edit(tmp, fails):
    yaml_path = write_mlp_experiment(tmp, "base", matrix="fusion: [off, on]", baseline="fusion: off", **SMALL)
    out = os.path.join(tmp, "base_out")
    p = run([yaml_path, "--out", out])
    if p.returncode != 0:
        fails.append(f"D4a: first run exited {p.returncode}:\n{p.stderr[-2000:]}")
        return
    before = cells(out, "base")
    text = open(yaml_path).read().replace("baseline: {fusion: off}", "baseline: {fusion: on}")
    open(yaml_path, "w").write(text)
    p = run([yaml_path, "--out", out, "--resume"])
    if p.returncode != 0 or p.stderr.count("finished earlier, skipped (--resume)") != 2:
        fails.append(f"D4a: resume exited {p.returncode} or reran a cell:\n{p.stderr[-2000:]}")
    after = cells(out, "base")
    for cid, c in after.items():
        want = cid == "fusion=on"
        if c["is_baseline"] != want:
            fails.append(f"D4a: {cid}: is_baseline {c['is_baseline']} after the baseline became fusion=on")
        if c["repeats"] != before[cid]["repeats"]:
            fails.append(f"D4a: {cid}: its repeats changed, but its configuration did not")
    on, off = after["fusion=on"]["summary"], after["fusion=off"]["summary"]
    if on["speedup"] != 1.0 or on["speedup_verdict"] != "baseline":
        fails.append(f"D4a: the new baseline has speedup {on['speedup']} / {on['speedup_verdict']}")
    want = off["samples_per_s"] / on["samples_per_s"]
    if off["speedup"] is None or abs(off["speedup"] / want - 1) > 1e-9:
        fails.append(f"D4a: fusion=off speedup {off['speedup']} is not relative to the new baseline ({want})")
    rows = summary_rows(out, "base")
    if rows["fusion=on"]["is_baseline"] not in ("true", "True", "1") or \
            rows["fusion=off"]["is_baseline"] not in ("false", "False", "0"):
        fails.append(f"D4a: summary.csv still names the old baseline: {rows}")


def check_steps_edit(tmp, fails):
    yaml_path = write_mlp_experiment(tmp, "steps", matrix="fusion: [off, on]", **SMALL)
    out = os.path.join(tmp, "steps_out")
    if run([yaml_path, "--out", out]).returncode != 0:
        fails.append("D4b: first run failed")
        return
    old = cells(out, "steps")
    text = open(yaml_path).read().replace("steps: 6\n", "steps: 8\n")
    open(yaml_path, "w").write(text)
    p = run([yaml_path, "--out", out, "--resume"])
    if p.returncode != 0:
        fails.append(f"D4b: resume after editing steps exited {p.returncode}:\n{p.stderr[-2000:]}")
        return
    new = cells(out, "steps")
    for cid, c in new.items():
        if len(c["repeats"][0]["loss"]) != 8 or c["config_hash"] == old[cid]["config_hash"]:
            fails.append(f"D4b: {cid} was not rerun with steps 8 (has {len(c['repeats'][0]['loss'])} steps)")
    stale = glob.glob(os.path.join(out, "steps", "stale", "*", "cells", "*.json"))
    if sorted(json.load(open(f))["config_hash"] for f in stale) != sorted(c["config_hash"] for c in old.values()):
        fails.append(f"D4b: the steps-6 cell files were not all kept under stale/: {stale}")
    why = glob.glob(os.path.join(out, "steps", "stale", "*", "why.txt"))
    if not why or "another configuration" not in open(why[0]).read():
        fails.append(f"D4b: stale/*/why.txt missing or silent: {why}")
    if "ran with another configuration" not in p.stderr:
        fails.append(f"D4b: the runner did not say it moved stale cells:\n{p.stderr[-2000:]}")
    rep = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "report.py"),
                          os.path.join(out, "steps"), "--out", os.path.join(tmp, "steps_report")],
                         capture_output=True, text=True)
    if rep.returncode != 0:
        fails.append(f"D4b: report.py on the resumed set exited {rep.returncode}:\n{rep.stderr[-2000:]}")

    # A fresh run (no --resume) of one cell: its earlier file goes to stale/, the other cell's stays.
    p = run([yaml_path, "--out", out, "--filter", "fusion=on"])
    now = cells(out, "steps")
    moved = [f for f in glob.glob(os.path.join(out, "steps", "stale", "*", "cells", "*.json"))
             if json.load(open(f))["config_hash"] == new["fusion=on"]["config_hash"]]
    if p.returncode != 0 or len(moved) != 1 or now["fusion=off"] != new["fusion=off"]:
        fails.append(f"fresh run: expected fusion=on's earlier file in stale/ and fusion=off untouched "
                     f"(exit {p.returncode}, moved {moved})")


def check_second_runner(tmp, fails):
    yaml_path = write_mlp_experiment(tmp, "lock", **dict(SMALL, steps=400), matrix="fusion: [off, on]")
    out = os.path.join(tmp, "lock_out")
    first = subprocess.Popen([RUNNER, yaml_path, "--device", "cpu", "--out", out, "--inject-step-delay-ms", "20"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in first.stderr:  # the first runner holds the lock once it measures
            if "starting" in line:
                break
        before = sorted(os.listdir(os.path.join(out, "lock")))
        p = run([yaml_path, "--out", out])
        if p.returncode != 4 or f"pid {first.pid}" not in p.stderr:
            fails.append(f"a second runner on the same --out exited {p.returncode} (expected 4, naming pid "
                         f"{first.pid}):\n{p.stderr[-2000:]}")
        if sorted(os.listdir(os.path.join(out, "lock"))) != before:
            fails.append("the refused second runner changed the results directory")
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    if first.returncode != 130:
        fails.append(f"the first runner, interrupted, exited {first.returncode}")
    t0 = time.time()
    p = run([yaml_path, "--out", out, "--resume", "--filter", "fusion=off"], timeout=600)
    if p.returncode != 0:
        fails.append(f"after the first runner ended, the lock is free: resume exited {p.returncode} "
                     f"({time.time() - t0:.0f} s):\n{p.stderr[-2000:]}")


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_dirsafe_") as tmp:
        for check in (check_divergence, check_baseline_edit, check_steps_edit, check_second_runner):
            n = len(fails)
            check(tmp, fails)
            print(f"{check.__name__}: {'ok' if len(fails) == n else 'FAILED'}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
