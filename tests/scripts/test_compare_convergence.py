#!/usr/bin/python3
"""compare.py's convergence rule (docs/REPORTS.md, scripts/mpbench/compare/convergence.py):
a cell whose verdict goes from equivalent to worse between BASE and NEW is a
regression (exit 1, a REGRESSED line, JSON regressions), like a throughput drop;
equivalent -> inconclusive is reported and does not gate. BASE is real runner
output (tests/scripts/convergence_fixture.py); NEW is a copy whose cell JSON is
hand-edited to the transition under test, so nothing else differs."""

import json
import os
import unittest

from script_test_helpers import edit_cell, edit_json, run_script
import convergence_fixture as fx


def set_verdict(verdict):
    def edit(cell):
        cell["summary"]["convergence"]["verdict"] = verdict
    return edit


class CompareConvergence(fx.FixtureTest):
    def setUp(self):
        super().setUp()
        self.base = self.copy("base")
        self.new = self.copy("new")
        self.json = os.path.join(self.tmp, "cmp.json")

    def compare(self):
        proc = run_script("compare.py", self.base, self.new, "--json", self.json)
        with open(self.json, encoding="utf-8") as f:
            return proc, json.load(f)

    def convergence_result(self, payload, cell_id):
        return [r for r in payload["results"] if r["cell_id"] == cell_id and r["metric"] == "convergence"]

    def test_identical_sets_pass_with_the_verdicts_shown(self):
        proc, payload = self.compare()
        self.assertExit(proc, 0)
        [r] = self.convergence_result(payload, fx.SAME)
        self.assertEqual((r["verdict"], r["text"]), ("same", "equivalent"))
        [r] = self.convergence_result(payload, fx.PLANTED)
        self.assertEqual((r["verdict"], r["text"]), ("same", "worse"))

    def test_equivalent_to_worse_is_a_regression(self):
        edit_cell(self.new, fx.SAME, set_verdict("worse"))
        proc, payload = self.compare()
        self.assertExit(proc, 1)
        self.assertIn(f"REGRESSED: {fx.SAME} convergence equivalent → worse", proc.stdout)
        [r] = self.convergence_result(payload, fx.SAME)
        self.assertEqual(r["verdict"], "regressed")
        self.assertEqual([(x["cell_id"], x["metric"]) for x in payload["regressions"]], [(fx.SAME, "convergence")])
        # The table's convergence column names the transition.
        row = next(line for line in proc.stdout.splitlines() if line.startswith(fx.SAME + " "))
        self.assertIn("equivalent → worse", row)
        self.assertIn("REGRESSED: convergence", row)

    def test_equivalent_to_inconclusive_is_reported_and_does_not_gate(self):
        edit_cell(self.new, fx.SAME, set_verdict("inconclusive"))
        proc, payload = self.compare()
        self.assertExit(proc, 0)
        [r] = self.convergence_result(payload, fx.SAME)
        self.assertEqual((r["verdict"], r["text"]), ("changed", "equivalent → inconclusive"))
        self.assertEqual(payload["regressions"], [])
        row = next(line for line in proc.stdout.splitlines() if line.startswith(fx.SAME + " "))
        self.assertIn("equivalent → inconclusive", row)
        self.assertIn("does not gate", row)

    def test_sets_without_verdicts_compare_as_before(self):
        for d in (self.base, self.new):
            for f in os.listdir(os.path.join(d, "cells")):
                edit_json(os.path.join(d, "cells", f), lambda c: c["summary"].pop("convergence", None))
        edit_cell(self.new, fx.SAME, lambda c: c["summary"].update(convergence=None))
        proc, payload = self.compare()
        self.assertExit(proc, 0)
        self.assertEqual([r for r in payload["results"] if r["metric"] == "convergence"], [])


if __name__ == "__main__":
    unittest.main()
