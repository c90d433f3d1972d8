#!/usr/bin/python3
"""The report on large sets and on text with `$` (issue 43 items 4 and 7).

Item 4: a 500-cell set made report.py ask matplotlib for a 900x109860-pixel figure (exit 1),
and 1,000 cells took 353 s (every cell's label scanned every cell). Every figure now draws at
most report.figure_cells.MAX_FIGURE_CELLS cells and says what it left out; the cap is lowered
here so the test stays seconds on a shared machine (a 1,000-cell report is timed by hand: see
docs/REPORTS.md). Item 7: `$` in a name must be text, not the start of matplotlib's mathtext.
"""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_test_helpers import TempDirTest, run_script  # noqa: E402

from mpbench import fixture_edits  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench import results as mr  # noqa: E402
from mpbench.report import figure_cells  # noqa: E402
from mpbench.report import labels as report_labels  # noqa: E402
from mpbench.report import plots as report_plots  # noqa: E402

DOLLARS = "sub/c$\\nope{$.txt"        # issue 43's legal data.path value, as a name


def png_size(path):
    """(width, height) in pixels from a PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


class LargeSet(TempDirTest):
    def setUp(self):
        super().setUp()
        self.addCleanup(setattr, figure_cells, "MAX_FIGURE_CELLS", figure_cells.MAX_FIGURE_CELLS)
        figure_cells.MAX_FIGURE_CELLS = 6

    def test_figures_draw_a_bounded_view_and_say_what_they_left_out(self):
        path = self.make_set("big")
        fixture_edits.replicate_cells(path, 30)
        rs = mr.load_results(path)
        self.assertEqual(len(rs.cells), 30)
        out = os.path.join(self.tmp, "report")
        os.makedirs(out)
        plots = report_plots.render_plots(rs, out)
        drawn = [p for p in plots if p.file]
        self.assertGreaterEqual(len(drawn), 3, [(p.name, p.skipped) for p in plots])
        keys = report_labels.cell_keys(rs)
        first_six = [c.cell_id for c in report_labels.display_order(rs)[:6]]
        for p in drawn:
            self.assertTrue(any("at most 6 of the set's 30 cells" in n and "other 24" in n for n in p.notes),
                            (p.name, p.notes))
            width, height = png_size(p.file)
            self.assertLess(width * height, 6e6, p.name)        # 30 full rows/bars would be far larger
            for cid in p.key_cells or []:                       # the figures' keys are the tables' keys
                self.assertIn(cid, first_six + [rs.baseline().cell_id], p.name)
                self.assertIn(cid, keys)

    def test_the_baseline_stays_in_the_view_when_it_sorts_late(self):
        rs = mr.load_results(self.make_set("late"))
        view, note = figure_cells.figure_view(rs, limit=2)
        base = rs.baseline()
        self.assertIn(base, view.cells)
        self.assertEqual(len(view.cells), 2)
        self.assertIn("other 7", note)
        self.assertEqual(len(rs.cells), 9)                       # the set itself is untouched
        self.assertEqual(figure_cells.figure_view(rs, limit=9), (rs, None))

    def test_axis_keys_follow_the_cells_they_are_asked_about(self):
        rs = mr.load_results(self.make_set("keys"))
        self.assertIn("loss_scale", rs.axis_keys())
        rs.cells = [c for c in rs.cells if "loss_scale" not in c.cell_id]     # a new list: no stale cache
        self.assertNotIn("loss_scale", rs.axis_keys())


class DollarsAreText(TempDirTest):
    def test_report_with_dollars_in_every_title(self):
        path = self.make_set("dollars")
        fixture_edits.name_cpu(path, f"cpu {DOLLARS}")            # the machine label is in every figure's title
        proc = run_script("report.py", path, "--out", os.path.join(self.tmp, "report"))
        self.assertExit(proc, 0)
        with open(os.path.join(self.tmp, "report", "report.md"), encoding="utf-8") as f:
            self.assertIn("convergence.png", f.read())

    def test_generations_plot_with_dollars_in_a_cell_id(self):
        import matplotlib
        from mpbench.compare.generations import plot_generations
        # the report's modules (imported above) turned mathtext off for the whole process: back on,
        # so this tests compare.py's own setting
        matplotlib.rcParams["text.parse_math"] = True
        self.addCleanup(matplotlib.rcParams.__setitem__, "text.parse_math", False)
        gen = {"machines": ["a", "b"],
               "rows": [{"cell_id": f"precision=fp32,data.path={DOLLARS}", "speedup_vs_own_fp32": [1.0, 1.0],
                         "throughput_vs_first": [1.0, 2.0]}]}
        out = os.path.join(self.tmp, "gen.png")
        plot_generations(gen, out)
        self.assertGreater(png_size(out)[0], 0)


if __name__ == "__main__":
    unittest.main()
