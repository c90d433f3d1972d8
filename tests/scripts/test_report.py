#!/usr/bin/python3
"""Tests of scripts/report.py: every figure, the self-contained HTML and the Markdown.

Result sets the runner made (script_test_helpers.make_set) cover the full
feature set (numerics, loss scale, checkpointing), a minimal run (optional data absent: those plots must be
skipped with a note, not crash), a damaged-but-valid run (nulls, missing
optional fields, no baseline, interrupted), a BERT cell beside MLP cells
(no speed-up across models, its own convergence panels), cells that differ
only in a loss_scale sub-field (distinct labels), the fields of issue 8
(speed-up intervals and verdicts, noise, run order) and an older set
without them.
"""

import html
import json
import math
import os
import re
import subprocess
import tempfile
import unittest

import matplotlib

matplotlib.use("Agg")

from script_test_helpers import (SOURCE_DIR, TempDirTest, all_cell_ids, edit_cell, edit_manifest,  # noqa: E402
                                 fixtures, run_script)

from mpbench import fixture_edits  # noqa: E402  (scripts/ is on sys.path via the helpers)
from mpbench import results as mr  # noqa: E402
from mpbench.report import labels as report_labels  # noqa: E402
from mpbench.report import plots as report_plots  # noqa: E402

# eval_loss_diff.png: the runner judges every cell's convergence against the baseline's (summary.convergence).
ALL_PLOTS = {"speedup.png", "memory.png", "convergence.png", "eval_loss_diff.png", "loss_scale.png",
             "grad_hist.png", "checkpointing.png"}
ALWAYS_PLOTS = {"speedup.png", "memory.png", "convergence.png", "eval_loss_diff.png"}
ONE_CELL_PLOTS = ALWAYS_PLOTS - {"eval_loss_diff.png"}   # no cell to judge against the baseline


class ReportOutputs(TempDirTest):

    def run_report(self, results, out=None):
        args = [results] + (["--out", out] if out else [])
        proc = run_script("report.py", *args)
        self.assertExit(proc, 0)
        return out or os.path.join(results, "report")

    def pngs(self, out):
        return {f for f in os.listdir(out) if f.endswith(".png")}

    def check_self_contained(self, out, results):
        """index.html embeds every PNG and names every cell; report.md references every PNG."""
        pngs = self.pngs(out)
        with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertEqual(page.count("data:image/png;base64,"), len(pngs))
        self.assertNotRegex(page, r'<img[^>]+src="(?!data:)')           # nothing fetched from disk
        for cid in all_cell_ids(results):
            if os.path.exists(os.path.join(results, "cells", cid.replace(",", "__") + ".json")):
                self.assertIn(html.escape(cid), page)
        self.assertIn("data-images-loaded", page)
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            md = f.read()
        for png in pngs:
            self.assertIn(f"]({png})", md)
        return page, md

    def test_full_set(self):
        results = self.make_set("full", include=fixtures.DEFAULT_INCLUDE + fixtures.CHECKPOINT_INCLUDE)
        out = self.run_report(results)
        self.assertEqual(self.pngs(out), ALL_PLOTS)
        for png in ALL_PLOTS:
            with open(os.path.join(out, png), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", png)
        page, md = self.check_self_contained(out, results)
        for cid in all_cell_ids(results):
            self.assertIn(cid, md)
        # machine, versions, emulation note, table columns
        self.assertIn(fixtures.CPU_NAME, page)
        with open(os.path.join(results, "manifest.json"), encoding="utf-8") as f:
            self.assertIn(f"onednn {json.load(f)['libraries']['onednn']}", page)
        self.assertIn("amp_fp16 is emulated on this device", page)
        for column in ("samples/s", "speedup", "step ms median", "p10", "p90", "GFLOP/s", "% of ceiling",
                       "peak memory", "final loss", "eval loss", "eval acc", "skipped steps"):
            self.assertIn(f"<th>{html.escape(column)}</th>", page)
        # speed-ups with the runner's interval; the baseline has none
        self.assertRegex(page, r"<td class=num>1\.\d\d× \[1\.\d\d–1\.\d\d\]</td>")
        self.assertIn("<td class=num>1.00×</td>", page)
        # the time estimate beside the measured time, per cell
        self.assertIn("<h2>Estimated vs measured time</h2>", page)
        self.assertIn("## Estimated vs measured time", md)
        self.assertIn("40% of the GEMM ceiling", md)
        section = md.split("## Estimated vs measured time")[1].split("\n\n")[1]
        self.assertEqual(len(section.splitlines()), 2 + len(all_cell_ids(results)))  # header, rule, a row per cell
        self.assertRegex(section, r"\| \d+\.\d\d× \|")

    def test_results_without_estimates_have_no_estimate_section(self):
        """Result sets from before the estimate (issue 16) still report, without the section."""
        results = self.make_set("old", numerics=False, include=[])
        for cid in all_cell_ids(results):
            edit_cell(results, cid, lambda c: [c["summary"].pop(k) for k in ("estimated_time", "measured_time_s")])
        out = self.run_report(results)
        page, md = self.check_self_contained(out, results)
        self.assertNotIn("Estimated vs measured", page + md)

    def test_out_option_and_gpu_machine(self):
        results = self.make_set("gpu", machine="h100", numerics=False, include=[])
        out = self.run_report(results, os.path.join(self.tmp, "elsewhere", "r"))
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)
        page, _ = self.check_self_contained(out, results)
        self.assertIn("NVIDIA H100 80GB HBM3", page)
        self.assertNotIn("emulated on this device (", page)

    def test_minimal_set_skips_optional_plots_with_notes(self):
        results = self.make_set("minimal", numerics=False, include=[], repeats=1)
        out = self.run_report(results)
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)
        page, md = self.check_self_contained(out, results)
        for reason in ("no repeat recorded numerics", "checkpointing axis does not vary",
                       "every cell uses loss_scale none"):
            self.assertIn(reason, page)
            self.assertIn(reason, md)

    def test_single_cell_run_without_matrix(self):
        """CONFIG.md: no matrix means one cell with id "base" and no axes."""
        results = self.make_set("one", matrix={}, include=[], baseline={}, numerics=False)
        out = self.run_report(results)
        self.assertEqual(self.pngs(out), ONE_CELL_PLOTS)
        page, _ = self.check_self_contained(out, results)
        self.assertIn(">base (baseline)<", page)

    def test_canonical_loss_scale_id_counts_as_a_loss_scale(self):
        """An axis value like "dynamic{init:1024}" is a dynamic loss scale: the loss-scale plot appears."""
        results = self.make_set("ls", numerics=False,
                                include=[{"precision": "amp_fp16", "loss_scale": {"mode": "dynamic", "init": 1024}}])
        out = self.run_report(results)
        self.assertIn("loss_scale.png", self.pngs(out))

    def test_stale_figures_from_an_older_report_are_removed(self):
        out = self.run_report(self.make_set("full"), os.path.join(self.tmp, "report"))
        self.assertIn("grad_hist.png", self.pngs(out))
        self.run_report(self.make_set("minimal", numerics=False, include=[], repeats=1), out)
        self.assertEqual(self.pngs(out), ALWAYS_PLOTS)

    def test_damaged_but_valid_set(self):
        """Nulls, missing optional fields, no baseline, an interrupted run: report, don't crash."""
        results = self.make_set("damaged")
        ids = all_cell_ids(results)

        def strip(d):
            d["is_baseline"] = False
            d["summary"]["speedup"] = None
            d["summary"]["ceiling_fraction"] = None
            d["summary"].pop("eval_accuracy")
            for r in d["repeats"]:
                r["loss"][10:13] = [None, None, None]                    # diverged steps
                r.pop("wall_time_s")
                r.pop("numerics", None)
        for cid in ids:
            edit_cell(results, cid, strip)
        edit_cell(results, ids[1], lambda d: d["summary"].pop("peak_memory_bytes"))
        # (A cell with no repeats is an input error now, issue 43 item 18: test_results_schema.py.)
        os.remove(os.path.join(results, "cells", ids[-1].replace(",", "__") + ".json"))
        edit_manifest(results, lambda m: m.update(finished=None))
        out = self.run_report(results)
        page, _ = self.check_self_contained(out, results)
        self.assertIn("results are partial", page)
        self.assertIn("1 planned cell(s) have no results", page)
        self.assertIn("No baseline cell", page)
        self.assertNotIn("speedup.png", self.pngs(out))

    def test_bad_input_exits_2_naming_the_file(self):
        results = self.make_set("bad")
        path = os.path.join(results, "cells", "precision=fp32__fusion=on.json")
        with open(path, "w") as f:
            f.write("not json")
        proc = run_script("report.py", results)
        self.assertExit(proc, 2)
        self.assertIn(path, proc.stderr)
        missing = os.path.join(self.tmp, "missing")
        proc = run_script("report.py", missing)
        self.assertExit(proc, 2)
        self.assertIn(missing, proc.stderr)

    def test_hidden_tf32_warning_is_a_note(self):
        results = self.make_set("tf32")
        cell_id = all_cell_ids(results)[0]
        warning = "an fp32 cell ran at 40.0 TFLOP/s on A100, whose fp32 peak is 19.5: its GEMMs are not fp32"
        edit_cell(results, cell_id, lambda c: c["summary"].update(utilization={"warning": warning}))
        proc = run_script("report.py", results)
        self.assertExit(proc, 0)
        with open(os.path.join(results, "report", "report.md"), encoding="utf-8") as f:
            self.assertIn(warning, f.read())

    def test_throttled_cells_are_a_note(self):
        results = self.make_set("thr")
        cell_id = all_cell_ids(results)[1]
        edit_cell(results, cell_id, lambda c: c["summary"].update(throttled=True, throttle_reasons=["sw_power_cap"]))
        proc = run_script("report.py", results)
        self.assertExit(proc, 0)
        with open(os.path.join(results, "report", "report.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("throttled its clocks during 1 cell(s)", md)
        self.assertIn(f"{cell_id} (sw_power_cap)", md)

    def test_cell_with_another_config_hash_than_the_manifest_is_refused(self):
        # Issue 13 D4(b): steps 10 -> 12, an interrupted resume: one cell ran
        # with the old config. The set must not be shown as one experiment.
        results = self.make_set("mixed")
        cell_id = all_cell_ids(results)[1]
        path = edit_cell(results, cell_id, lambda c: c.update(config_hash="0123456789abcdef"))
        proc = run_script("report.py", results)
        self.assertExit(proc, 2)
        self.assertIn(path, proc.stderr)
        self.assertIn("differs from the manifest", proc.stderr)


BERT_ID = fixtures.cell_id(fixtures.BERT_INCLUDE)


def read_outputs(out):
    with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
        page = f.read()
    with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
        md = f.read()
    return page, md


def md_table_after(md, marker):
    """The first Markdown table after the line `marker`, as a list of {column: text} rows."""
    lines = md.splitlines()
    i = lines.index(marker) + 1
    while not lines[i].startswith("| "):
        i += 1
    header = [h.strip() for h in lines[i].strip("|").split(" | ")]
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("| "):
            break
        rows.append(dict(zip(header, (c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]))))
    return rows


def html_table_after(page, marker):
    """The first HTML table after `marker`, as a list of {column: text} rows."""
    table = page[page.index(marker):]
    table = table[table.index("<table>"):table.index("</table>")]
    header = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        cells = [html.unescape(re.sub(r"<wbr>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if cells:
            rows.append(dict(zip(header, cells)))
    return rows


def legend_texts(ax):
    """An axes' legend labels."""
    _, labels = ax.get_legend_handles_labels()
    return labels


def panel_name(ax):
    """A panel title's cell name: the text before " — " and the first line break."""
    return ax.get_title().split("\n")[0].split(" — ")[0]


class ReportDefects(TempDirTest):
    """Issue 8, section 4: defects seen in a real quickstart report."""

    def bert_set(self, name, **kwargs):
        """MLP cells (the default matrix) plus a BERT cell: another model than the baseline's."""
        kwargs.setdefault("numerics", False)
        return self.make_set(name, include=fixtures.DEFAULT_INCLUDE + [fixtures.BERT_INCLUDE], **kwargs)

    def run_report(self, results):
        proc = run_script("report.py", results)
        self.assertExit(proc, 0)
        return os.path.join(results, "report")

    def test_zero_share_is_not_called_underflow(self):
        """Issue 41: a bf16 panel read "underflow 33.14%"; the runner's grads.underflow_fraction counts
        every gradient exactly 0 as stored (0 by construction too), so the title says exact zeros."""
        path = self.make_set("zeros")
        cid = "precision=amp_bf16,fusion=on"

        def plant(cell):
            for repeat in cell["repeats"]:
                for sample in repeat["numerics"]["samples"]:
                    sample["grads"]["underflow_fraction"] = 0.3314
        edit_cell(path, cid, plant)
        rs = mr.load_results(path)
        fig = report_plots.plot_grad_histograms(rs)
        name = report_labels.plot_names(rs)[cid]
        title = next(ax.get_title() for ax in fig.axes if panel_name(ax) == name)
        self.assertIn("exact zeros 33.14% at step", title)
        self.assertNotIn("underflow", title)

    def test_other_model_has_no_speedup(self):
        """Defect 1: no speed-up for the BERT cell in report.md, index.html or speedup.png, whether its
        summary.speedup is null (the runner), a number (a cross-model ratio written by mistake) or
        absent (an older set, where the report computes the ratio itself: never across models)."""
        def wrong_ratio(d):
            d["summary"]["speedup"] = 0.04

        def no_key(d):
            d["summary"].pop("speedup")
        for variant, edit in (("null", None), ("number", wrong_ratio), ("absent", no_key)):
            with self.subTest(variant):
                results = self.bert_set(f"bert-{variant}", legacy=variant == "absent")
                if edit:
                    edit_cell(results, BERT_ID, edit)
                page, md = read_outputs(self.run_report(results))
                for rows in (md_table_after(md, "## Cells"), html_table_after(page, "<h2>Cells</h2>")):
                    bert = [r for r in rows if r["cell"].startswith(BERT_ID)]
                    self.assertEqual(len(bert), 1, rows)
                    self.assertEqual(bert[0]["speedup"], "— (other model)")
                    mlp = [r for r in rows if not r["cell"].startswith(BERT_ID)]
                    self.assertTrue(all(re.match(r"\d", r["speedup"]) for r in mlp), mlp)
                self.assertIn("train another model than the baseline's (mlp) and have no speed-up", md)
                self.assertIn("is not in the figure: another model (bert) than the baseline's (mlp)", md)
                drawn = report_plots.plot_speedup(mr.load_results(results))
                self.assertNotIn(BERT_ID, drawn.key_cells)
                self.assertEqual(len(drawn.key_cells), len(all_cell_ids(results)) - 1)
                report_plots.plt.close(drawn.fig)

    def test_convergence_has_panel_rows_per_model(self):
        """Defect 2: the BERT loss (~5) never shares a panel, or a y axis, with the MLP losses (~0.4-2.8)."""
        rs = mr.load_results(self.bert_set("conv"))
        rows = report_plots.convergence_rows(rs)
        self.assertEqual([(m, p) for m, p, _ in rows],
                         [("mlp", "fp32"), ("mlp", "tf32"), ("mlp", "amp_bf16"), ("mlp", "amp_fp16"),
                          ("bert", "amp_bf16")])
        self.assertEqual([c.cell_id for c in rows[-1][2]], [BERT_ID])
        fig = report_plots.plot_convergence(rs)
        self.assertEqual(len(fig.axes), 2 * len(rows))
        bert_name = report_labels.plot_names(rs)[BERT_ID]
        bert_axes, mlp_axes = [], []
        for ax in fig.axes:
            _, labels = ax.get_legend_handles_labels()
            named = set(labels)
            self.assertFalse(bert_name in named and len(named) > 1, f"{ax.get_title()}: {labels}")
            (bert_axes if bert_name in named else mlp_axes).append(ax)
        self.assertEqual(len(bert_axes), 2)
        self.assertIn("bert", bert_axes[0].get_title())
        for ax in bert_axes:
            self.assertGreater(ax.get_ylim()[0], 3.0)                # BERT's scale, not the MLP's
            for other in mlp_axes:
                self.assertFalse(ax.get_shared_y_axes().joined(ax, other))
        for ax in mlp_axes:
            self.assertLess(ax.get_ylim()[1], 3.5)
        report_plots.plt.close(fig)

    def test_bars_are_named_by_their_settings(self):
        """Issue 41: bars were named by key letters a reader had to look up in a key table under each
        figure. Each bar is named by the cell's name (its settings, one a line), unique and the same
        as the cell's name in every other figure; no figure has a key table."""
        results = self.bert_set("keys")
        rs = mr.load_results(results)
        names, stacked = report_labels.plot_names(rs), report_labels.plot_names(rs, stacked=True)
        self.assertEqual(len(set(names.values())), len(rs.cells))
        for cid, name in names.items():
            self.assertEqual(stacked[cid].replace("\n", " "), name.replace(", ", " "))
            self.assertNotRegex(name, r"^[A-Z]{1,2}$")
        self.assertIn("bert", names[BERT_ID])
        for fn in (report_plots.plot_speedup, report_plots.plot_memory):
            drawn = fn(rs)
            ticks = [t.get_text() for t in drawn.fig.axes[0].get_xticklabels()]
            self.assertEqual(ticks, [stacked[cid] for cid in drawn.key_cells])
            self.assertIn(rs.by_id[drawn.key_cells[-1]].setting("precision"), ticks[-1])
            report_plots.plt.close(drawn.fig)
        page, md = read_outputs(self.run_report(results))
        self.assertNotIn("Cell key for", md)
        self.assertNotIn("Cell key for", page)
        # the Cells table keeps a key per row, as its legend spells out
        keys = report_labels.cell_keys(rs)
        self.assertEqual({r["cell"].split(" (")[0]: r["key"] for r in md_table_after(md, "## Cells")}, keys)

    def test_cells_table_wraps_ids_between_settings_and_has_a_key_legend(self):
        """Issue 32: index.html's Cells table gave the cell id 'overflow-wrap: anywhere' beside no-wrap
        numbers, so on a 1400-px page the browser squeezed it to one character per line. The id column
        now breaks only between settings (after ',' and '='), with a minimum width, and a key legend
        follows the table as under the figures."""
        results = self.bert_set("wrap")
        rs = mr.load_results(results)
        keys = report_labels.cell_keys(rs)
        page, _ = read_outputs(self.run_report(results))
        cells_section = page[page.index("<h2>Cells</h2>"):]
        cells_table = cells_section[:cells_section.index("</table>")]
        id_cells = re.findall(r"<td class=id>(.*?)</td>", cells_table)
        self.assertEqual(len(id_cells), len(rs.cells))
        for markup in id_cells:
            bare = markup.replace("<wbr>", "")
            self.assertEqual(markup.count("<wbr>"), bare.count(",") + bare.count("="), markup)
        css = page[page.index("<style>"):page.index("</style>")]
        id_rule = re.search(r"td\.id \{([^}]*)\}", css).group(1)
        self.assertIn("min-width", id_rule)
        self.assertNotIn("anywhere", id_rule)
        legend = html_table_after(page, "Cell key:</p>")
        self.assertEqual({r["cell"]: r["key"] for r in legend}, keys)
        self.assertEqual([r["key"] for r in legend], [r["key"] for r in html_table_after(page, "<h2>Cells</h2>")])

    def test_labels_distinct_when_cells_differ_only_in_a_map_field(self):
        """Defect 4: "dynamic{init:1024}" and "dynamic{init:4096}" both have mode dynamic; their labels
        (loss-scale legend, convergence legend, gradient histograms) must still differ, by the sub-field."""
        small = {"precision": "amp_fp16", "fusion": "on", "loss_scale": {"mode": "dynamic", "init": 1024}}
        large = {"precision": "amp_fp16", "fusion": "on", "loss_scale": {"mode": "dynamic", "init": 4096}}
        results = self.make_set("maps", matrix={"precision": ["fp32", "amp_fp16"]}, include=[small, large])
        rs = mr.load_results(results)
        ids = ["precision=amp_fp16,fusion=on,loss_scale=dynamic{init:1024}",
               "precision=amp_fp16,fusion=on,loss_scale=dynamic{init:4096}"]
        cells = [rs.by_id[i] for i in ids]
        labels = report_labels.cell_labels(rs, cells)
        self.assertNotEqual(labels[ids[0]], labels[ids[1]])
        self.assertIn("loss_scale.init=1024", labels[ids[0]])
        self.assertIn("loss_scale.init=4096", labels[ids[1]])
        # even when the label leaves loss_scale out, the clash falls back to the sub-field
        labels = report_labels.cell_labels(rs, cells, skip=("precision", "loss_scale"))
        self.assertIn("loss_scale.init=1024", labels[ids[0]])
        self.assertIn("loss_scale.init=4096", labels[ids[1]])

        fig = report_plots.plot_loss_scale(rs)
        texts = legend_texts(fig.axes[0])
        lines = [t for t in texts if "loss_scale.init=" in t]
        self.assertEqual(len(lines), 2, texts)
        self.assertEqual(len(set(lines)), 2, texts)
        report_plots.plt.close(fig)
        fig = report_plots.plot_convergence(rs)
        fp16 = next(ax for ax in fig.axes if ax.get_title().startswith("amp_fp16: loss vs step"))
        texts = legend_texts(fp16)
        self.assertEqual(len(texts), len(set(texts)), texts)
        self.assertTrue(any("init=1024" in t for t in texts) and any("init=4096" in t for t in texts), texts)
        report_plots.plt.close(fig)
        fig = report_plots.plot_grad_histograms(rs)
        titles = [panel_name(ax) for ax in fig.axes if ax.get_visible()]
        self.assertEqual(len(titles), len(set(titles)), titles)
        report_plots.plt.close(fig)

    def test_labels_with_a_sub_field_axis(self):
        """An axis on one field of a map ("loss_scale.growth_interval") labels by that field."""
        include = [{"precision": "amp_fp16", "loss_scale": "dynamic", "loss_scale.growth_interval": str(n)}
                   for n in (100, 400)]
        rs = mr.load_results(self.make_set("sub", matrix={"precision": ["fp32"]}, include=include))
        cells = [rs.by_id[fixtures.cell_id(a)] for a in include]
        labels = report_labels.cell_labels(rs, cells)
        self.assertIn("loss_scale.growth_interval=100", labels[cells[0].cell_id])
        self.assertIn("loss_scale.growth_interval=400", labels[cells[1].cell_id])


class ReportNewFields(TempDirTest):
    """Issue 8, section 3: speed-up intervals and verdicts, step noise, machine load, run order."""

    def run_report(self, results):
        proc = run_script("report.py", results)
        self.assertExit(proc, 0)
        return read_outputs(os.path.join(results, "report"))

    def test_speedup_interval_and_verdict(self):
        results = self.make_set("iv")
        # Which verdicts a tiny run on busy shared cores reaches is chance: pin one interval of each kind.
        def pin(speedup, lo, hi, verdict):
            return lambda c: (c["summary"]["speedup_interval"].update(lo=lo, hi=hi),
                              c["summary"].update(speedup=speedup, speedup_verdict=verdict))
        edit_cell(results, "precision=tf32,fusion=off", pin(1.0, 0.99, 1.02, "no measurable difference"))
        edit_cell(results, "precision=amp_bf16,fusion=on", pin(1.3, 1.2, 1.4, "faster"))
        edit_cell(results, "precision=amp_fp16,fusion=off", pin(0.7, 0.6, 0.8, "slower"))
        rs = mr.load_results(results)
        page, md = self.run_report(results)
        verdicts = {c.cell_id: c.summary.get("speedup_verdict") for c in rs.cells}
        self.assertIn("no measurable difference", verdicts.values())
        self.assertIn("faster", verdicts.values())
        self.assertIn("slower", verdicts.values())
        for rows in (md_table_after(md, "## Cells"), html_table_after(page, "<h2>Cells</h2>")):
            for row in rows:
                cell = rs.by_id[row["cell"].split(" (")[0]]
                s = cell.summary
                if cell.is_baseline:
                    self.assertEqual(row["speedup"], "1.00×")
                    continue
                iv = s["speedup_interval"]
                expected = f"{s['speedup']:.2f}× [{iv['lo']:.2f}–{iv['hi']:.2f}]"
                if s["speedup_verdict"] == "no measurable difference":
                    expected += " no measurable difference"
                self.assertEqual(row["speedup"], expected)
        self.assertIn("95% confidence interval in square brackets", md)
        self.assertIn("Interval method: paired t over rounds", page)
        # the figure's whiskers are the intervals (the baseline has none)
        cells = [c for c in report_labels.display_order(rs)]
        ends, text = report_plots.speedup_whiskers(rs, cells, [rs.speedup(c) for c in cells],
                                             rs.baseline().summary_value("samples_per_s"))
        self.assertIn("95% confidence interval", text)
        for cell, end in zip(cells, ends):
            iv = cell.summary["speedup_interval"]
            self.assertEqual(end, None if iv is None else (iv["lo"], iv["hi"]))

    def test_single_repeat_cells_without_interval(self):
        """A runner that writes intervals writes null with too few units: say so, not a repeat range."""
        results = self.make_set("one", repeats=1, numerics=False, include=[])
        _, md = self.run_report(results)
        rows = {r["cell"].split(" (")[0]: r["speedup"] for r in md_table_after(md, "## Cells")}
        self.assertRegex(rows["precision=fp32,fusion=on"], r"^\d\.\d\d× \[")     # Welch t over blocks within the repeat
        edit_cell(results, "precision=fp32,fusion=on", lambda d: d["summary"].update(speedup_interval=None,
                                                                                        speedup_verdict=None))
        _, md = self.run_report(results)
        rows = {r["cell"].split(" (")[0]: r["speedup"] for r in md_table_after(md, "## Cells")}
        self.assertRegex(rows["precision=fp32,fusion=on"], r"^\d\.\d\d× \(no interval\)$")

    def test_noise_warnings_and_noisy_cells(self):
        noisy_id = "precision=amp_bf16,fusion=on"
        results = self.make_set("noise", numerics=False, include=[], busy_rounds={1: 0.31},
                                noisy_cells={noisy_id: 0.25})
        rs = mr.load_results(results)
        self.assertEqual([c.cell_id for c in rs.noisy_cells()], [noisy_id])     # the synthetic set's premise
        key = report_labels.cell_keys(rs)[noisy_id]
        page, md = self.run_report(results)
        for text in (md, html.unescape(page)):
            self.assertIn("Runner warning: machine busy during round 2: other processes used 31% of the CPU time",
                          text)
            self.assertIn("Busy rounds: round 2 ran repeat 2 of every cell", text)
            self.assertIn(f"Noisy: {key} ({noisy_id}): step times vary by", text)
            self.assertIn("see Noise", text)
            self.assertIn("Outlier rule: none: every post-warm-up, unprobed step is kept", text)
        for rows in (md_table_after(md, "## Cells"), html_table_after(page, "<h2>Cells</h2>")):
            row = next(r for r in rows if r["cell"].startswith(noisy_id))
            self.assertTrue(row["cell"].endswith("(noisy)"))
            self.assertRegex(row["speedup"], r"^\d\.\d\d× \[")                 # shown, not hidden
            self.assertRegex(row["step CV"], r"^\d+\.\d%$")
        self.assertIn("<h2>Noise</h2>", page)
        self.assertIn("## Noise", md)

    def test_memory_triple_columns(self):
        """The process and device-used peaks beside the allocator's (docs/RESULTS.md), where recorded."""
        gpu = self.make_set("gpu_mem", machine="h100", numerics=False, include=[])
        cpu = self.make_set("cpu_mem", numerics=False, include=[])
        old = self.make_set("old_mem", legacy=True)
        for results, present, absent in ((gpu, ["process peak", "device used peak"], []),
                                         (cpu, ["process peak"], ["device used peak"]),
                                         (old, [], ["process peak", "device used peak"])):
            page, md = self.run_report(results)
            for rows in (md_table_after(md, "## Cells"), html_table_after(page, "<h2>Cells</h2>")):
                for column in present:
                    self.assertRegex(rows[0][column], r"^\d+(\.\d+)? [KMG]i?B$", (results, column))
                for column in absent:
                    self.assertNotIn(column, rows[0], results)
        rows = md_table_after(self.run_report(cpu)[1], "## Cells")
        self.assertNotEqual(rows[0]["process peak"], rows[0]["peak memory"])   # the RSS counts the libraries too

    def test_energy_column(self):
        """samples/J beside the ceiling where some cell measured energy (runner/machine/energy_meter.h), else no column."""
        results = self.make_set("energy", machine="h100", numerics=False, include=[])
        _, md = self.run_report(results)
        self.assertNotIn("samples/J", md_table_after(md, "## Cells")[0])
        measured = all_cell_ids(results)[0]
        edit_cell(results, measured, lambda c: c["summary"].update(
            {"energy_j_per_step": 0.5, "samples_per_joule": 64.0, "energy_source": "nvml_total_energy"}))
        page, md = self.run_report(results)
        for table in (md_table_after(md, "## Cells"), html_table_after(page, "<h2>Cells</h2>")):
            by_cell = {r["cell"].split(" (")[0]: r["samples/J"] for r in table}
            self.assertEqual(by_cell[measured], "64.0", table)
            self.assertTrue(all(v == "—" for k, v in by_cell.items() if k != measured), table)

    def test_quiet_run(self):
        _, md = self.run_report(self.make_set("quiet", numerics=False, include=[]))
        self.assertIn(f"The machine was quiet in all {fixtures.DEFAULT_REPEATS} round(s).", md)
        self.assertIn("No cell's step times were flagged as noisy.", md)
        self.assertIn("(quiet).", md)

    def test_run_order_in_machine_section(self):
        _, md = self.run_report(self.make_set("inter", numerics=False, include=[]))
        self.assertIn(f"- **run order**: interleaved: {fixtures.DEFAULT_REPEATS} round(s), each running one repeat of every cell", md)
        results = self.make_set("seq", numerics=False, include=[], order="sequential", busy_rounds={2: 0.4})
        _, md = self.run_report(results)
        self.assertIn("- **run order**: sequential: every repeat of a cell back to back", md)
        third = all_cell_ids(results)[2]
        key = report_labels.cell_keys(mr.load_results(results))[third]
        self.assertIn(f"Busy rounds: while {key} ({third}) ran: all {fixtures.DEFAULT_REPEATS} of its repeats", md)

    def test_older_set_keeps_the_old_behaviour(self):
        """No intervals, noise or order (an older runner): repeat ranges, and the section says why it is empty."""
        results = self.make_set("old", legacy=True)
        page, md = self.run_report(results)
        self.assertIn("<td class=num>1.00× (", page)                     # baseline: slowest–fastest repeat
        self.assertNotIn("× [", page)
        self.assertIn("slowest–fastest repeat in round brackets", md)
        self.assertIn("Not recorded: this result set comes from a runner without noise detection.", md)
        self.assertIn("- **run order**: not recorded", md)
        self.assertNotIn("step CV", md)
        rs = mr.load_results(results)
        _, text = report_plots.speedup_whiskers(rs, rs.cells, [rs.speedup(c) for c in rs.cells],
                                          rs.baseline().summary_value("samples_per_s"))
        self.assertEqual(text, "whiskers: slowest..fastest repeat")


class ReaderNewFields(TempDirTest):
    """mpbench_results.py: the accessors the report relies on."""

    def test_map_settings(self):
        self.assertEqual(mr.parse_map_setting("dynamic{init:1024;growth_interval:100}"),
                         {"mode": "dynamic", "init": "1024", "growth_interval": "100"})
        self.assertEqual(mr.parse_map_setting({"mode": "static", "value": 1024.0}), {"mode": "static", "value": "1024"})
        self.assertEqual(mr.parse_map_setting('{"mode": "dynamic"}'), {"mode": "dynamic"})
        self.assertIsNone(mr.parse_map_setting("dynamic"))
        self.assertIsNone(mr.parse_map_setting(2.5))

    def test_speedup_never_across_models(self):
        results = self.make_set("bert", numerics=False, include=[fixtures.BERT_INCLUDE])
        edit_cell(results, BERT_ID, lambda d: d["summary"].update(speedup=0.04))
        rs = mr.load_results(results)
        bert = rs.by_id[BERT_ID]
        self.assertEqual(bert.model_kind, "bert")
        self.assertTrue(math_isnan(rs.speedup(bert)))
        self.assertIn("another model (bert)", rs.no_speedup_reason(bert))
        self.assertIsNone(mr.fp32_reference(rs, bert))            # compare.py's generations table
        fp32_on = rs.by_id["precision=fp32,fusion=on"]
        self.assertIs(mr.fp32_reference(rs, fp32_on), rs.by_id["precision=fp32,fusion=off"])

    def test_new_fields_absent_or_present(self):
        old = mr.load_results(self.make_set("old", legacy=True, numerics=False, include=[]))
        new = mr.load_results(self.make_set("new", numerics=False, include=[], busy_rounds={0: 0.5}))
        self.assertIsNone(old.run_order())
        self.assertIsNone(old.noise())
        for c in old.cells:
            self.assertIsNone(c.speedup_interval())
            self.assertIsNone(c.speedup_verdict())
            self.assertIsNone(c.noise())
            self.assertFalse(c.records_speedup_intervals())
            self.assertEqual(c.repeat_rounds(), [])
        self.assertEqual(new.run_order().mode, "interleaved")
        self.assertEqual(len(new.run_order().rounds), fixtures.DEFAULT_REPEATS)
        noise = new.noise()
        self.assertTrue(noise.busy)
        self.assertEqual([w.round for w in noise.busy_rounds()], [0])
        self.assertIn("during round 1", noise.warnings[0])
        base = new.baseline()
        self.assertEqual(base.speedup_verdict(), "baseline")
        self.assertIsNone(base.speedup_interval())
        other = new.by_id["precision=amp_bf16,fusion=on"]
        iv = other.speedup_interval()
        # The reader gives the runner's interval as written. It need not hold the point estimate:
        # that is the ratio of pooled medians, the interval a t over the rounds' log ratios, and on
        # busy cores the two parted once (0.51x outside [0.67, ...], 2026-11-29).
        self.assertGreater(iv.lo, 0)
        self.assertLess(iv.lo, iv.hi)
        self.assertEqual((iv.lo, iv.hi), (other.summary["speedup_interval"]["lo"], other.summary["speedup_interval"]["hi"]))
        self.assertEqual(iv.confidence_text(), "95%")
        self.assertEqual(other.speedup_verdict(), fixture_edits.verdict(other.summary["speedup_interval"]))
        self.assertEqual(sorted(r for _, r in other.repeat_rounds()), list(range(fixtures.DEFAULT_REPEATS)))


def fp8_numerics(real, steps, layers=3):
    """Numerics samples as an fp8 cell's runner writes them (docs/RESULTS.md), with planted scales: every 10
    steps the real run's gradient histogram of that step (`real`: the repeat's numerics) and, per linear
    layer, its input and weight (E4M3) and grad_output (E5M2) with known scales: input 2^(6+L), weight 2^12,
    grad_output 2^(20+L+step//30), so over 3 layers the grad_output median is 2^(21+step//30)."""
    grads = {s["step"]: s["grads"] for s in real["samples"]}
    samples = []
    for step in range(10, steps + 1, 10):
        tensors = []
        for layer in range(layers):
            for role, fmt, log2_scale in (("input", "e4m3", 6 + layer), ("weight", "e4m3", 12),
                                          ("grad_output", "e5m2", 20 + layer + step // 30)):
                tensors.append({"name": f"linear{layer}.{role}", "format": fmt, "scale": 2.0 ** log2_scale,
                                "amax": 448.0 / 2.0 ** log2_scale, "saturated_fraction": 0.0})
        samples.append({"step": step, "grads": grads[step],
                        "activations": {"underflow_fraction": 0.0, "overflow_fraction": 0.0}, "fp8": tensors})
    return {"sample_every": 10, "cost_fraction": 0.01, "samples": samples}


FP8_ID = "precision=fp8"


class ReportFp8(TempDirTest):
    """Issue 15: the FP8 scales per tensor on the loss-scale plot, the E5M2 range on the gradient histograms."""

    def fp8_set(self, name, include=(), scales=True):
        """fp32 (baseline), amp_bf16 and fp8, none scaling the loss, 60 steps; with `scales`, numerics sampled
        and the fp8 cell's FP8 scales planted (fp8_numerics), without it no numerics at all."""
        results = self.make_set(name, matrix={"precision": ["fp32", "amp_bf16", "fp8"]}, include=list(include),
                                repeats=2, steps=60, baseline={"precision": "fp32"}, numerics=scales)
        if scales:
            edit_cell(results, FP8_ID, lambda c: [r.update(numerics=fp8_numerics(r["numerics"], c["config"]["steps"]))
                                                  for r in c["repeats"]])
        return results

    def test_fp8_cell_sorts_in_its_place(self):
        """fp8 takes its place in the runner's precision order (after amp_fp16, before the apex levels) in
        report.md's and index.html's Cells tables, not last among unknown precisions (issue 32)."""
        results = self.make_set("order", matrix={"precision": ["O1", "fp8", "fp32", "amp_fp16", "amp_bf16"]},
                                include=[], repeats=2, baseline={"precision": "fp32"}, numerics=False)
        proc = run_script("report.py", results)
        self.assertExit(proc, 0)
        page, md = read_outputs(os.path.join(results, "report"))
        expected = ["fp32", "amp_bf16", "amp_fp16", "fp8", "O1"]
        for rows in (md_table_after(md, "## Cells"), html_table_after(page, "<h2>Cells</h2>")):
            order = [re.search(r"precision=(\w+)", r["cell"]).group(1) for r in rows]
            self.assertEqual(order, expected, rows)

    def test_fp8_scales_alone_make_the_loss_scale_plot(self):
        results = self.fp8_set("fp8")
        rs = mr.load_results(results)
        self.assertEqual(report_plots.loss_scale_cells(rs), [])           # the premise: no cell scales the loss
        self.assertEqual(rs.by_id["precision=amp_bf16"].fp8_tensors(), [])
        self.assertEqual(len(rs.by_id[FP8_ID].fp8_tensors()), 2 * 6 * 9)   # repeats x samples x tensors
        fig = report_plots.plot_loss_scale(rs)
        self.assertEqual(len(fig.axes), 1)
        ax = fig.axes[0]
        self.assertIn(f"FP8 scale per tensor, {report_labels.plot_names(rs)[FP8_ID]}", ax.get_title())
        self.assertEqual(legend_texts(ax), ["input (E4M3), 3 tensor(s)", "weight (E4M3), 3 tensor(s)",
                                            "grad_output (E5M2), 3 tensor(s)"])
        grad = next(line for line in ax.get_lines() if line.get_label().startswith("grad_output"))
        self.assertEqual(list(grad.get_xdata()), [10, 20, 30, 40, 50, 60])
        self.assertEqual(list(grad.get_ydata()), [2.0 ** (21 + s // 30) for s in range(10, 61, 10)])
        self.assertEqual(ax.get_yscale(), "log")
        report_plots.plt.close(fig)
        proc = run_script("report.py", results)
        self.assertExit(proc, 0)
        self.assertIn("loss_scale.png     written", proc.stdout)
        _, md = read_outputs(os.path.join(results, "report"))
        self.assertIn("![Loss scale](loss_scale.png)", md)
        self.assertNotIn("every cell uses loss_scale none", md)

    def test_loss_scale_and_fp8_scales_get_panels_of_their_own(self):
        results = self.fp8_set("both", include=[{"precision": "amp_fp16", "loss_scale": "dynamic"}])
        rs = mr.load_results(results)
        fig = report_plots.plot_loss_scale(rs)
        top, fp8 = fig.axes
        self.assertEqual([t for t in legend_texts(top) if "loss_scale=dynamic" in t], ["amp_fp16 loss_scale=dynamic"])
        self.assertFalse(any("E4M3" in t or "E5M2" in t for t in legend_texts(top)))
        self.assertIn("grad_output (E5M2), 3 tensor(s)", legend_texts(fp8))
        self.assertEqual(fp8.get_ylabel(), "FP8 scale (log₂ axis)")
        self.assertTrue(top.get_shared_x_axes().joined(top, fp8))
        report_plots.plt.close(fig)

    def test_skipped_without_loss_scale_or_fp8_scales(self):
        """An fp8 cell without FP8 samples (numerics off) gives the plot nothing to draw."""
        rs = mr.load_results(self.fp8_set("none", scales=False))
        with self.assertRaisesRegex(report_plots.Skip, "every cell uses loss_scale none, no optimizer step was "
                                                       "skipped and no cell recorded FP8 scales"):
            report_plots.plot_loss_scale(rs)

    def test_grad_histogram_of_an_fp8_cell_marks_the_e5m2_range(self):
        rs = mr.load_results(self.fp8_set("hist"))
        names = report_labels.plot_names(rs)
        fig = report_plots.plot_grad_histograms(rs)
        panels = {panel_name(ax): ax for ax in fig.axes if ax.get_visible()}
        fp8, bf16 = panels[names[FP8_ID]], panels[names["precision=amp_bf16"]]
        labels = [p.get_label() for p in fp8.patches]
        for zone in ("E5M2 underflow", "E5M2 subnormal", "E5M2 saturates"):
            self.assertTrue(any(label.startswith(zone) for label in labels), labels)
        self.assertFalse(any("fp16" in label for label in labels), labels)
        # zones at the last sampled step's median grad_output scale, 2^23: saturation from log2(57344) - 23
        self.assertIn("2²³", fp8.get_legend().get_title().get_text())
        self.assertIn("2²²..2²⁴", fp8.get_legend().get_title().get_text())
        saturates = next(p for p in fp8.patches if p.get_label().startswith("E5M2 saturates"))
        start = saturates.get_window_extent().transformed(fp8.transData.inverted()).x0
        self.assertAlmostEqual(start, math.log2(57344) - 23, places=6)
        underflow = next(p for p in fp8.patches if p.get_label().startswith("E5M2 underflow"))
        self.assertAlmostEqual(underflow.get_window_extent().transformed(fp8.transData.inverted()).x1, -16 - 23,
                               places=6)
        self.assertLessEqual(fp8.get_xlim()[0], -16 - 23)                   # the zone's edge is in view
        # the other cells keep the fp16 zones, explained in the figure's legend
        self.assertTrue(any(p.get_label().startswith("fp16 underflow") for p in bf16.patches))
        self.assertFalse(any(p.get_label().startswith("E5M2") for p in bf16.patches))
        self.assertIn("fp16 underflow (< 2⁻²⁴ flushes to 0)", [t.get_text() for t in fig.legends[0].get_texts()])
        report_plots.plt.close(fig)


def math_isnan(value):
    return value != value


class ReportOnRealRunner(unittest.TestCase):
    """report.py on a tiny real run; needs the runner (MPB_RUNNER) and experiments/report_smoke.yaml."""

    def test_report_on_runner_output(self):
        runner = os.environ.get("MPB_RUNNER", "")
        source = os.environ.get("MPB_SOURCE_DIR", SOURCE_DIR)
        yaml = os.path.join(source, "experiments", "report_smoke.yaml")
        if not (runner and os.path.isfile(runner) and os.access(runner, os.X_OK)):
            self.skipTest("MPB_RUNNER is not set to an executable runner")
        if not os.path.isfile(yaml):
            self.skipTest(f"{yaml} does not exist yet")
        with tempfile.TemporaryDirectory(prefix="mpb-smoke-") as tmp:
            run = subprocess.run([runner, yaml, "--out", tmp], capture_output=True, text=True, timeout=600)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            out = os.path.join(tmp, "report")
            proc = run_script("report.py", tmp, "--out", out)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            pngs = [f for f in os.listdir(out) if f.endswith(".png")]
            self.assertTrue(ALWAYS_PLOTS <= set(pngs), pngs)
            with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
                page = f.read()
            self.assertEqual(len(re.findall("data:image/png;base64,", page)), len(pngs))


if __name__ == "__main__":
    unittest.main()
