#!/usr/bin/python3
"""A/B regression gate between two runner builds on one machine, in one session.

    scripts/ab_compare.py FILE --base OLD/runner --new NEW/runner [--rounds 6] [--strict]

Why (docs/REPORTS.md, "A/B: two builds alternately"): on a shared machine the
speed drifts by 20-40% between runs made minutes apart, so a result set
recorded earlier cannot gate a 5% change. Here the two builds run each cell
alternately, round after round (base, new, new, base, ...: ABBA), so the
drift of the machine falls on both sides, and each round gives one paired
ratio per cell. The gate is a one-sample Student t on those log ratios,
Holm-adjusted over cells, judged only beyond --threshold (as compare.py
judges throughput; compare.py's rules for suspect/--strict apply).

Each run is `RUNNER FILE --filter CELL --out DIR/SIDE/rNN --quiet`, plus
--device and the side's --base-arg/--new-arg values; its sample is the
cell's median step time (summary.step_time_ms.median over its repeats).
Exit 0: no regression; 1: a regression (or a suspect one under --strict);
2: bad arguments, or a run that failed (its output is shown).
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from mpbench.compare.gate import direction, holm_adjust, parse_alpha, parse_fraction
from mpbench.results.load import ResultsError, load_results
from mpbench.stats import paired_ratio_test
from mpbench import output as mo

MIN_ROUNDS_TO_TEST = 3   # a t over 2 paired ratios has 1 degree of freedom: nothing is significant


# A row of the runner's --dry-run listing (runner/commands/experiment_setup.cpp,
# print_cells_with_cost: "  %3zu  %6s  %9s  %s"): number, h:mm, seconds, then the cell id
# to the end of the line or to a "  (" note. The id is taken whole: it may hold spaces
# (a data.path value), which splitting on whitespace cut.
DRY_RUN_ROW = re.compile(r"^  +(\d+)  (.{6})  (.{9})  (?P<rest>.+)$")


def cell_ids(runner, path, device, filter_expr):
    """The cells the experiment runs, in order, from the runner's --dry-run listing."""
    cmd = [runner, path, "--dry-run", "--device", device] + (["--filter", filter_expr] if filter_expr else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    ids = []
    for line in proc.stdout.splitlines():
        row = DRY_RUN_ROW.match(line)
        if row:
            ids.append(row.group("rest").split("  (")[0])
    return ids


def run_cell(runner, path, cell, out, device, extra):
    """One run of one cell; returns its cell record (results.load.Cell)."""
    cmd = [runner, path, "--filter", cell, "--out", out, "--device", device, "--quiet", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    rs = load_results(os.path.join(out, os.listdir(out)[0]))
    # A filter selects every cell that has the keys it names, so more may have run.
    return next(c for c in rs.cells if c.cell_id == cell)


def median_step_ms(cell):
    return float(cell.data["summary"]["step_time_ms"]["median"])


def paired_test(base_ms, new_ms):
    """Throughput ratio new/base (geometric mean over rounds), its 95% interval and
    the two-sided p of a one-sample t on the paired log ratios (NaN with < 3 rounds)."""
    # Throughput is batch / step time, so new/base throughput is base_ms/new_ms: the ratio of
    # the pairs (new_ms, base_ms) taken in that order.
    return paired_ratio_test(new_ms, base_ms, confidence=0.95, min_pairs=MIN_ROUNDS_TO_TEST)


def judge(results, threshold, alpha):
    """Verdicts as compare.py gives them for throughput: beyond the threshold and
    significant after Holm's adjustment over cells; beyond it untestably: suspect."""
    for r, p in zip(results, holm_adjust([r["p_raw"] for r in results])):
        r["p"] = p
        moved = direction(r["throughput_ratio"], threshold, higher_is_better=True)
        if moved and not math.isfinite(p):
            r["verdict"] = "suspect" if moved == "worse" else "same"
        elif moved and p < alpha:
            r["verdict"] = "regressed" if moved == "worse" else "improved"
        else:
            r["verdict"] = "same"


def run_rounds(args, cells, out):
    """Runs every cell `args.rounds` times on each side, ABBA; returns {cell: {side: [ms]}}."""
    samples = {c: {"base": [], "new": [], "config_hash": {}} for c in cells}
    sides = {"base": (args.base, args.base_arg), "new": (args.new, args.new_arg)}
    for k in range(args.rounds):
        order = ("base", "new") if k % 2 == 0 else ("new", "base")
        for i, cell in enumerate(cells):
            for side in order:
                runner, extra = sides[side]
                rec = run_cell(runner, args.file, cell, os.path.join(out, side, f"r{k + 1:02d}_c{i + 1:02d}"),
                               args.device, extra)
                samples[cell][side].append(median_step_ms(rec))
                samples[cell]["config_hash"][side] = rec.config_hash
        if not args.quiet:
            print(f"round {k + 1}/{args.rounds} done", file=sys.stderr)
    return samples


def summarize(samples, args):
    results = []
    for cell, s in samples.items():
        ratio, (lo, hi), p = paired_test(s["base"], s["new"])
        results.append({"cell_id": cell, "base_step_ms": s["base"], "new_step_ms": s["new"],
                        "throughput_ratio": ratio, "interval95": [lo, hi], "p_raw": p,
                        "same_config": s["config_hash"].get("base") == s["config_hash"].get("new")})
    judge(results, args.threshold, args.alpha)
    return results


def print_table(results, args):
    print(f"A/B: {args.rounds} rounds per cell, ABBA; base {args.base}, new {args.new}; "
          f"threshold {100 * args.threshold:g}%, alpha {args.alpha:g} (Holm over {len(results)} cells)")
    for r in results:
        lo, hi = r["interval95"]
        interval = f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else "[untestable: < 3 rounds]"
        word = r["verdict"].upper() if r["verdict"] in ("regressed", "suspect") else r["verdict"]
        print(f"{word}: {r['cell_id']} throughput x{r['throughput_ratio']:.3f} {interval} p={r['p']:.3g} "
              f"(median step {np.median(r['base_step_ms']):.3f} -> {np.median(r['new_step_ms']):.3f} ms)")
        if not r["same_config"]:
            print(f"  note: the two builds resolve {r['cell_id']} to different configurations "
                  "(config_hash differs): a change of defaults, not only of speed")
    if any("--inject" in a for a in args.base_arg + args.new_arg):
        print("note: a side ran with a TESTING ONLY --inject-* option: a planted change, not a real result")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="experiment YAML")
    p.add_argument("--base", required=True, help="the reference build's runner binary")
    p.add_argument("--new", required=True, help="the runner binary under test")
    p.add_argument("--rounds", type=int, default=6, help="paired runs per cell (default 6; at least 3 to test)")
    p.add_argument("--threshold", type=parse_fraction, default=0.05, help="smallest change that counts (5%%)")
    p.add_argument("--alpha", type=parse_alpha, default=0.05, help="significance after Holm (0.05)")
    p.add_argument("--strict", action="store_true", help="exit 1 on a suspect cell too")
    p.add_argument("--filter", default="", help="only cells matching this runner --filter expression")
    p.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"])
    p.add_argument("--base-arg", action="append", default=[], metavar="ARG", help="extra runner argument for the base side (write --base-arg=--flag)")
    p.add_argument("--new-arg", action="append", default=[], metavar="ARG", help="extra runner argument for the new side (write --new-arg=--flag)")
    p.add_argument("--out", help="keep every run's results here, a new or empty directory: a used one is refused "
                   "(default: a temporary directory, removed)")
    p.add_argument("--json", help="write the per-round samples and verdicts to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    for role in ("base", "new"):
        if not (os.path.isfile(getattr(args, role)) and os.access(getattr(args, role), os.X_OK)):
            print(f"error: --{role} {getattr(args, role)}: not an executable file", file=sys.stderr)
            return 2
    # Output paths before the rounds run: a refusal costs a second, not the runs.
    mo.exit_if_unwritable("--json", args.json)
    mo.exit_if_unwritable("--out", args.out, directory=True)
    if args.out and os.path.isdir(args.out) and os.listdir(args.out):
        # The runs of an earlier comparison live there (DIR/base/rNN, DIR/new/rNN);
        # the runner would --out over them round by round, mixing two comparisons.
        print(f"error: --out {args.out}: the directory is not empty (an earlier comparison's rounds?); "
              "give a new directory, or remove this one to start over", file=sys.stderr)
        return 2
    try:
        cells = cell_ids(args.base, args.file, args.device, args.filter)
        if not cells:
            print(f"error: {args.file}: no cell matches --filter {args.filter!r}", file=sys.stderr)
            return 2
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            samples = run_rounds(args, cells, args.out)
        else:
            with tempfile.TemporaryDirectory(prefix="mpb_ab_") as tmp:
                samples = run_rounds(args, cells, tmp)
    except (RuntimeError, ResultsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    results = summarize(samples, args)
    print_table(results, args)
    if args.json:
        mo.write_output(args.json, json.dumps(
            {"schema": "mpbench.ab_compare/1", "rounds": args.rounds, "threshold": args.threshold,
             "alpha": args.alpha, "base": args.base, "new": args.new, "base_args": args.base_arg,
             "new_args": args.new_arg, "cells": results}, indent=1, allow_nan=True))
    verdicts = {r["verdict"] for r in results}
    return 1 if "regressed" in verdicts or (args.strict and "suspect" in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
