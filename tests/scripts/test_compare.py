#!/usr/bin/python3
"""Tests of scripts/compare.py on result sets the runner made (tests/scripts/script_test_helpers.make_set).

The exit code is the CI contract (0 pass, 1 regression, 2 usage/input error),
so most tests run the script as a subprocess and check exit code and output.
"""

import json
import os
import shutil
import unittest

from script_test_helpers import TempDirTest, all_cell_ids, cell_path, edit_cell, edit_manifest, fixtures, run_script

from mpbench.compare import gate as compare  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench import results as mr  # noqa: E402

SLOW_CELL = "precision=amp_bf16,fusion=on"


def read_cell(result_dir, cell_id):
    with open(cell_path(result_dir, cell_id), encoding="utf-8") as f:
        return json.load(f)


class GateTest(TempDirTest):
    """Sets whose repeats differ by a known 1% (fixtures' steady): the gate's tests decide on that
    spread, not on how busy the shared machine was while the runner made the set."""
    set_defaults = {"steady": (0.01, 1)}


class CompareVerdicts(GateTest):
    """Same machine: regressions, improvements, noise."""

    def slow_cell_regresses(self, base, new):
        """compare.py BASE NEW --json: exit 1 naming SLOW_CELL's throughput; returns the JSON report."""
        out = os.path.join(self.tmp, "cmp.json")
        proc = run_script("compare.py", base, new, "--json", out)
        self.assertExit(proc, 1)
        self.assertIn(f"REGRESSED: {SLOW_CELL} throughput", proc.stdout)
        with open(out) as f:
            return json.load(f)

    def test_identical_sets_pass(self):
        base = self.make_set("base")
        proc = run_script("compare.py", base, base)
        self.assertExit(proc, 0)
        self.assertIn("0 regressed", proc.stdout)
        self.assertNotIn("REGRESSED", proc.stdout)

    def test_twenty_percent_slower_cell_regresses_and_is_named(self):
        base = self.make_set("base")
        new = self.make_set("new", slow={SLOW_CELL: 0.8})
        report = self.slow_cell_regresses(base, new)
        regressed = {(r["cell_id"], r["metric"]) for r in report["regressions"]}
        self.assertEqual(regressed, {(SLOW_CELL, "throughput"), (SLOW_CELL, "step_time")})
        throughput = next(r for r in report["results"] if r["cell_id"] == SLOW_CELL and r["metric"] == "throughput")
        self.assertAlmostEqual(throughput["ratio"], 0.8, places=6)
        self.assertLess(throughput["p_value"], 0.05)
        self.assertEqual(report["exit_code"], 1)

    def test_noise_inside_threshold_passes(self):
        base = self.make_set("base")
        new = self.make_set("new", steady=(0.01, 2))       # other 1% differences between the repeats
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("0 regressed", proc.stdout)

    def test_faster_cell_is_improved_not_a_failure(self):
        base = self.make_set("base")
        new = self.make_set("new", slow={SLOW_CELL: 1.25})
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("improved: throughput, step_time", proc.stdout)

    def test_change_below_threshold_is_same_even_if_significant(self):
        base = self.make_set("base")
        new = self.make_set("new", slow={SLOW_CELL: 0.97})   # -3% in every repeat: p small
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

    def test_two_repeats_suffice_with_the_pooled_spread(self):
        # Issue 17: with 2 repeats a U test over repeat medians can never reach
        # p < 0.05 (its smallest p is 0.33); a t test against the repeat spread
        # pooled over all cells (degrees of freedom from every cell) can.
        base = self.make_set("base", repeats=2, steady=(0.02, 1))
        new = self.make_set("new", repeats=2, steady=(0.02, 2), slow={SLOW_CELL: 0.7})
        report = self.slow_cell_regresses(base, new)
        result = next(r for r in report["results"] if r["cell_id"] == SLOW_CELL and r["metric"] == "throughput")
        self.assertEqual((result["n_base"], result["n_new"]), (2, 2))
        # Ten step-block medians per repeat, fewer when a repeat's measured window is shorter (on a
        # busy machine the steady-state detector starts it later): counted from the files.
        blocks = [compare.block_medians(mr.load_results(d).by_id[SLOW_CELL].timed_steps()).size for d in (base, new)]
        self.assertEqual((result["n_blocks_base"], result["n_blocks_new"]), tuple(blocks))
        self.assertGreaterEqual(min(blocks), 4)
        cells = len({r["cell_id"] for r in report["results"]})
        self.assertEqual(result["df"], 2 * cells)              # one degree of freedom per (cell, side)
        self.assertEqual(report["repeat_spread"]["throughput"]["df"], 2 * cells)
        self.assertLess(result["p_value"], 0.001)
        self.assertIsNotNone(result["p_blocks"])               # the block test is reported beside it

    def test_untestable_change_is_suspect_and_fails_only_under_strict(self):
        base = self.make_set("base", repeats=1)   # one repeat per cell everywhere: no spread to test against
        new = self.make_set("new", repeats=1, slow={SLOW_CELL: 0.7})
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn("SUSPECT: throughput, step_time", proc.stdout)
        self.assertIn("too few repeats to test", proc.stdout)
        self.assertIn("no cell has two or more repeats", proc.stdout)
        proc = run_script("compare.py", base, new, "--strict")
        self.assertExit(proc, 1)
        self.assertIn(f"SUSPECT: {SLOW_CELL} throughput", proc.stdout)

    def test_untestable_improvement_is_not_suspect(self):
        base = self.make_set("base", repeats=1)
        new = self.make_set("new", repeats=1, slow={SLOW_CELL: 1.3})
        self.assertExit(run_script("compare.py", base, new, "--strict"), 0)


class CompareCellSets(GateTest):
    """Which cells are compared. BASE and NEW are runs of two experiments, whose speeds differ by chance
    on busy shared cores: SAME_SPEED's threshold keeps those differences out of the verdict."""
    SAME_SPEED = ("--threshold", "900%")

    def test_cells_in_only_one_set_are_listed_and_missing_ones_fail(self):
        base = self.make_set("base")
        new = self.make_set("new", include=[{"precision": "amp_fp16", "fusion": "on", "model.width": "512"}])
        proc = run_script("compare.py", base, new, *self.SAME_SPEED)
        self.assertExit(proc, 1)   # issue 13: an interrupted NEW must not pass the gate
        self.assertIn("Only in BASE (1): precision=amp_fp16,fusion=on,loss_scale=dynamic", proc.stdout)
        self.assertIn("Only in NEW (1): precision=amp_fp16,fusion=on,model.width=512", proc.stdout)
        self.assertIn("MISSING: 1 cell(s) of BASE are not in NEW", proc.stdout)
        self.assertExit(run_script("compare.py", base, new, "--allow-missing", *self.SAME_SPEED), 0)

    def test_cells_only_in_new_do_not_fail(self):
        base = self.make_set("base", include=[])
        new = self.make_set("new")
        self.assertExit(run_script("compare.py", base, new, *self.SAME_SPEED), 0)

    def test_no_common_cell_fails(self):
        base = self.make_set("base")
        new = self.make_set("new", matrix={}, include=[], baseline={})
        for flags in ([], ["--allow-missing"]):
            proc = run_script("compare.py", base, new, *flags)
            self.assertExit(proc, 1)
            self.assertIn("NOTHING COMPARED", proc.stdout)

    def test_single_cell_runs(self):
        base = self.make_set("base", matrix={}, include=[], baseline={})
        new = self.make_set("new", matrix={}, include=[], baseline={}, slow={"base": 0.8})
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 1)
        self.assertIn("REGRESSED: base throughput", proc.stdout)

    def test_changed_config_and_throttling_are_warned_about(self):
        base = self.make_set("base")
        new = self.make_set("new")
        # NEW ran the cell with another configuration, consistently (cell and manifest agree),
        # and the GPU throttled during it (NVML telemetry).
        edit_cell(new, SLOW_CELL, lambda d: d.update(config_hash="0000000000000000"))
        edit_manifest(new, lambda m: m["cell_config_hashes"].update({SLOW_CELL: "0000000000000000"}))
        edit_cell(new, SLOW_CELL, lambda d: d["summary"].update(throttled=True, throttle_reasons=["hw_thermal_slowdown"]))
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 0)
        self.assertIn(f"{SLOW_CELL}: configuration differs", proc.stdout)
        self.assertIn(f"{SLOW_CELL}: the GPU throttled its clocks in NEW (hw_thermal_slowdown)", proc.stdout)


class CompareMachines(GateTest):
    """Different machines are generations, never regressions."""

    def test_changed_machine_gives_generation_table_not_regression(self):
        base = self.make_set("cpu", machine="cpu")
        new = self.make_set("h100", machine="h100", slow={SLOW_CELL: 0.5})
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

    def test_malformed_cell_fields_exit_2_naming_the_file(self):
        # Issue 13 D8: `axes` as a list crashed report.py and --generations with a traceback.
        for key, value in (("axes", ["precision", "fp32"]), ("config", 3), ("repeats", [1, 2]), ("cell_id", 7)):
            dirs = [self.make_set(f"{key}_{m}", machine=m) for m in ("cpu", "h100")]
            path = edit_cell(dirs[1], all_cell_ids(dirs[1])[0], lambda c: c.update({key: value}))
            for args in (["--generations", *dirs], dirs):
                proc = run_script("compare.py", *args)
                self.assertExit(proc, 2)
                self.assertIn(path, proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)
            proc = run_script("report.py", dirs[1], "--out", os.path.join(self.tmp, f"r_{key}"))
            self.assertExit(proc, 2)
            self.assertIn(path, proc.stderr)

    def test_generations_table_and_plot(self):
        dirs = [self.make_set(m, machine=m) for m in ("cpu", "a100", "h100")]
        out, plot = os.path.join(self.tmp, "g.json"), os.path.join(self.tmp, "plots", "g.png")
        os.mkdir(os.path.dirname(plot))  # a missing parent is refused, not made (scripts/mpbench_output.py)
        proc = run_script("compare.py", "--generations", *dirs, "--json", out, "--plot", plot)
        self.assertExit(proc, 0)
        header = next(line for line in proc.stdout.splitlines() if line.startswith("cell "))
        for name in (fixtures.CPU_NAME, "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"):
            self.assertIn(name, header)
        self.assertTrue(os.path.getsize(plot) > 1000)
        with open(out) as f:
            gen = json.load(f)["generations"]
        rows = {r["cell_id"]: r for r in gen["rows"]}
        fp32 = rows["precision=fp32,fusion=off"]
        self.assertEqual(fp32["speedup_vs_own_fp32"], [1.0, 1.0, 1.0])
        self.assertAlmostEqual(fp32["throughput_vs_first"][0], 1.0)
        bf16 = rows["precision=amp_bf16,fusion=off"]["speedup_vs_own_fp32"]
        rates = [read_cell(dirs[2], cid)["summary"]["samples_per_s"]
                 for cid in ("precision=amp_bf16,fusion=off", "precision=fp32,fusion=off")]
        self.assertAlmostEqual(bf16[2], rates[0] / rates[1], places=6)   # the h100 set's cells, not another's
        self.assertNotIn("samples/J", proc.stdout)         # no set measured energy

    def test_generations_samples_per_joule(self):
        """samples/J per machine where its cells measured energy (runner/machine/energy_meter.h), "—" where not."""
        dirs = [self.make_set(m, machine=m) for m in ("a100", "h100")]
        cid = "precision=fp32,fusion=off"
        edit_cell(dirs[1], cid, lambda c: c["summary"].update({"samples_per_joule": 12.5}))
        out = os.path.join(self.tmp, "g.json")
        proc = run_script("compare.py", "--generations", *dirs, "--json", out)
        self.assertExit(proc, 0)
        self.assertIn("samples/J ->", proc.stdout)
        line = next(line for line in proc.stdout.splitlines() if line.startswith(cid + " "))
        self.assertTrue(line.rstrip().endswith("12.5"), line)
        self.assertIn("—", line)
        with open(out) as f:
            rows = {r["cell_id"]: r for r in json.load(f)["generations"]["rows"]}
        self.assertEqual(rows[cid]["samples_per_joule"][1], 12.5)


class CompareErrors(GateTest):
    """Exit 2 with a message naming the file."""

    def test_missing_directory(self):
        base = self.make_set("base")
        missing = os.path.join(self.tmp, "nope")
        proc = run_script("compare.py", base, missing)
        self.assertExit(proc, 2)
        self.assertIn(missing, proc.stderr)

    def assert_damage_is_named(self, damage, *words):
        """compare.py BASE NEW, after damage(NEW dir) broke a file of NEW and returned its path,
        exits 2 with a message naming that file and each of `words`."""
        base = self.make_set("base")
        new = self.make_set("new")
        path = damage(new)
        proc = run_script("compare.py", base, new)
        self.assertExit(proc, 2)
        for text in (path, *words):
            self.assertIn(text, proc.stderr)

    def test_corrupt_cell_json_is_named(self):
        def damage(new):
            path = os.path.join(new, "cells", "precision=fp32__fusion=on.json")
            with open(path, "w") as f:
                f.write('{"schema": "mpbench.cell/1", "cell_id": ')
            return path
        self.assert_damage_is_named(damage, "invalid JSON")

    def test_cell_missing_required_key_is_named(self):
        self.assert_damage_is_named(lambda new: edit_cell(new, SLOW_CELL, lambda d: d.pop("summary")), "summary")

    def test_missing_manifest_is_named(self):
        def damage(new):
            path = os.path.join(new, "manifest.json")
            os.remove(path)
            return path
        self.assert_damage_is_named(damage)

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

    def test_pooled_spread_and_t_test(self):
        import math
        import numpy as np
        # Two groups, log sd known: log values {0, 0.1} and {1, 1.1, 1.2} -> SS = 0.005 + 0.02, df 1 + 2.
        sd, df = compare.pooled_log_sd([np.exp([0, 0.1]), np.exp([1, 1.1, 1.2]), np.array([5.0])])
        self.assertEqual(df, 3)
        self.assertAlmostEqual(sd, math.sqrt(0.025 / 3))
        # t = 0.1 / (0.05 * sqrt(1/2 + 1/2)) = 2 with 10 df: two-sided p = 0.0734 (t tables).
        p = compare.pooled_t_test(np.exp([0.0, 0.0]), np.exp([0.1, 0.1]), 0.05, 10)
        self.assertAlmostEqual(p, 0.07339, places=4)
        self.assertTrue(math.isnan(compare.pooled_t_test([1.0], [2.0], math.nan, 0)))

    def test_holm_adjustment(self):
        # Sorted p 0.01, 0.02, 0.04 over 3 tests: 3*0.01, max(0.03, 2*0.02), max(0.04, 1*0.04); NaN untouched.
        adjusted = compare.holm_adjust([0.04, 0.01, float("nan"), 0.02])
        self.assertEqual([round(p, 6) for p in adjusted[:2]] + [round(adjusted[3], 6)], [0.04, 0.03, 0.04])
        self.assertNotEqual(adjusted[2], adjusted[2])

    def test_u_test_on_separated_samples_reaches_min_p(self):
        import numpy as np
        p = compare.u_test(np.array([1.0, 2, 3, 4, 5]), np.array([6.0, 7, 8, 9, 10]))
        self.assertAlmostEqual(p, 2 / 252, places=6)   # complete separation: 2 / C(10, 5)
        self.assertEqual(compare.u_test(np.array([1.0, 1.0]), np.array([1.0, 1.0])), 1.0)

    def test_alpha_help_names_the_test_it_gates(self):
        # judge_noisy compares alpha with the Holm-adjusted t-test p; the U test is only reported.
        action = next(a for a in compare.build_parser()._actions if "--alpha" in a.option_strings)
        self.assertIn("Holm-adjusted p of the t test", action.help)
        self.assertNotIn("level of the Mann-Whitney", action.help)


if __name__ == "__main__":
    unittest.main()
