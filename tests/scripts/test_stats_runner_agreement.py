#!/usr/bin/python3
"""mpbench.stats agrees with the runner's speed-up intervals (runner/measure/stats.cpp).

The built runner (MPB_RUNNER) runs a tiny CPU MLP experiment (two cells, three repeats)
interleaved (paired t over rounds), sequential (Welch over repeats) and with one repeat
(Welch over blocks of it); for every cell with an interval, speedup_reference.speedup_interval
recomputes it from the per-repeat step times in the cell JSON (Cell.timed_steps, the
runner's selection) and must match what the runner wrote: method, units, df, lo and hi.

Tolerances (why): both sides take the same medians and logs of the same doubles (the
runner writes 17 significant digits, so the inputs are exact) and differ only in the t
quantile: stats.cpp bisects its own incomplete beta to 1e-15, scipy's t.ppf (Cephes stdtri
in Debian bookworm's scipy 1.10) is off by up to 3.5e-9 relative at small df
(tests/numerics/test_stats_scipy.py measured it). The half-width (log scale) inherits that
relative error, and lo/hi = exp(centre -+ half) carry it times |half| (< 1 here), plus a
few ulp from libm's log/exp against numpy's: so lo and hi at rtol 1e-7, and Welch's df
(no quantile in it) at rtol 1e-12. A wrong degree of freedom, ddof or pairing moves lo/hi
by 1e-3 or more.
"""

import os
import sys
import tempfile
import unittest

from script_test_helpers import SOURCE_DIR  # noqa: F401  (puts scripts/ on sys.path)

from mpbench import results as mr  # noqa: E402
from speedup_reference import speedup_interval  # noqa: E402
from mpbench.tiny_experiment import run_on_cpu, write_mlp_experiment  # noqa: E402

RUNNER = os.environ.get("MPB_RUNNER", os.path.join(SOURCE_DIR, "build", "runner"))
LO_HI_RTOL = 1e-7
DF_RTOL = 1e-12

# Two cells, a few seconds; `repeats` and the order vary per set.
EXPERIMENT = dict(steps=16, warmup_steps=2, batch_size=32, width=32, input_dim=16, eval_samples=32,
                  matrix="fusion: [off, on]")


def run_set(tmp, name, repeats, order):
    out = os.path.join(tmp, name)
    os.mkdir(out)
    path = write_mlp_experiment(out, "stats_agreement", repeats=repeats, **EXPERIMENT)
    return mr.load_results(run_on_cpu(RUNNER, path, out, args=["--order", order]))


class RunnerAgreement(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(RUNNER, os.X_OK):
            raise unittest.SkipTest(f"no runner at {RUNNER} (CTest sets MPB_RUNNER)")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.sets = {
            "paired": run_set(cls.tmp.name, "interleaved", 3, "interleaved"),
            "welch": run_set(cls.tmp.name, "sequential", 3, "sequential"),
            "blocks": run_set(cls.tmp.name, "single", 1, "sequential"),
        }

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_set(self, rs, method_start):
        base = rs.baseline()
        checked = 0
        for cell in rs.cells:
            written = cell.data["summary"].get("speedup_interval")
            if cell is base or cell.is_baseline:
                continue
            self.assertIsNotNone(written, f"{cell.cell_id}: the runner wrote no interval")
            paired = written["method"].startswith("paired")
            ours = speedup_interval(base.timed_steps(), base.batch_size(), cell.timed_steps(), cell.batch_size(),
                                    paired=paired, confidence=written["confidence"])
            self.assertIsNotNone(ours, cell.cell_id)
            self.assertTrue(written["method"].startswith(method_start), written["method"])
            self.assertEqual(ours["method"], written["method"])
            self.assertEqual(ours["units"], written["units"])
            if written["df"] is None:
                self.assertIsNone(ours["df"])
            else:
                self.assertAlmostEqual(ours["df"] / written["df"], 1.0, delta=DF_RTOL)
            for end in ("lo", "hi"):
                self.assertLess(abs(ours[end] / written[end] - 1.0), LO_HI_RTOL,
                                f"{cell.cell_id} {end}: ours {ours[end]!r}, runner {written[end]!r}")
            checked += 1
        self.assertGreater(checked, 0, "no cell with an interval to compare")

    def test_paired_over_interleaved_rounds(self):
        self.check_set(self.sets["paired"], "paired t over rounds")

    def test_welch_over_sequential_repeats(self):
        self.check_set(self.sets["welch"], "Welch t over repeats")

    def test_welch_over_blocks_of_one_repeat(self):
        self.check_set(self.sets["blocks"], "Welch t over consecutive blocks")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[1:])
