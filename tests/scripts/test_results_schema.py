#!/usr/bin/python3
"""Damaged and hand-edited result files are input errors, never regressions (issue 33 defects 2, 3, 7).

The one schema check (scripts/mpbench_schema.py, called by mpbench_load) names
the file, the field and the expected type, and compare.py and report.py exit 2;
before it, an int for summary.peak_memory_bytes was a traceback and exit 1 (the
regression code) in both. NaN, inf and negative measurements are refused the
same way; a finite but absurd 1e308 prints a short percentage; report.md
escapes `|` and HTML in experiment names and cell ids; a cell of another run
or experiment is refused by name. The fuzzer's own smoke run is here too.
"""

import json
import os
import unittest

from script_test_helpers import TempDirTest, cell_path, edit_cell, edit_json, edit_manifest, run_script

from mpbench import fuzz as fuzz_results  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench.results.schema import FieldError, check_cell_fields, check_manifest_fields  # noqa: E402

CELL = "precision=fp32,fusion=on"


def set_field(dotted, value):
    """An edit for edit_cell: data[a][b]... = value."""
    def edit(data):
        *path, last = dotted.split(".")
        for key in path:
            data = data[key]
        data[last] = value
    return edit


def write_text_number(path, dotted, text):
    """Replace one number of a cell file by raw JSON text json.dump cannot write (Infinity, 1e999)."""
    marker = 123456.789012
    edit_json(path, set_field(dotted, marker))
    with open(path, encoding="utf-8") as f:
        content = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(content.replace(repr(marker), text))


class SchemaRules(unittest.TestCase):
    """check_cell_fields alone: what it refuses and how it says so."""

    def assertRefused(self, data, *words, check=check_cell_fields):
        with self.assertRaises(FieldError) as caught:
            check(data)
        for word in words:
            self.assertIn(word, str(caught.exception))

    def test_types_signs_and_finiteness(self):
        ok = {"cell_id": "a", "summary": {"samples_per_s": 10.0, "peak_memory_bytes": {"total": 5}},
              "repeats": [{"step_time_ms": [1.0, None], "loss": [-0.5]}]}
        check_cell_fields(ok)      # null in a list (a non-finite value the runner wrote) and a negative loss pass
        self.assertRefused(dict(ok, summary={"peak_memory_bytes": 5}),
                           "field summary.peak_memory_bytes", "expected an object", "got int 5")
        for bad in (float("nan"), float("inf"), -1.0):
            self.assertRefused(dict(ok, summary={"samples_per_s": bad}), "summary.samples_per_s")
        self.assertRefused(dict(ok, summary={"samples_per_s": "fast"}), "expected a finite number >= 0", "got str")
        self.assertRefused(dict(ok, repeats=[{"step_time_ms": [1.0, -2.0]}]), "field repeats[0].step_time_ms[1]")
        self.assertRefused(dict(ok, extra={"deep": [float("inf")]}), "field extra.deep[0]", "finite")
        self.assertRefused(dict(ok, flops_per_step=10 ** 400), "field flops_per_step", "a float can hold")
        self.assertRefused(dict(ok, is_baseline="yes"), "field is_baseline", "true or false")

    def test_issue_43_item_18_gaps(self):
        # Accepted with exit 0 before: a number for finished, an axis value that is not text, no repeats.
        ok = {"cell_id": "a", "summary": {}, "axes": {"fusion": "on"}, "repeats": [{"loss": [1.0]}]}
        check_cell_fields(ok)
        self.assertRefused(dict(ok, axes={"fusion": 3}), "field axes.fusion", "a string", "got int 3")
        self.assertRefused(dict(ok, repeats=[]), "field repeats", "a non-empty list")
        check_manifest_fields({"finished": None})   # a run still going, or stopped
        check_manifest_fields({"finished": "2026-11-29T09:00:00Z"})
        self.assertRefused({"finished": 5}, "field finished", "a string", check=check_manifest_fields)

    def test_manifest(self):
        check_manifest_fields({"experiment": "e", "cells": ["a"], "run_id": "r"})
        self.assertRefused({"cells": {"a": 1}}, "field cells", "a list", check=check_manifest_fields)
        self.assertRefused({"device": -1}, "field device", "an object", check=check_manifest_fields)


class ScriptsExit2(TempDirTest):
    """compare.py and report.py on damaged sets: exit 2 naming file and field, no traceback."""

    def assert_both_refuse(self, results, path, *words):
        for name, args in (("compare.py", [results, results]), ("report.py", [results, "--out", self.tmp + "/r"])):
            proc = run_script(name, *args)
            self.assertExit(proc, 2)
            self.assertNotIn("Traceback", proc.stderr)
            for text in (path, *words):
                self.assertIn(text, proc.stderr, name)

    def test_issue_example_peak_memory_as_int(self):
        results = self.make_set("s")
        path = edit_cell(results, CELL, set_field("summary.peak_memory_bytes", 5))
        self.assert_both_refuse(results, path, "field summary.peak_memory_bytes", "expected an object", "int")

    def test_non_finite_or_negative_throughput(self):
        for text in ("Infinity", "NaN", "-1e999", "-5.5"):
            results = self.make_set("s_" + text)
            path = cell_path(results, CELL)
            write_text_number(path, "summary.samples_per_s", text)
            self.assert_both_refuse(results, path, "field summary.samples_per_s")

    def test_huge_throughput_prints_a_short_percentage(self):
        base, new = self.make_set("base"), self.make_set("new")
        edit_cell(new, CELL, lambda c: c["summary"].update(samples_per_s_repeats=[1e308] * 5, samples_per_s=1e308))
        proc = run_script("compare.py", base, new)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        line = next(x for x in proc.stdout.splitlines() if CELL in x and "e+30" in x)
        self.assertLess(len(line), 200, line)      # before: a ~300-digit percentage

    def test_special_or_huge_cell_files_are_refused_unread(self):
        # Issue 43 item 5: a FIFO as a cell file hung report.py; a 2 GB sparse file made
        # compare.py raise MemoryError (exit 1, which a CI gate reads as "regression").
        results = self.make_set("s")
        path = cell_path(results, CELL)
        os.unlink(path)
        os.mkfifo(path)
        self.assert_both_refuse(results, path, "not a regular file")
        os.unlink(path)
        with open(path, "wb") as f:
            f.truncate(2 << 30)   # sparse: no disk used
        self.assert_both_refuse(results, path, "more than a result file holds")
        os.unlink(path)
        os.mkdir(path)
        self.assert_both_refuse(results, path, "not a regular file")

    def test_two_baselines_are_refused(self):
        # Issue 43 item 18: every speed-up is against one baseline; a second one was read silently.
        results = self.make_set("s")
        path = edit_cell(results, CELL, set_field("is_baseline", True))
        self.assert_both_refuse(results, path, "a second baseline", "one baseline")

    def test_cell_of_another_run_or_experiment(self):
        a, b = self.make_set("a"), self.make_set("b", run=1)   # another run of the same experiment
        with open(os.path.join(b, "manifest.json"), encoding="utf-8") as f:
            other_run_id = json.load(f)["run_id"]
        target = cell_path(a, CELL)
        with open(cell_path(b, CELL), encoding="utf-8") as f:
            stranger = f.read()
        with open(target, "w", encoding="utf-8") as f:
            f.write(stranger)
        self.assert_both_refuse(a, target, "a cell of another run", other_run_id)
        with open(os.path.join(a, "manifest.json"), encoding="utf-8") as f:
            run_id = json.load(f)["run_id"]
        edit_json(target, lambda c: c.update(run_id=run_id, experiment="tinyb"))
        self.assert_both_refuse(a, target, "a cell of another experiment", "'tinyb'")

    def test_markdown_escapes_names_and_cell_ids(self):
        results = self.make_set("s")
        name = "a|b<script>x</script>"
        odd = "precision=fp32,fusion=on|<i>x"
        edit_manifest(results, lambda m: m.update(experiment=name))
        for path in os.listdir(os.path.join(results, "cells")):
            edit_json(os.path.join(results, "cells", path), lambda c: c.update(experiment=name))

        def rename(m):
            m["cells"] = [odd if c == CELL else c for c in m["cells"]]
            m["cell_config_hashes"][odd] = m["cell_config_hashes"].pop(CELL)
            m["order"]["rounds"] = [[odd if c == CELL else c for c in r] for r in m["order"]["rounds"]]
        edit_manifest(results, rename)
        edit_cell(results, CELL, lambda c: c.update(cell_id=odd))
        out = os.path.join(self.tmp, "report")
        proc = run_script("report.py", results, "--out", out)
        self.assertExit(proc, 0)
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("# mpbench report: a\\|b&lt;script&gt;x&lt;/script&gt;", md)
        self.assertNotIn("<script>", md)
        self.assertNotIn("<i>", md)
        self.assertIn("fusion=on\\|&lt;i&gt;x", md)
        lines = md.splitlines()
        rows = [i for i, x in enumerate(lines) if "&lt;i&gt;x" in x and x.startswith("|")]
        self.assertTrue(rows)
        for i in rows:                         # each table row naming the cell keeps its table's columns
            top = i
            while top > 0 and lines[top - 1].startswith("|"):
                top -= 1
            self.assertEqual(lines[i].replace("\\|", "").count("|"), lines[top].count("|"), lines[i])


class MarkdownLinks(unittest.TestCase):
    def test_names_cannot_make_links_or_remote_images(self):
        # Issue 43 item 8: report.md kept "[](", so a name became a live link or a remote image.
        from mpbench.report.pages import md_escape
        for name in ("[x](javascript:alert(2))", "![](http://host/px)", "[a][ref]", "[a]: http://host"):
            escaped = md_escape(name)
            for live in ("](", "][", "]:"):
                self.assertNotIn(live, escaped.replace("\\]", ""), escaped)
        self.assertEqual(md_escape("1.52× [1.48–1.57]"), "1.52× [1.48–1.57]")   # an interval stays as it reads


class FuzzerSmoke(TempDirTest):
    def test_a_few_seconds_without_findings(self):
        self.assertEqual(fuzz_results.main(["--seconds", "8", "--seed", "3", "--keep", self.tmp]), 0)


if __name__ == "__main__":
    unittest.main()
