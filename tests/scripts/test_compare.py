#!/usr/bin/python3
"""Tests of scripts/compare.py on synthetic result sets.

The exit code is the CI contract (0 pass, 1 regression, 2 usage/input error),
so most tests run the script as a subprocess and check exit code and output.
"""

import json
import os
import shutil
import unittest

from script_test_helpers import TempDirTest, edit_cell, edit_manifest, run_script

import compare  # noqa: E402  (scripts/ is on sys.path via the helpers)

SLOW_CELL = "precision=amp_bf16,fusion=on"


class CompareVerdicts(TempDirTest):
    """Same machine: regressions, improvements, noise."""

    def test_identical_sets_pass(self):
        base = self.make_set("base")
        proc = run_script("compare.py", base, base)
        self.assertExit(proc, 0)
        self.assertIn("0 regressed", proc.stdout)
        self.assertNotIn("REGRESSED", proc.stdout)

    def test_twenty_percent_slower_cell_regresses_and_is_named(self):
        base = self.make_set("base")
        new = self.make_set("new", throughput_factor={SLOW_CELL: 0.8})
        out = os.path.join(self.tmp, "cmp.json")
        proc = run_script("compare.py", base, new, "--json", out)
        self.assertExit(proc, 1)
        self.assertIn(f"REGRESSED: {SLOW_CELL} throughput", proc.stdout)
        with open(out) as f:
            report = json.load(f)
        regressed = {(r["cell_id"], r["metric"]) for r in report["regressions"]}
        self.assertEqual(regressed, {(SLOW_CELL, "throughput"), (SLOW_CELL, "step_time")})
        throughput = next(r for r in report["results"] if r["cell_id"] == SLOW_CELL and r["metric"] == "throughput")
        self.assertAlmostEqual(throughput["ratio"], 0.8, places=6)
        self.assertLess(throughput["p_value"], 0.05)
        self.assertEqual(report["exit_code"], 1)

    def test_noise_inside_threshold_passes(self):
        base = self.make_set("base", noise_seed=1, noise=0.01)
        new = self.make_set("new", noise_seed=2, noise=0.01)
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("0 regressed", proc.stdout)

    def test_faster_cell_is_improved_not_a_failure(self):
        base = self.make_set("base")
        new = self.make_set("new", throughput_factor={SLOW_CELL: 1.25})
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("improved: throughput, step_time", proc.stdout)

    def test_change_below_threshold_is_same_even_if_significant(self):
        base = self.make_set("base")
        new = self.make_set("new", throughput_factor={SLOW_CELL: 0.97})   # -3% in every repeat: p small
        proc = run_script("compare.py", base, new, "--threshold", "5%")
        self.assertExit(proc, 0)
        proc = run_script("compare.py", base, new, "--threshold", "0.02")
        self.assertExit(proc, 1)

    def test_memory_increase_beyond_threshold_regresses(self):
        base = self.make_set("base")
        new = self.make_set("new")
        edit_cell(new, SLOW_CELL, lambda d: d["summary"]["peak_memory_bytes"].update(
            total=int(d["summary"]["peak_memory_bytes"]["total"] * 1.10)))
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 1)
        self.assertIn(f"REGRESSED: {SLOW_CELL} peak_memory", proc.stdout)

    def test_loss_increase_uses_loss_threshold(self):
        base = self.make_set("base")
        new = self.make_set("new")
        edit_cell(new, SLOW_CELL, lambda d: d["summary"].update(final_loss=d["summary"]["final_loss"] * 1.03))
        self.assertExit(run_script("compare.py", base, new), 1)                       # default 2%
        self.assertExit(run_script("compare.py", base, new, "--loss-threshold", "5%"), 0)

    def test_diverged_loss_regresses(self):
        base = self.make_set("base")
        new = self.make_set("new")
        edit_cell(new, SLOW_CELL, lambda d: d["summary"].update(final_loss=None))      # NaN is written as null
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 1)
        self.assertIn(f"REGRESSED: {SLOW_CELL} final_loss", proc.stdout)

    def test_too_few_repeats_warns_and_does_not_gate(self):
        base = self.make_set("base", repeats=2)
        new = self.make_set("new", repeats=2, throughput_factor={SLOW_CELL: 0.8})
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("at least 4 repeats", proc.stdout)
        self.assertIn("too few repeats", proc.stdout)


class CompareCellSets(TempDirTest):

    def test_cells_in_only_one_set_are_listed(self):
        base = self.make_set("base")
        new = self.make_set("new", include=[{"precision": "amp_fp16", "fusion": "on", "model.width": "512"}])
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("Only in BASE (3): precision=amp_fp16,fusion=on,loss_scale=dynamic", proc.stdout)
        self.assertIn("Only in NEW (1): precision=amp_fp16,fusion=on,model.width=512", proc.stdout)

    def test_single_cell_runs(self):
        base = self.make_set("base", matrix={}, include=[], baseline={})
        new = self.make_set("new", matrix={}, include=[], baseline={}, throughput_factor={"base": 0.8})
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 1)
        self.assertIn("REGRESSED: base throughput", proc.stdout)

    def test_changed_config_is_warned_about(self):
        base = self.make_set("base")
        new = self.make_set("new")
        edit_cell(new, SLOW_CELL, lambda d: d.update(config_hash="0000000000000000"))
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn(f"{SLOW_CELL}: configuration differs", proc.stdout)


class CompareMachines(TempDirTest):
    """Different machines are generations, never regressions."""

    def test_changed_machine_gives_generation_table_not_regression(self):
        base = self.make_set("cpu", machine="cpu")
        new = self.make_set("h100", machine="h100", throughput_factor={SLOW_CELL: 0.5})
        out = os.path.join(self.tmp, "gen.json")
        proc = run_script("compare.py", base, new, "--json", out)
        self.assertExit(proc, 0)
        self.assertIn("Generation table", proc.stdout)
        self.assertIn("NVIDIA H100 80GB HBM3", proc.stdout)
        self.assertIn("speedup vs own fp32", proc.stdout)
        self.assertNotIn("REGRESSED", proc.stdout)
        with open(out) as f:
            report = json.load(f)
        self.assertFalse(report["same_machine"])
        self.assertTrue(os.path.isfile(os.path.join(self.tmp, "gen_generations.png")))

    def test_gpu_name_alone_distinguishes_machines(self):
        base = self.make_set("a100", machine="a100")
        new = self.make_set("h100", machine="h100")
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("different machines", proc.stdout)

    def test_generations_table_and_plot(self):
        dirs = [self.make_set(m, machine=m) for m in ("cpu", "a100", "h100")]
        out, plot = os.path.join(self.tmp, "g.json"), os.path.join(self.tmp, "plots", "g.png")
        proc = run_script("compare.py", "--generations", *dirs, "--json", out, "--plot", plot)
        self.assertExit(proc, 0)
        header = next(line for line in proc.stdout.splitlines() if line.startswith("cell "))
        for name in ("AMD EPYC 7B13 (synthetic)", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"):
            self.assertIn(name, header)
        self.assertTrue(os.path.getsize(plot) > 1000)
        with open(out) as f:
            gen = json.load(f)["generations"]
        rows = {r["cell_id"]: r for r in gen["rows"]}
        fp32 = rows["precision=fp32,fusion=off"]
        self.assertEqual(fp32["speedup_vs_own_fp32"], [1.0, 1.0, 1.0])
        self.assertAlmostEqual(fp32["throughput_vs_first"][0], 1.0)
        bf16 = rows["precision=amp_bf16,fusion=off"]["speedup_vs_own_fp32"]
        self.assertAlmostEqual(bf16[2], 5.6, delta=0.3)   # the h100 profile's bf16 factor


class CompareErrors(TempDirTest):
    """Exit 2 with a message naming the file."""

    def test_missing_directory(self):
        base = self.make_set("base")
        missing = os.path.join(self.tmp, "nope")
        proc = run_script("compare.py", base, missing)
        self.assertExit(proc, 2)
        self.assertIn(missing, proc.stderr)

    def test_corrupt_cell_json_is_named(self):
        base = self.make_set("base")
        new = self.make_set("new")
        path = os.path.join(new, "cells", "precision=fp32__fusion=on.json")
        with open(path, "w") as f:
            f.write('{"schema": "mpbench.cell/1", "cell_id": ')
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 2)
        self.assertIn(path, proc.stderr)
        self.assertIn("invalid JSON", proc.stderr)

    def test_cell_missing_required_key_is_named(self):
        base = self.make_set("base")
        new = self.make_set("new")
        path = edit_cell(new, SLOW_CELL, lambda d: d.pop("summary"))
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 2)
        self.assertIn(path, proc.stderr)
        self.assertIn("summary", proc.stderr)

    def test_missing_manifest_is_named(self):
        base = self.make_set("base")
        new = self.make_set("new")
        os.remove(os.path.join(new, "manifest.json"))
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 2)
        self.assertIn(os.path.join(new, "manifest.json"), proc.stderr)

    def test_wrong_schema_is_named(self):
        base = self.make_set("base")
        path = edit_manifest(base, lambda m: m.update(schema="mpbench.manifest/9"))
        proc = run_script("compare.py", base, base)
        self.assertExit(proc, 2)
        self.assertIn(path, proc.stderr)

    def test_usage_errors(self):
        base = self.make_set("base")
        self.assertExit(run_script("compare.py", base), 2)
        self.assertExit(run_script("compare.py"), 2)
        self.assertExit(run_script("compare.py", base, base, "--threshold", "five"), 2)
        self.assertExit(run_script("compare.py", base, base, "--alpha", "2"), 2)

    def test_parent_directory_with_one_run_is_accepted(self):
        parent = os.path.join(self.tmp, "results")
        os.makedirs(parent)
        run = self.make_set(os.path.join("results", "synthetic"))
        self.assertExit(run_script("compare.py", parent, run), 0)
        shutil.copytree(run, os.path.join(parent, "other"))
        proc = run_script("compare.py", parent, run)
        self.assertExit(proc, 2)
        self.assertIn("several runs", proc.stderr)


class CompareUnits(unittest.TestCase):
    """In-process checks of the small pure functions."""

    def test_parse_fraction(self):
        self.assertAlmostEqual(compare.parse_fraction("5%"), 0.05)
        self.assertAlmostEqual(compare.parse_fraction("0.05"), 0.05)
        with self.assertRaises(Exception):
            compare.parse_fraction("-1%")

    def test_min_attainable_p_and_repeats_needed(self):
        self.assertAlmostEqual(compare.min_attainable_p(2, 2), 1 / 3)
        self.assertAlmostEqual(compare.min_attainable_p(4, 4), 2 / 70)
        self.assertEqual(compare.repeats_needed(0.05), 4)
        self.assertEqual(compare.repeats_needed(0.01), 5)

    def test_u_test_on_separated_samples_reaches_min_p(self):
        import numpy as np
        p = compare.u_test(np.array([1.0, 2, 3, 4, 5]), np.array([6.0, 7, 8, 9, 10]))
        self.assertAlmostEqual(p, compare.min_attainable_p(5, 5), places=6)
        self.assertEqual(compare.u_test(np.array([1.0, 1.0]), np.array([1.0, 1.0])), 1.0)


if __name__ == "__main__":
    unittest.main()
