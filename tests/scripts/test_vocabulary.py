"""The vocabulary the runner and the scripts share (scripts/mpbench_vocabulary.py).

The runner is the one source of precision names and order, memory categories and
axis keys: it writes them into manifest.json and prints them with
`runner describe --json`. These tests fail when the two sides disagree: the
committed snapshot (for result sets from before manifest.vocabulary) against the
built runner's output, and the reader against a manifest's own vocabulary.
"""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from script_test_helpers import TempDirTest, edit_manifest, run_script  # noqa: E402

from mpbench import results as mr  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench.results import vocabulary as mpbench_vocabulary  # noqa: E402
from mpbench.report import labels as report_labels  # noqa: E402


def runner_path():
    """The built runner CTest names in MPB_RUNNER; None when run outside CTest without it."""
    path = os.environ.get("MPB_RUNNER")
    return path or None


class SnapshotMatchesRunner(unittest.TestCase):
    def test_snapshot_equals_runner_describe(self):
        """scripts/runner_vocabulary.json is `runner describe --json`, byte for byte after parsing.
        When this fails, regenerate it: runner describe --json > scripts/runner_vocabulary.json"""
        runner = runner_path()
        if runner is None:
            self.skipTest("MPB_RUNNER not set (CTest sets it to the built runner)")
        self.assertTrue(os.path.isfile(runner), f"MPB_RUNNER={runner} does not exist")
        proc = subprocess.run([runner, "describe", "--json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(mpbench_vocabulary.SNAPSHOT_PATH, encoding="utf-8") as f:
            committed = json.load(f)
        self.assertEqual(committed, json.loads(proc.stdout),
                         "scripts/runner_vocabulary.json differs from `runner describe --json`")

    def test_runner_describe_refuses_other_forms(self):
        runner = runner_path()
        if runner is None:
            self.skipTest("MPB_RUNNER not set (CTest sets it to the built runner)")
        proc = subprocess.run([runner, "describe"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("usage: runner describe --json", proc.stderr)

    def test_snapshot_has_fp8_in_its_place(self):
        v = mpbench_vocabulary.snapshot()
        self.assertEqual(v.precisions[:5], ("fp32", "tf32", "amp_bf16", "amp_fp16", "fp8"))
        self.assertIn("precision", v.axes)
        self.assertEqual(v.memory_categories[0], "params")


class ReaderUsesTheManifest(TempDirTest):
    def test_manifest_vocabulary_orders_cells(self):
        """A manifest's own vocabulary wins over the snapshot: a reversed order sorts the cells reversed."""
        results = self.make_set("own", matrix={"precision": ["fp32", "amp_bf16", "fp8"]}, repeats=2,
                                include=[], baseline={"precision": "fp32"}, numerics=False)
        order = lambda rs: [c.setting("precision") for c in report_labels.display_order(rs)]  # noqa: E731
        self.assertEqual(order(mr.load_results(results)), ["fp32", "amp_bf16", "fp8"])   # the snapshot
        with open(mpbench_vocabulary.SNAPSHOT_PATH, encoding="utf-8") as f:
            snap = json.load(f)
        edit_manifest(results, lambda m: m.update(vocabulary=dict(snap, precisions=["fp8", "amp_bf16", "fp32"])))
        self.assertEqual(order(mr.load_results(results)), ["fp8", "amp_bf16", "fp32"])

    def test_bad_vocabulary_is_refused_naming_the_manifest(self):
        results = self.make_set("bad", matrix={"precision": ["fp32", "fp8"]}, repeats=2,
                                include=[], baseline={"precision": "fp32"}, numerics=False)
        for name, vocabulary in (("empty list", {"schema": "mpbench.vocabulary/1", "precisions": [],
                                                 "memory_categories": ["params"], "axes": ["precision"]}),
                                 ("no schema", {"precisions": ["fp32"], "memory_categories": ["params"],
                                                "axes": ["precision"]}),
                                 ("not a list", {"schema": "mpbench.vocabulary/1", "precisions": "fp32",
                                                 "memory_categories": ["params"], "axes": ["precision"]})):
            with self.subTest(name):
                edit_manifest(results, lambda m: m.update(vocabulary=vocabulary))
                proc = run_script("report.py", results)
                self.assertExit(proc, 2)
                self.assertIn("manifest.json", proc.stderr)
                self.assertIn("vocabulary", proc.stderr)


if __name__ == "__main__":
    unittest.main()
