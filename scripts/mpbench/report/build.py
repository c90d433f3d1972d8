#!/usr/bin/python3
"""Turn an mpbench result directory into plots, a self-contained HTML page and Markdown.

Usage: report.py RESULTS_DIR [--out DIR]        (default DIR: RESULTS_DIR/report)

Writes DIR/*.png, DIR/index.html (images embedded as data URIs, so the one
file can be mailed or attached to a CI run) and DIR/report.md (the summary
table, images referenced by file name). A plot whose data the run did not
record (numerics, a varying checkpointing axis, a loss scale) is left out
with a note in the report instead of failing. See docs/REPORTS.md.

This file loads the run and ties the parts together; each part has one job:
report.labels (what cells are called, in which order), report.plots (the
figures), report.tables (the Cells and machine tables), report.noise (the
Notes and Noise sections) and report.pages (index.html and report.md).
"""

import argparse
import os
import sys

from mpbench import output as mo
from mpbench import results as mr
from mpbench.report.noise import report_notes
from mpbench.report.pages import write_html, write_markdown
from mpbench.report.plots import render_plots


def build_report(results_dir, out_dir=None):
    """Load, plot and write everything; returns (ResultSet, [Plot])."""
    rs = mr.load_results(results_dir)
    if not rs.cells:
        raise mr.ResultsError(os.path.join(rs.path, "cells"), "no cell results yet")
    out_dir = out_dir or os.path.join(rs.path, "report")
    os.makedirs(out_dir, exist_ok=True)
    plots = render_plots(rs, out_dir)
    notes = report_notes(rs, plots)
    write_html(rs, plots, notes, os.path.join(out_dir, "index.html"))
    write_markdown(rs, plots, notes, os.path.join(out_dir, "report.md"))
    return rs, plots, out_dir


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", help="a runner output directory (holds manifest.json and cells/)")
    parser.add_argument("--out", help="output directory (default: RESULTS_DIR/report)")
    args = parser.parse_args(argv)
    # --out before the plots are drawn: a file or a missing, unwritable root exits 2 now.
    mo.exit_if_unwritable("--out", args.out, directory=True)
    try:
        rs, plots, out_dir = build_report(args.results_dir, args.out)
    except mr.ResultsError as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"report.py: error: {where}{e.strerror}", file=sys.stderr)
        return 2
    for p in plots:
        print(f"  {p.name:<18} {'written' if p.file else 'skipped: ' + p.skipped}")
    print(f"report: {os.path.join(out_dir, 'index.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
