#!/usr/bin/python3
"""The report's decision line (report/decision.py; issue 41: "no summary line, the first screen is
a machine table"): the fastest cell measurably faster than the baseline among those that train
like it, with its interval, memory and verdict, at the top of index.html and report.md."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_test_helpers import TempDirTest, edit_cell, run_script  # noqa: E402

from mpbench import results as mr  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench.report.decision import decision_line  # noqa: E402

FAST, FASTER = "precision=amp_bf16,fusion=on", "precision=amp_fp16,fusion=on"


def plant(path, cid, speedup, verdict, p=0.01, memory_factor=1.0):
    """The runner's fields the line reads: speed-up, its interval and verdict, peak memory, convergence."""
    def edit(cell):
        s = cell["summary"]
        s.update(speedup=speedup, speedup_verdict="faster",
                 speedup_interval={"lo": speedup * 0.99, "hi": speedup * 1.01, "confidence": 0.95})
        s["peak_memory_bytes"]["total"] = s["peak_memory_bytes"]["total"] * memory_factor
        s["convergence"] = {"verdict": verdict, "p_equivalence": p}
    edit_cell(path, cid, edit)


def no_difference(path):
    """Every cell's speed-up verdict "no measurable difference": the real run's own verdicts depend on
    how busy the shared machine was, and the test must not."""
    from mpbench import fixture_edits
    fixture_edits._edit_cells(path, lambda cell: cell["summary"].update(speedup_verdict="no measurable difference")
                              if not cell.get("is_baseline") else None)


class DecisionLine(TempDirTest):
    def make_set(self, name, **kwargs):
        path = super().make_set(name, **kwargs)
        no_difference(path)
        return path

    def test_fastest_cell_that_trains_like_the_baseline(self):
        path = self.make_set("pick")
        plant(path, FAST, 5.8, "equivalent", p=0.003, memory_factor=0.67)
        plant(path, FASTER, 7.0, "worse")                # faster, but trains worse: not the pick
        rs = mr.load_results(path)
        line = decision_line(rs)
        self.assertTrue(line.startswith("amp_bf16 fusion=on: 5.80× [5.74–5.86] vs fp32"), line)
        change = 100 * (rs.by_id[FAST].memory("total") / rs.baseline().memory("total") - 1)
        self.assertIn(f"{change:+.0f}% memory".replace("-", "−"), line)
        self.assertIn("trains like fp32 (equivalent, TOST p 0.003)", line)
        proc = run_script("report.py", path, "--out", os.path.join(self.tmp, "r"))
        self.assertExit(proc, 0)
        with open(os.path.join(self.tmp, "r", "report.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertLess(md.index("5.80×"), md.index("## Machine and versions"))
        with open(os.path.join(self.tmp, "r", "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertLess(page.index("5.80×"), page.index("<h2>Machine and versions</h2>"))

    def test_faster_cells_that_all_train_worse_are_said_so(self):
        path = self.make_set("worse")
        plant(path, FASTER, 7.0, "worse")
        line = decision_line(mr.load_results(path))
        self.assertIn("7.00×", line)
        self.assertIn("does not train like fp32 (worse", line)
        self.assertIn("no faster cell trains like the baseline", line)

    def test_nothing_faster(self):
        line = decision_line(mr.load_results(self.make_set("none")))
        self.assertEqual(line, "No cell is measurably faster than the baseline (fp32).")


if __name__ == "__main__":
    unittest.main()
