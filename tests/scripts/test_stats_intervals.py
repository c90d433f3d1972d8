#!/usr/bin/python3
"""mpbench.stats' t quantile and intervals against independent references.

- t_quantile against the closed forms of Student t's quantile for df = 1 (Cauchy:
  tan(pi (p - 1/2))) and df = 2 ((2p - 1) / sqrt(2 p (1 - p))), which do not go through
  scipy's t.ppf that t_quantile calls.
- mean_interval (the paired interval) against scipy.stats.ttest_1samp's statistic, p value
  and confidence_interval; welch_interval against ttest_ind(equal_var=False)'s statistic
  and p value (its df and se are what make them); paired_ratio_test against ttest_rel on
  the logs.

Tolerances (why): the closed forms and scipy's CDF are accurate to ~1e-15, but Debian
bookworm's scipy 1.10 t.ppf (Cephes stdtri) is off by up to 3.5e-9 relative at small df
(tests/numerics/test_stats_scipy.py measured it), so quantiles and the interval ends built
on them are compared at rtol 5e-8; statistics and p values (no quantile) at rtol 1e-9. A
wrong df, ddof or a one-/two-sided mix-up is off by 1e-3 or more.
"""

import math
import sys
import unittest

import numpy as np

import script_test_helpers  # noqa: F401  (puts scripts/ on sys.path)

try:
    from scipy import stats as sps
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIPPED: scipy is not importable ({e}); install python3-scipy (scripts/install_deps.sh does)")
    sys.exit(77)

from mpbench import stats  # noqa: E402
import speedup_reference  # noqa: E402

PPF_RTOL = 5e-8
RTOL = 1e-9


class Quantile(unittest.TestCase):
    PS = (1e-6, 0.01, 0.025, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995, 1 - 1e-6)

    def test_df1_is_cauchy(self):
        for p in self.PS:
            exact = math.tan(math.pi * (p - 0.5))
            self.assertTrue(math.isclose(stats.t_quantile(p, 1), exact, rel_tol=PPF_RTOL, abs_tol=1e-12),
                            f"p={p}: {stats.t_quantile(p, 1)} vs {exact}")

    def test_df2_closed_form(self):
        for p in self.PS:
            exact = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
            self.assertTrue(math.isclose(stats.t_quantile(p, 2), exact, rel_tol=PPF_RTOL, abs_tol=1e-12),
                            f"p={p}: {stats.t_quantile(p, 2)} vs {exact}")


class Intervals(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(32)

    def test_mean_interval_is_one_sample_t(self):
        for n in (2, 3, 5, 12):
            for confidence in (0.9, 0.95):
                d = self.rng.normal(0.03, 0.02, n)
                centre, half, se, df = stats.mean_interval(d, confidence)
                ref = sps.ttest_1samp(d, 0.0)
                self.assertEqual(df, n - 1)
                self.assertTrue(math.isclose(centre / se, ref.statistic, rel_tol=RTOL))
                self.assertTrue(math.isclose(stats.two_sided_p(centre, se, df), ref.pvalue, rel_tol=RTOL))
                ci = ref.confidence_interval(confidence)
                self.assertTrue(math.isclose(centre - half, ci.low, rel_tol=PPF_RTOL, abs_tol=1e-15), (n, confidence))
                self.assertTrue(math.isclose(centre + half, ci.high, rel_tol=PPF_RTOL, abs_tol=1e-15), (n, confidence))

    def test_welch_interval_is_welch_t(self):
        for na, nb in ((2, 2), (3, 5), (6, 4), (10, 10)):
            a, b = self.rng.normal(1.0, 0.05, na), self.rng.normal(1.02, 0.12, nb)
            centre, half, se, df = speedup_reference.welch_interval(a, b, 0.95)
            ref = sps.ttest_ind(a, b, equal_var=False)
            self.assertTrue(math.isclose(centre / se, ref.statistic, rel_tol=RTOL), (na, nb))
            self.assertTrue(math.isclose(stats.two_sided_p(centre, se, df), ref.pvalue, rel_tol=RTOL), (na, nb))
            self.assertTrue(math.isclose(half, stats.t_quantile(0.975, df) * se, rel_tol=RTOL))

    def test_constant_samples_give_a_point(self):
        self.assertEqual(stats.mean_interval([0.5, 0.5, 0.5], 0.95)[1], 0.0)
        centre, half, se, df = speedup_reference.welch_interval([1.0, 1.0], [2.0, 2.0], 0.95)
        self.assertEqual((centre, half, se), (-1.0, 0.0, 0.0))
        self.assertTrue(math.isnan(df))

    def test_paired_ratio_test_is_ttest_rel_on_logs(self):
        base = self.rng.uniform(90, 110, 6)
        new = base * self.rng.normal(1.05, 0.02, 6)
        ratio, (lo, hi), p = stats.paired_ratio_test(base, new)
        ref = sps.ttest_rel(np.log(new), np.log(base))
        ci = ref.confidence_interval(0.95)
        self.assertTrue(math.isclose(p, ref.pvalue, rel_tol=RTOL))
        self.assertTrue(math.isclose(math.log(lo), ci.low, rel_tol=PPF_RTOL))
        self.assertTrue(math.isclose(math.log(hi), ci.high, rel_tol=PPF_RTOL))
        self.assertTrue(math.isclose(ratio, math.exp(np.mean(np.log(new / base))), rel_tol=1e-12))
        self.assertTrue(math.isnan(stats.paired_ratio_test(base[:2], new[:2])[2]))   # < 3 pairs: no test

    def test_one_repeat_blocks_are_cut_as_the_runner_cuts_them(self):
        # runner/measure/stats.cpp: block b is [b*n/blocks, (b+1)*n/blocks): 14 steps -> 2,3,3,3,3.
        units = speedup_reference.interval_units([np.arange(14.0)])
        self.assertEqual([u.size for u in units], [2, 3, 3, 3, 3])
        self.assertEqual(units[0].tolist(), [0.0, 1.0])
        self.assertEqual(len(speedup_reference.interval_units([np.arange(3.0)])), 3)          # fewer steps than blocks
        self.assertEqual(len(speedup_reference.interval_units([np.arange(4.0), np.arange(5.0)])), 2)   # repeats as they are


if __name__ == "__main__":
    unittest.main()
