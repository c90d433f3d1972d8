#!/usr/bin/python3
"""mpbench.results.frames: a set as pandas DataFrames (cells, long-form curves) and the long-form
export (issue 41, "Results into the user's tools"). Checked against the cell files themselves."""

import csv
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_test_helpers import SKIP_EXIT_CODE, TempDirTest  # noqa: E402

from mpbench import fixtures  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench import results as mr  # noqa: E402
from mpbench.results import frames  # noqa: E402

try:
    import pandas  # noqa: F401
except ImportError:
    pandas = None


class SummaryCsvMachineColumns(TempDirTest):
    """summary.csv as the runner wrote it (no fixture edit): each row names the cell's device, device
    name, run id and the commit of that run, the same values as the cell file and the manifest."""

    def test_the_runners_rows_name_device_run_and_commit(self):
        path = fixtures.pristine_run()
        rs = mr.load_results(path)
        with open(os.path.join(path, "summary.csv"), newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            self.assertEqual(reader.fieldnames[-4:], list(frames.CELL_MACHINE_COLUMNS))
            rows = {row["cell_id"]: row for row in reader}
        self.assertEqual(sorted(rows), sorted(c.cell_id for c in rs.cells))
        self.assertTrue(rs.manifest["git_commit"])
        for cell in rs.cells:
            row = rows[cell.cell_id]
            self.assertEqual((row["device"], row["device_name"]), ("cpu", rs.manifest["machine"]["cpu_model"]))
            self.assertEqual(row["device_name"], cell.device["name"])
            self.assertEqual((row["run_id"], row["commit"]), (rs.manifest["run_id"], rs.manifest["git_commit"]))


@unittest.skipIf(pandas is None, "pandas is not installed")
class Frames(TempDirTest):
    def test_cells_frame_has_every_cell_and_the_machine(self):
        path = self.make_set("cells", machine="h100")
        rs = mr.load_results(path)
        frame = frames.load(path)
        self.assertEqual(list(frame["cell_id"]), [c.cell_id for c in rs.cells])      # run order
        for column in frames.MACHINE_COLUMNS:
            self.assertIn(column, frame.columns)
        self.assertEqual(set(frame["device"]), {"cuda"})
        self.assertEqual(set(frame["device_name"]), {"NVIDIA H100 80GB HBM3"})
        self.assertEqual(set(frame["run_id"]), {rs.manifest["run_id"]})
        self.assertEqual(set(frame["commit"]), {rs.manifest["git_commit"]})
        self.assertEqual(set(frame["experiment"]), {rs.experiment})
        for cell, speedup in zip(rs.cells, frame["speedup"]):
            want = cell.summary_value("speedup")
            if mr.finite(want):
                self.assertAlmostEqual(speedup, want, places=9)

    def test_an_older_runners_set_gets_the_columns_from_its_cells(self):
        path = self.make_set("legacy", legacy=True)
        with open(os.path.join(path, "summary.csv"), newline="", encoding="utf-8") as f:
            self.assertNotIn("device", next(csv.reader(f)))
        frame = frames.load(path)
        self.assertEqual(set(frame["device"]), {"cpu"})
        self.assertEqual(set(frame["device_name"]), {fixtures.CPU_NAME})
        self.assertEqual(set(frame["run_id"]), {""})      # an older runner wrote no run id

    def test_curves_are_the_cells_series(self):
        path = self.make_set("curves")
        rs = mr.load_results(path)
        long = frames.curves(path)
        cell = rs.cells[1]
        loss = long[(long.cell_id == cell.cell_id) & (long.metric == "loss") & (long.repeat == 1)]
        want = cell.series("loss")[1]
        self.assertEqual(list(loss["step"]), list(range(len(want))))
        self.assertEqual([round(v, 12) for v in loss["value"]], [round(float(v), 12) for v in want])

    def test_export_csv_and_jsonl(self):
        path = self.make_set("export")
        rows = len(frames.curves(path))
        out_csv, out_jsonl = os.path.join(self.tmp, "s.csv"), os.path.join(self.tmp, "s.jsonl")
        self.assertEqual(frames.main([path, "--export", out_csv]), 0)
        self.assertEqual(frames.main([path, "--export", out_jsonl]), 0)
        with open(out_csv, newline="", encoding="utf-8") as f:
            parsed = list(csv.DictReader(f))
        self.assertEqual(len(parsed), rows)
        self.assertEqual(list(parsed[0]), frames.EXPORT_COLUMNS)
        with open(out_jsonl, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), rows)
        self.assertEqual(float(parsed[5]["value"]), lines[5]["value"])

    def test_bad_set_exits_2(self):
        out = os.path.join(self.tmp, "s.csv")
        self.assertEqual(frames.main([os.path.join(self.tmp, "nowhere"), "--export", out]), 2)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    if pandas is None:
        print("pandas not installed: skipping", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
    unittest.main()
