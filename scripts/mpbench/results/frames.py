"""A result set as pandas DataFrames, and a long-form export dashboards read.

    from mpbench.results.frames import load, curves
    cells = load("results/quickstart")        # one row per cell: summary.csv, plus the experiment
    steps = curves("results/quickstart")      # long form: cell_id, repeat, seed, step, metric, value

    python3 -m mpbench.results.frames RESULTS_DIR --export scalars.csv   (or .jsonl)

Why: combining machines must not need a join against manifest.json, and the curves lived only
inside cells/*.json (issue 41). summary.csv carries each cell's device, device name, run id and
commit (the runner writes them); load() adds the experiment, and fills those columns from the
cell files and the manifest for a set of an older runner, so sets of several machines
concatenate with pd.concat. curves() flattens every per-step series of every repeat, with the
same columns. The export is long-form CSV or JSON Lines (one scalar a line: cell, repeat, seed,
step, metric, value, and the machine columns) because every dashboard and notebook reads it
(pandas, Grafana's CSV/JSON sources, W&B tables, spreadsheets) with no extra dependency; a
TensorBoard writer would need tensorboard itself, not available from Debian here. Loading goes
through load_results, so a bad set raises ResultsError naming the file, as everywhere else.
"""

import argparse
import csv
import io
import json
import os
import sys

from mpbench import output as mo
from mpbench.results.load import ResultsError, load_results
from mpbench.results.values import finite

# summary.csv's last four columns (runner/results/results.cpp), each cell's own: a merged set's
# cells ran on their shards' machines and builds.
CELL_MACHINE_COLUMNS = ("device", "device_name", "run_id", "commit")
MACHINE_COLUMNS = ("experiment", *CELL_MACHINE_COLUMNS)


def _text(value):
    return value if isinstance(value, str) else ""


def commits_by_run(manifest):
    """{run id: commit}: the run's own, and each shard's of a merged set (manifest.shards)."""
    runs = [manifest] + [s for s in manifest.get("shards") or [] if isinstance(s, dict)]
    return {_text(r.get("run_id")): _text(r.get("git_commit")) for r in runs if _text(r.get("run_id"))}


def cell_machines(rs):
    """{cell id: {column: value}} for MACHINE_COLUMNS, from the cell files and the manifest: what the
    runner writes into summary.csv, worked out again for a set of an older runner."""
    commits = commits_by_run(rs.manifest)
    out = {}
    for cell in rs.cells:
        run_id = _text(cell.data.get("run_id")) or _text(rs.manifest.get("run_id"))
        out[cell.cell_id] = dict(experiment=rs.experiment, device=_text(cell.device.get("kind")),
                                 device_name=_text(cell.device.get("name")), run_id=run_id,
                                 commit=commits.get(run_id, ""))
    return out


def load(path):
    """One row per cell of the set at `path`: summary.csv's columns (the runner's, in its order),
    cells in run order, then the experiment; the machine columns filled from the cell files where
    summary.csv has none (an older runner's). Needs pandas."""
    import pandas as pd
    rs = load_results(path)
    # Text columns as text: a commit such as "1234e567" would otherwise read as a number.
    frame = pd.read_csv(os.path.join(rs.path, "summary.csv"), dtype={c: str for c in ("cell_id", "run_id", "commit")})
    order = {c.cell_id: i for i, c in enumerate(rs.cells)}
    frame = frame[frame["cell_id"].isin(order)].copy()
    frame = frame.sort_values("cell_id", key=lambda ids: ids.map(order)).reset_index(drop=True)
    machines = cell_machines(rs)
    for column in MACHINE_COLUMNS:
        if column not in frame.columns:
            frame[column] = [machines[cid][column] for cid in frame["cell_id"]]
    return frame


def scalar_rows(rs):
    """Every finite value of every per-step numeric series of every repeat, as dicts in long form."""
    machines = cell_machines(rs)
    for cell in rs.cells:
        machine = machines[cell.cell_id]
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
