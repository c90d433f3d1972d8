"""A result set as pandas DataFrames, and a long-form export dashboards read.

    from mpbench.results.frames import load, curves
    cells = load("results/quickstart")        # one row per cell: summary.csv + machine columns
    steps = curves("results/quickstart")      # long form: cell_id, repeat, seed, step, metric, value

    python3 -m mpbench.results.frames RESULTS_DIR --export scalars.csv   (or .jsonl)

Why: summary.csv had no device, GPU, run id or commit column, so combining machines needed a
join against manifest.json, and the curves lived only inside cells/*.json (issue 41). load()
adds those columns from the manifest (the same on every row of one set, so sets of several
machines concatenate with pd.concat); curves() flattens every per-step series of every repeat.
The export is long-form CSV or JSON Lines (one scalar a line: cell, repeat, seed, step,
metric, value, and the machine columns) because every dashboard and notebook reads it (pandas,
Grafana's CSV/JSON sources, W&B tables, spreadsheets) with no extra dependency; a TensorBoard
writer would need tensorboard itself, not available from Debian here. Loading goes through
load_results, so a bad set raises ResultsError naming the file, as everywhere else.
"""

import argparse
import csv
import io
import json
import os
import sys

from mpbench import output as mo
from mpbench.results.load import ResultsError, load_results
from mpbench.results.resultset import machine_identity
from mpbench.results.values import finite

MACHINE_COLUMNS = ("experiment", "run_id", "device_kind", "device", "gpu", "commit")


def machine_columns(rs):
    """{column: value} naming the set's run and machine (docs/RESULTS.md, "Loading into pandas")."""
    kind, name, gpu = machine_identity(rs.manifest)
    git = rs.manifest.get("git") if isinstance(rs.manifest.get("git"), dict) else {}
    commit = git.get("commit") or rs.manifest.get("git_commit") or ""
    return dict(zip(MACHINE_COLUMNS, (rs.experiment, str(rs.manifest.get("run_id") or ""), kind, name, gpu,
                                      str(commit))))


def load(path):
    """One row per cell of the set at `path`: summary.csv's columns (the runner's, in its order),
    cells in run order, then MACHINE_COLUMNS. Needs pandas."""
    import pandas as pd
    rs = load_results(path)
    frame = pd.read_csv(os.path.join(rs.path, "summary.csv"), dtype={"cell_id": str})
    order = {c.cell_id: i for i, c in enumerate(rs.cells)}
    frame = frame[frame["cell_id"].isin(order)].copy()
    frame = frame.sort_values("cell_id", key=lambda ids: ids.map(order)).reset_index(drop=True)
    for column, value in machine_columns(rs).items():
        frame[column] = value
    return frame


def scalar_rows(rs):
    """Every finite value of every per-step numeric series of every repeat, as dicts in long form."""
    machine = machine_columns(rs)
    for cell in rs.cells:
        for repeat in cell.repeats:
            for metric, values in repeat.items():
                if not isinstance(values, list) or not values or not all(
                        v is None or isinstance(v, (int, float)) for v in values):
                    continue
                for step, value in enumerate(values):
                    if value is not None and finite(float(value)):
                        yield dict(cell_id=cell.cell_id, repeat=repeat.get("repeat"), seed=repeat.get("seed"),
                                   step=step, metric=metric, value=float(value), **machine)


def curves(path):
    """The long-form DataFrame of scalar_rows (cell_id, repeat, seed, step, metric, value, machine)."""
    import pandas as pd
    return pd.DataFrame(list(scalar_rows(load_results(path))))


EXPORT_COLUMNS = ["cell_id", "repeat", "seed", "step", "metric", "value", *MACHINE_COLUMNS]


def export_text(rs, fmt):
    """The export as text: "csv" (a header, then one row a scalar) or "jsonl" (one object a line)."""
    out = io.StringIO()
    if fmt == "csv":
        writer = csv.DictWriter(out, EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(scalar_rows(rs))
    else:
        for row in scalar_rows(rs):
            out.write(json.dumps(row) + "\n")
    return out.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m mpbench.results.frames",
                                     description="Export a result set's per-step scalars in long form.")
    parser.add_argument("results_dir")
    parser.add_argument("--export", required=True, help="output file: .csv or .jsonl (format from the suffix)")
    args = parser.parse_args(argv)
    fmt = "jsonl" if args.export.endswith((".jsonl", ".json")) else "csv" if args.export.endswith(".csv") else None
    if fmt is None:
        parser.error(f"--export {args.export!r}: name a .csv or .jsonl file")
    mo.exit_if_unwritable("--export", args.export)
    try:
        rs = load_results(args.results_dir)
    except ResultsError as e:
        print(f"frames: error: {e}", file=sys.stderr)
        return 2
    mo.write_output(args.export, export_text(rs, fmt).encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
