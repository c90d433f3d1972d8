#!/usr/bin/python3
"""report.py's "Does it train as well?" section and eval-loss difference figure
(docs/REPORTS.md), from real runner output (tests/scripts/convergence_fixture.py:
3 seeds, a planted learning-rate change gives `worse`, fusion on `equivalent`),
and from a set written before the verdict existed (the section says it is absent)."""

import os
import unittest

from script_test_helpers import edit_cell, edit_json, run_script
import convergence_fixture as fx


def section(text, start, end):
    """The text between the first `start` and the next `end` after it."""
    a = text.index(start)
    return text[a:text.index(end, a)]


class ConvergenceReport(fx.FixtureTest):
    def setUp(self):
        super().setUp()
        self.rs = self.copy("set")

    def report(self):
        proc = run_script("report.py", self.rs)
        self.assertExit(proc, 0)
        out = os.path.join(self.rs, "report")
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            md = f.read()
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        return proc, out, md, page

    def test_verdict_table_above_the_curves_in_both_pages(self):
        proc, out, md, page = self.report()
        table = section(md, "## Does it train as well?", "## Convergence")
        rows = {line.split(" | ")[1]: line for line in table.splitlines() if line.startswith("| ") and " | " in line}
        self.assertIn("| worse |", rows[fx.PLANTED])
        self.assertIn("| equivalent |", rows[fx.SAME])
        # The planted cell never reaches the baseline's loss: "never reached" = 3 seeds, no time to target.
        # Its eval curves run above the baseline's all along: "apart", with the mean gap and its bound;
        # then diverged / recovered / NaN steps / skipped steps.
        self.assertRegex(rows[fx.PLANTED].rstrip(" |"), r"\| 3 \| apart: [0-9.]+ \(≤ [0-9.]+\) \| 0 / 0 / 0 / 0$",
                         rows[fx.PLANTED])
        self.assertRegex(rows[fx.SAME], r"\| within: ", rows[fx.SAME])
        # The mean paired difference with its interval, and delta's source.
        self.assertRegex(rows[fx.PLANTED], r"\| 0\.0\d+ \[0\.0\d+–0\.0\d+\] \| 3 \|")
        self.assertRegex(rows[fx.PLANTED], r"\((relative_1pct|configured|configured_abs)\)")
        html_section = section(page, "<h2>Does it train as well?</h2>", "<h2>Convergence</h2>")
        self.assertTrue("<td class=text>worse</td>" in html_section, html_section[:3000])
        self.assertTrue("<td class=text>equivalent</td>" in html_section, html_section[:3000])
        self.assertLess(page.index("Does it train as well?"), page.index("<h2>Convergence</h2>"))
        # The difference figure: written, with its caption, alt text and a row per non-baseline cell.
        self.assertRegex(proc.stdout, r"eval_loss_diff\.png +written")
        self.assertTrue(os.path.getsize(os.path.join(out, "eval_loss_diff.png")) > 1000)
        self.assertIn('alt="Eval-loss difference vs the baseline"', page)
        self.assertIn("![Eval-loss difference vs the baseline](eval_loss_diff.png)", md)
        self.assertNotIn("Cell key for eval_loss_diff.png", md)      # the figure names its cells itself

    def test_a_text_baseline_is_set_against_the_best_context_free_loss(self):
        _, _, md, _ = self.report()
        self.assertNotIn("ignoring the context", md)  # not text: no bound, no sentence
        finals = []

        def plant(bound):
            def edit(cell):
                cell["data"] = {"context_free_loss": {"loss": bound, "labels": 1234}}
                finals[:] = [r["eval"][-1]["loss"] for r in cell["repeats"]]
            edit_cell(self.rs, fx.BASELINE, edit)

        for offset, words in ((0.25, "below it: the model uses the context"),
                              (-0.25, "above it: the model has learned no more than token frequencies")):
            plant(1.0)  # first, to read the baseline's final eval losses
            mean = sum(finals) / len(finals)
            plant(mean + offset)
            _, _, md, page = self.report()
            legend = section(md, "## Does it train as well?", "## Convergence")
            self.assertIn(f"reaches on these held-out tokens is {mean + offset:.3f} nats", legend)
            self.assertIn(f"final eval loss, {mean:.3f} (mean over repeats), is {abs(offset):.3f} nats {words}", legend)
            self.assertIn("ignoring the context", page)

    def test_set_from_before_the_verdict_still_reports(self):
        for f in os.listdir(os.path.join(self.rs, "cells")):
            edit_json(os.path.join(self.rs, "cells", f), lambda c: c["summary"].pop("convergence", None))
        proc, out, md, page = self.report()
        self.assertNotIn("Traceback", proc.stderr)
        self.assertIn("absent: this result set was written before the runner recorded a convergence verdict",
                      section(md, "## Does it train as well?", "## Convergence"))
        self.assertRegex(proc.stdout, r"eval_loss_diff\.png +skipped: absent")
        self.assertFalse(os.path.exists(os.path.join(out, "eval_loss_diff.png")))


if __name__ == "__main__":
    unittest.main()
