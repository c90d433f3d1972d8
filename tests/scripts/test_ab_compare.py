#!/usr/bin/python3
"""Tests of scripts/ab_compare.py's statistics and verdicts, without running a
runner (tests/e2e/test_ab_gate.py runs real builds). The paired t is checked
against scipy's own one-sample t test, computed independently."""

import math
import os
import sys
import tempfile
import unittest

import numpy as np
from scipy import stats

import script_test_helpers  # noqa: F401  (puts scripts/ on sys.path)
from mpbench.compare import ab as ab_compare


def result(ratio, p):
    return {"throughput_ratio": ratio, "p_raw": p}


class PairedTest(unittest.TestCase):
    def test_matches_scipys_one_sample_t_on_log_ratios(self):
        base = [10.0, 11.0, 9.5, 10.4, 12.0]
        new = [10.9, 11.8, 10.6, 11.1, 13.5]
        ratio, (lo, hi), p = ab_compare.paired_test(base, new)
        d = np.log(base) - np.log(new)
        self.assertAlmostEqual(ratio, math.exp(d.mean()), places=12)
        self.assertAlmostEqual(p, stats.ttest_1samp(d, 0.0).pvalue, places=12)
        low, high = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))
        self.assertAlmostEqual(lo, math.exp(low), places=12)
        self.assertAlmostEqual(hi, math.exp(high), places=12)
        self.assertLess(ratio, 1.0)  # new is slower: throughput ratio below 1

    def test_drift_common_to_both_sides_cancels(self):
        # The machine slows 3x over the session; new is 1% slower in every round.
        drift = [1.0, 1.5, 2.2, 3.0, 2.0, 1.2]
        base = [4.0 * f for f in drift]
        new = [4.04 * f for f in drift]
        ratio, _, p = ab_compare.paired_test(base, new)
        self.assertAlmostEqual(ratio, 1 / 1.01, places=9)
        self.assertLess(p, 1e-6)

    def test_too_few_rounds_cannot_be_tested(self):
        ratio, (lo, hi), p = ab_compare.paired_test([1.0, 1.0], [2.0, 2.0])
        self.assertAlmostEqual(ratio, 0.5)
        self.assertTrue(math.isnan(p) and math.isnan(lo) and math.isnan(hi))


class Verdicts(unittest.TestCase):
    def judge(self, *results):
        results = list(results)
        ab_compare.judge(results, threshold=0.05, alpha=0.05)
        return [r["verdict"] for r in results]

    def test_within_threshold_is_same_whatever_p(self):
        self.assertEqual(self.judge(result(0.97, 1e-9)), ["same"])

    def test_beyond_threshold_and_significant_regresses_or_improves(self):
        self.assertEqual(self.judge(result(0.80, 1e-4), result(1.25, 1e-4)), ["regressed", "improved"])

    def test_beyond_threshold_untestable_is_suspect(self):
        self.assertEqual(self.judge(result(0.80, math.nan)), ["suspect"])

    def test_holm_over_cells(self):
        # 0.03 alone would pass alpha 0.05; with two cells Holm makes it 0.06.
        self.assertEqual(self.judge(result(0.8, 0.03), result(0.8, 0.04)), ["same", "same"])


class Arguments(unittest.TestCase):
    def test_missing_runner_is_exit_2(self):
        code = ab_compare.main(["x.yaml", "--base", "/nonexistent/runner", "--new", sys.executable])
        self.assertEqual(code, 2)

    def test_a_directory_as_runner_is_exit_2(self):
        # os.access(DIR, X_OK) is true for a directory: it used to reach subprocess (PermissionError).
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(ab_compare.main(["x.yaml", "--base", tmp, "--new", sys.executable]), 2)


class DryRunListing(unittest.TestCase):
    def test_cell_ids_keep_their_spaces_and_drop_the_notes(self):
        # The listing as print_cells_with_cost writes it ("  %3zu  %6s  %9s  %s%s%s"), ids with a
        # space and with notes after them.
        rows = [(1, "<0:01", "6", "precision=fp32,data.path=my data/a b.txt", "  (baseline)"),
                (2, "-", "-", "precision=amp_bf16,data.path=my data/a b.txt", "  (no estimate: why)"),
                (10, "1:02", "3720", "precision=fp8,fusion=on", "")]
        listing = ("x: 3 cell(s)\ntime estimate: none (no ceiling)\n" + f"  {'':>3}  {'h:mm':>6}  {'seconds':>9}  cell\n"
                   + "".join(f"  {i:>3}  {hm:>6}  {sec:>9}  {cid}{note}\n" for i, hm, sec, cid, note in rows)
                   + f"  {'':>3}  {'0:02':>6}  {'96':>9}  total (set-up, evaluation and ceiling measurements not included)\n")
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "runner")
            with open(fake, "w") as f:
                f.write(f"#!{sys.executable}\nimport sys\nsys.stdout.write({listing!r})\n")
            os.chmod(fake, 0o755)
            self.assertEqual(ab_compare.cell_ids(fake, "x.yaml", "cpu", None),
                             ["precision=fp32,data.path=my data/a b.txt",
                              "precision=amp_bf16,data.path=my data/a b.txt", "precision=fp8,fusion=on"])


if __name__ == "__main__":
    unittest.main()
