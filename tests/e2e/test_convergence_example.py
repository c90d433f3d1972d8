#!/usr/bin/python3
"""The committed convergence example (results/examples/convergence/, made by
`runner experiments/convergence.yaml`) judged again by the runner built now:
the verdicts the experiment file promises must follow from its real training
curves.

How: the example is copied to a temporary results root, every cell's
summary.convergence is erased, and `runner experiments/convergence.yaml
--resume` runs on the copy. With every repeat finished it trains nothing and
only re-judges (the verdict is an analysis setting, not part of a cell's
config hash), so this takes seconds. If the experiment file or the training
code changed so that a cell's config hash no longer matches, --resume would
start training again: --max-minutes stops that at once (exit 5) and the test
says to regenerate the example.

Expected (experiments/convergence.yaml's header says why):
  precision=fp32,fusion=on                           equivalent
  precision=amp_fp16,fusion=on,loss_scale=none       worse
  precision=amp_fp16,fusion=on,loss_scale=dynamic    not worse (the loss scale's job)
Skipped (77) only when the corpus the experiment reads is not installed
(scripts/install_deps.sh --corpus extracts it).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, SOURCE_DIR, cells_of, report

EXPERIMENT = os.path.join(SOURCE_DIR, "experiments", "convergence.yaml")
EXAMPLE = os.path.join(SOURCE_DIR, "results", "examples", "convergence")
CORPUS = "/usr/local/share/mpbench/python-docs.txt"
EXPECTED = {
    "precision=fp32,fusion=on": {"equivalent"},
    "precision=amp_fp16,fusion=on,loss_scale=none": {"worse"},
    "precision=amp_fp16,fusion=on,loss_scale=dynamic": {"equivalent", "better", "inconclusive"},
}
REGENERATE = ("regenerate the example: runner experiments/convergence.yaml --out /tmp/conv, then copy "
              "/tmp/conv/convergence/{manifest.json,summary.csv,cells/} to results/examples/convergence/")


def erase_verdicts(run_dir):
    """Sets every cell's summary.convergence to null, so what the test reads is the runner's new judgement."""
    cells_dir = os.path.join(run_dir, "cells")
    for name in os.listdir(cells_dir):
        path = os.path.join(cells_dir, name)
        with open(path, encoding="utf-8") as f:
            cell = json.load(f)
        cell["summary"]["convergence"] = None
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cell, f)


def main():
    if not os.path.exists(CORPUS):
        print(f"SKIP: {CORPUS} is missing (scripts/install_deps.sh --corpus extracts it)")
        return 77
    fails = []
    committed = cells_of(EXAMPLE)
    if len(committed) != 7:
        fails.append(f"{EXAMPLE} holds {len(committed)} cells, the experiment has 7: {REGENERATE}")
        return report(fails)
    with tempfile.TemporaryDirectory(prefix="mpb-conv-example-") as tmp:
        run_dir = os.path.join(tmp, "convergence")
        shutil.copytree(EXAMPLE, run_dir)
        erase_verdicts(run_dir)
        p = subprocess.run([RUNNER, EXPERIMENT, "--out", tmp, "--resume", "--device", "cpu", "--max-minutes", "0.01"],
                           capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
        out = p.stdout + p.stderr
        if p.returncode != 0 or re.search(r"\bstep \d+/\d+", out):
            fails.append(f"--resume on the example exited {p.returncode} or trained a step (a cell's config hash "
                         f"changed?): {REGENERATE}\n{out}")
            return report(fails)
        judged = cells_of(run_dir)
        for cell_id, cell in sorted(judged.items()):
            conv = cell["summary"].get("convergence")
            if not isinstance(conv, dict):
                fails.append(f"{cell_id}: no summary.convergence after --resume")
                continue
            verdict = conv.get("verdict")
            print(f"{cell_id:50s} {verdict:13s} {conv.get('reason', '')}")
            want = {"baseline"} if cell.get("is_baseline") else EXPECTED.get(cell_id)
            if want is not None and verdict not in want:
                fails.append(f"{cell_id}: verdict {verdict}, expected one of {sorted(want)} ({conv.get('reason')})")
            if verdict != committed[cell_id]["summary"]["convergence"]["verdict"]:
                fails.append(f"{cell_id}: re-judged {verdict}, the committed example says "
                             f"{committed[cell_id]['summary']['convergence']['verdict']}: {REGENERATE}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
