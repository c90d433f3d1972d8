#!/usr/bin/python3
"""Issue 41's report figures and noise measure, on real tiny runs (mpbench/fixtures.py):
eval_loss_diff.png is one panel with the cells on its x axis (not a full-width panel per cell),
the loss-scale legend names only lines that can be seen (identical scales share one line and one
entry; a cell with no scale gets none), log₂ axes read "2¹⁶" (not raw mathtext), and the report's
one step-time noise measure is the robust CV, in the Cells table and the Noise section alike."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_test_helpers import TempDirTest, edit_cell, run_script  # noqa: E402

from mpbench import results as mr  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench.report import labels as report_labels  # noqa: E402
from mpbench.report import plots as report_plots  # noqa: E402
from mpbench.report.plot_numerics import same_scale_groups  # noqa: E402
from mpbench.report.verdict import plot_eval_loss_diff  # noqa: E402

DYNAMIC_ON = "precision=amp_fp16,fusion=on,loss_scale=dynamic"
DYNAMIC_OFF = "precision=amp_fp16,fusion=off,loss_scale=dynamic"


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def data_axes(fig):
    """The figure's axes that hold plotted data (not colour bars or empty slots)."""
    return [ax for ax in fig.axes if ax.get_visible() and (ax.lines or ax.collections or ax.patches)]


class EvalLossDifference(TempDirTest):
    def test_one_panel_with_the_cells_on_its_axis(self):
        rs = mr.load_results(self.make_set("verdicts"))
        drawn = plot_eval_loss_diff(rs)
        names = report_labels.plot_names(rs, stacked=True)
        axes = data_axes(drawn.fig)
        self.assertGreaterEqual(len(drawn.key_cells), 5)            # the premise: many cells with a verdict
        self.assertLessEqual(len(axes), 2, [ax.get_title() for ax in axes])   # not one panel per cell
        ticks = [t.get_text() for t in axes[0].get_xticklabels()]
        self.assertEqual(ticks, [names[cid] for cid in drawn.key_cells])
        # every seed's final difference is a point of the first panel (5 cells x 3 seeds and more)
        points = sum(len(c.get_offsets()) for c in axes[0].collections if c.get_offsets().ndim == 2)
        self.assertGreaterEqual(points, len(drawn.key_cells) * 3)
        report_plots.plt.close(drawn.fig)


class LossScaleLegend(TempDirTest):
    def scaled_set(self, name):
        """Two dynamic-scale amp_fp16 cells, the second given the first's scales and skipped steps."""
        path = self.make_set(name, include=[{"precision": "amp_fp16", "fusion": f, "loss_scale": "dynamic"}
                                            for f in ("on", "off")])
        rs = mr.load_results(path)
        source = rs.by_id[DYNAMIC_ON]
        scales = [r.get("loss_scale") for r in source.repeats]
        skipped = [r.get("skipped") for r in source.repeats]

        def copy(cell):
            for repeat, scale, skip in zip(cell["repeats"], scales, skipped):
                repeat.update(loss_scale=scale, skipped=skip)
        edit_cell(path, DYNAMIC_OFF, copy)
        return path

    def test_identical_scales_share_one_line_and_one_entry(self):
        rs = mr.load_results(self.scaled_set("same"))
        fig = report_plots.plot_loss_scale(rs)
        ax = fig.axes[0]
        _, labels = ax.get_legend_handles_labels()
        names = report_labels.plot_names(rs)
        lines = [label for label in labels if not label.startswith("skipped step")]
        self.assertEqual(len(lines), 1, labels)
        self.assertIn(names[DYNAMIC_ON], lines[0])
        self.assertIn(names[DYNAMIC_OFF], lines[0])
        self.assertEqual(len({label for label in labels}), len(labels), labels)
        report_plots.plt.close(fig)

    def test_a_cell_without_a_scale_gets_no_entry(self):
        path = self.scaled_set("absent")
        edit_cell(path, DYNAMIC_OFF, lambda c: [r.pop("loss_scale", None) for r in c["repeats"]])
        rs = mr.load_results(path)
        self.assertEqual([[c.cell_id for c in g] for g in same_scale_groups([rs.by_id[DYNAMIC_OFF]])], [])
        fig = report_plots.plot_loss_scale(rs)
        _, labels = fig.axes[0].get_legend_handles_labels()
        self.assertFalse(any(report_labels.plot_names(rs)[DYNAMIC_OFF] in label.split("\n") for label in labels),
                         labels)
        report_plots.plt.close(fig)

    def test_log2_ticks_are_powers_of_two_not_mathtext(self):
        rs = mr.load_results(self.scaled_set("ticks"))
        fig = report_plots.plot_loss_scale(rs)
        fig.canvas.draw()
        ticks = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
        self.assertTrue(ticks)
        for text in ticks:
            self.assertNotIn("$", text)
            self.assertRegex(text, r"^2[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+$")
        report_plots.plt.close(fig)


class OneNoiseMeasure(TempDirTest):
    def test_step_cv_is_the_robust_cv_and_the_text_says_so(self):
        path = self.make_set("noise", numerics=False, include=[])
        cid = "precision=tf32,fusion=off"
        edit_cell(path, cid, lambda c: c["summary"]["noise"].update(cv=0.154, robust_cv=0.021, noisy=False))
        proc = run_script("report.py", path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        md = read(os.path.join(path, "report", "report.md"))
        table = md[md.index("## Cells"):]
        header = [h.strip() for h in table.splitlines()[2].strip("|").split("|")]
        row = next(line for line in table.splitlines() if f"| {cid}" in line)
        values = [v.strip() for v in row.strip("|").split("|")]
        self.assertEqual(values[header.index("step CV")], "2.1%")     # the robust CV, not 15.4%
        self.assertNotIn("15.4%", md)
        self.assertIn("No cell's step times were flagged as noisy. Noise here and in the Cells table's step CV "
                      "is the robust CV", md)
        self.assertIn("step CV: the robust coefficient of variation", md)


if __name__ == "__main__":
    unittest.main()
