#!/usr/bin/python3
"""Tests of scripts/report.py: every figure, the self-contained HTML and the Markdown.

Synthetic result sets cover the full feature set (numerics, loss scale,
checkpointing), a minimal run (optional data absent: those plots must be
skipped with a note, not crash) and a damaged-but-valid run (nulls, missing
optional fields, no baseline, interrupted).
"""

import html
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from script_test_helpers import SOURCE_DIR, TempDirTest, all_cell_ids, edit_cell, edit_manifest, run_script

ALL_PLOTS = {"speedup.png", "memory.png", "convergence.png", "loss_scale.png", "grad_hist.png",
             "checkpointing.png"}
ALWAYS_PLOTS = {"speedup.png", "memory.png", "convergence.png"}


class ReportOutputs(TempDirTest):

    def run_report(self, results, out=None):
        args = [results] + (["--out", out] if out else [])
        proc = run_script("report.py", *args)
        self.assertExit(proc, 0)
        return out or os.path.join(results, "report")

    def pngs(self, out):
        return {f for f in os.listdir(out) if f.endswith(".png")}

    def check_self_contained(self, out, results):
        """index.html embeds every PNG and names every cell; report.md references every PNG."""
        pngs = self.pngs(out)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertEqual(page.count("data:image/png;base64,"), len(pngs))
        self.assertNotRegex(page, r'<img[^>]+src="(?!data:)')           # nothing fetched from disk
        for cid in all_cell_ids(results):
            if os.path.exists(os.path.join(results, "cells", cid.replace(",", "__") + ".json")):
                self.assertIn(html.escape(cid), page)
        self.assertIn("data-images-loaded", page)
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            md = f.read()
        for png in pngs:
            self.assertIn(f"]({png})", md)
        return page, md

    def test_full_synthetic_set(self):
        results = self.make_set("full")
        out = self.run_report(results)
        self.assertEqual(self.pngs(out), ALL_PLOTS)
        for png in ALL_PLOTS:
            with open(os.path.join(out, png), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", png)
        page, md = self.check_self_contained(out, results)
        for cid in all_cell_ids(results):
            self.assertIn(cid, md)
        # machine, versions, emulation note, table columns
        self.assertIn("AMD EPYC 7B13 (synthetic)", page)
        self.assertIn("onednn 3.0.0", page)
        self.assertIn("amp_fp16 is emulated on this device", page)
        for column in ("samples/s", "speedup", "step ms median", "p10", "p90", "GFLOP/s", "% of ceiling",
                       "peak memory", "final loss", "eval loss", "eval acc", "skipped steps"):
            self.assertIn(f"<th>{html.escape(column)}</th>", page)
        self.assertIn("1.00× (", page)                                   # baseline speedup with range

    def test_out_option_and_gpu_machine(self):
        results = self.make_set("gpu", machine="h100", numerics=False, include=[])
        out = self.run_report(results, os.path.join(self.tmp, "elsewhere", "r"))
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)
        page, _ = self.check_self_contained(out, results)
        self.assertIn("NVIDIA H100 80GB HBM3", page)
        self.assertNotIn("emulated on this device (", page)

    def test_minimal_set_skips_optional_plots_with_notes(self):
        results = self.make_set("minimal", numerics=False, include=[], repeats=1)
        out = self.run_report(results)
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)
        page, md = self.check_self_contained(out, results)
        for reason in ("no repeat recorded numerics", "checkpointing axis does not vary",
                       "every cell uses loss_scale none"):
            self.assertIn(reason, page)
            self.assertIn(reason, md)

    def test_single_cell_run_without_matrix(self):
        """CONFIG.md: no matrix means one cell with id "base" and no axes."""
        results = self.make_set("one", matrix={}, include=[], baseline={})
        out = self.run_report(results)
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)
        page, _ = self.check_self_contained(out, results)
        self.assertIn(">base (baseline)<", page)

    def test_canonical_loss_scale_id_counts_as_a_loss_scale(self):
        """An axis value like "dynamic{init:1024}" is a dynamic loss scale: the loss-scale plot appears."""
        results = self.make_set("ls", numerics=False,
                                include=[{"precision": "amp_fp16", "loss_scale": "dynamic{init:1024}"}])
        out = self.run_report(results)
        self.assertIn("loss_scale.png", self.pngs(out))

    def test_stale_figures_from_an_older_report_are_removed(self):
        results = self.make_set("full")
        out = self.run_report(results)
        shutil.rmtree(os.path.join(results, "cells"))
        shutil.copytree(os.path.join(self.make_set("minimal", numerics=False, include=[]), "cells"),
                        os.path.join(results, "cells"))
        self.run_report(results)
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)

    def test_damaged_but_valid_set(self):
        """Nulls, missing optional fields, no baseline, an interrupted run: report, don't crash."""
        results = self.make_set("damaged")
        ids = all_cell_ids(results)

        def strip(d):
            d["is_baseline"] = False
            d["summary"]["speedup"] = None
            d["summary"]["ceiling_fraction"] = None
            d["summary"].pop("eval_accuracy")
            for r in d["repeats"]:
                r["loss"][10:13] = [None, None, None]                    # diverged steps
                r.pop("wall_time_s")
                r.pop("numerics", None)
        for cid in ids:
            edit_cell(results, cid, strip)
        edit_cell(results, ids[1], lambda d: d["summary"].pop("peak_memory_bytes"))
        edit_cell(results, ids[2], lambda d: d.update(repeats=[]))
        os.remove(os.path.join(results, "cells", ids[-1].replace(",", "__") + ".json"))
        edit_manifest(results, lambda m: m.update(finished=None))
        out = self.run_report(results)
        page, _ = self.check_self_contained(out, results)
        self.assertIn("results are partial", page)
        self.assertIn("1 planned cell(s) have no results", page)
        self.assertIn("No baseline cell", page)
        self.assertNotIn("speedup.png", self.pngs(out))

    def test_bad_input_exits_2_naming_the_file(self):
        results = self.make_set("bad")
        path = os.path.join(results, "cells", "precision=fp32__fusion=on.json")
        with open(path, "w") as f:
            f.write("not json")
        proc = run_script("report.py", results)
        self.assertExit(proc, 2)
        self.assertIn(path, proc.stderr)
        missing = os.path.join(self.tmp, "missing")
        proc = run_script("report.py", missing)
        self.assertExit(proc, 2)
        self.assertIn(missing, proc.stderr)


class ReportOnRealRunner(unittest.TestCase):
    """report.py on a tiny real run; needs the runner (MPB_RUNNER) and experiments/report_smoke.yaml."""

    def test_report_on_runner_output(self):
        runner = os.environ.get("MPB_RUNNER", "")
        source = os.environ.get("MPB_SOURCE_DIR", SOURCE_DIR)
        yaml = os.path.join(source, "experiments", "report_smoke.yaml")
        if not (runner and os.path.isfile(runner) and os.access(runner, os.X_OK)):
            self.skipTest("MPB_RUNNER is not set to an executable runner")
        if not os.path.isfile(yaml):
            self.skipTest(f"{yaml} does not exist yet")
        with tempfile.TemporaryDirectory(prefix="mpb-smoke-") as tmp:
            run = subprocess.run([runner, yaml, "--out", tmp], capture_output=True, text=True, timeout=600)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            out = os.path.join(tmp, "report")
            proc = run_script("report.py", tmp, "--out", out)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            pngs = [f for f in os.listdir(out) if f.endswith(".png")]
            self.assertTrue(ALWAYS_PLOTS <= set(pngs), pngs)
            with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
                page = f.read()
            self.assertEqual(len(re.findall("data:image/png;base64,", page)), len(pngs))


if __name__ == "__main__":
    unittest.main()
