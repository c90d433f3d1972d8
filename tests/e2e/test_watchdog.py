#!/usr/bin/python3
"""A hung cell is ended, recorded as hung, and the rest of the matrix finishes.

A 4-cell experiment with a planted hang (--inject-hang: one cell stops after
step 3 of its first repeat and never answers again, Ctrl-C included) and a
2-second stall limit. The watchdog must record the cell in failed/<slug>.json
(status hung, last completed step 3), restart the runner with --resume, and
the other three cells must finish: exit 1 (a cell failed), a finished
manifest listing the failed cell, report.py naming it. A later --resume skips
the hung cell; a fresh run of it without the planted hang moves the record to
stale/ and completes the set.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, SOURCE_DIR, report, write_mlp_experiment

HUNG = "fusion=on,optimizer.lr=0.002"


def run(args, timeout=300):
    return subprocess.run([RUNNER] + args + ["--device", "cpu"], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_watchdog_") as tmp:
        yaml_path = write_mlp_experiment(tmp, "wd", steps=10, warmup_steps=1, repeats=2, batch_size=32, width=32,
                                         input_dim=16, eval_samples=32,
                                         matrix="fusion: [off, on]\n  optimizer.lr: [0.001, 0.002]")
        out = os.path.join(tmp, "out")
        d = os.path.join(out, "wd")
        p = run([yaml_path, "--out", out, "--inject-hang", HUNG, "--stall-timeout", "2"])
        print(p.stderr[-1500:])
        if p.returncode != 1:
            fails.append(f"a run with a hung cell exited {p.returncode}, expected 1")
        if "restarting to run the other cells" not in p.stderr:
            fails.append("the watchdog did not say it restarted the runner")
        cells = sorted(json.load(open(f))["cell_id"] for f in glob.glob(os.path.join(d, "cells", "*.json")))
        if len(cells) != 3 or HUNG in cells:
            fails.append(f"expected the three other cells finished, got {cells}")
        records = [json.load(open(f)) for f in glob.glob(os.path.join(d, "failed", "*.json"))]
        if len(records) != 1 or records[0]["cell_id"] != HUNG or records[0]["status"] != "hung" \
                or records[0]["last_step"] != 3:
            fails.append(f"expected one hung record for {HUNG} at step 3, got {records}")
        manifest = json.load(open(os.path.join(d, "manifest.json")))
        if manifest["finished"] is None or [f["cell_id"] for f in manifest.get("failed_cells", [])] != [HUNG]:
            fails.append(f"manifest: finished {manifest['finished']}, failed_cells {manifest.get('failed_cells')}")
        rep = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "report.py"), d,
                              "--out", os.path.join(tmp, "report")], capture_output=True, text=True)
        md = open(os.path.join(tmp, "report", "report.md")).read() if rep.returncode == 0 else ""
        if rep.returncode != 0 or "hung" not in md or HUNG not in md:
            fails.append(f"report.py exited {rep.returncode} or does not name the hung cell:\n{rep.stderr[-1500:]}")

        p = run([yaml_path, "--out", out, "--resume"])
        if p.returncode != 1 or "hung (failed/" not in p.stderr or "step 1/" in p.stderr:
            fails.append(f"--resume should skip the hung cell and exit 1; exited {p.returncode}:\n{p.stderr[-1500:]}")

        p = run([yaml_path, "--out", out, "--filter", HUNG])
        cells = glob.glob(os.path.join(d, "cells", "*.json"))
        if p.returncode != 0 or len(cells) != 4 or glob.glob(os.path.join(d, "failed", "*.json")):
            fails.append(f"a fresh run of the cell should complete the set; exit {p.returncode}, {len(cells)} cells:\n"
                         f"{p.stderr[-1500:]}")
        if not glob.glob(os.path.join(d, "stale", "*", "failed", "*.json")):
            fails.append("the hang record was not kept under stale/")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
