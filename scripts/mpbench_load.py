"""Reading mpbench result directories from disk: the file layout and its checks.

Why a module of its own: this is the only code that opens result files. It finds
the run directory (or the one run below a parent), reads manifest.json and
cells/*.json, rejects what is not a result file of a supported schema with a
`ResultsError` naming the file, and drops cell files that are not part of the run
the manifest describes. What the files mean is mpbench_cell's and
mpbench_resultset's business.
"""

import json
import os
import sys

from mpbench_cell import Cell
from mpbench_resultset import ResultSet

CELL_SCHEMA = "mpbench.cell/1"
MANIFEST_SCHEMA = "mpbench.manifest/1"

_REQUIRED_CELL_KEYS = ("cell_id", "axes", "repeats", "summary")
_OBJECT_CELL_KEYS = ("axes", "config", "device", "precision", "testing")


class ResultsError(Exception):
    """A result file is missing or malformed; `path` names the file to look at."""

    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message


def read_json(path):
    """Parse one JSON file, turning every failure into a ResultsError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ResultsError(path, "file not found") from None
    except json.JSONDecodeError as e:
        raise ResultsError(path, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ResultsError(path, f"cannot read: {e}") from None


def _check_cell(path, data):
    """Reject files that are not mpbench cells, naming the file and the problem."""
    if not isinstance(data, dict):
        raise ResultsError(path, "expected a JSON object")
    schema = data.get("schema")
    if schema is not None and not str(schema).startswith("mpbench.cell/"):
        raise ResultsError(path, f"not a cell file (schema {schema!r}, expected {CELL_SCHEMA!r})")
    if schema is not None and schema != CELL_SCHEMA:
        raise ResultsError(path, f"unsupported schema {schema!r} (this script reads {CELL_SCHEMA!r})")
    for key in _REQUIRED_CELL_KEYS:
        if key not in data:
            raise ResultsError(path, f"missing required key {key!r}")
    if not isinstance(data["repeats"], list) or not isinstance(data["summary"], dict):
        raise ResultsError(path, "'repeats' must be a list and 'summary' an object")
    if not isinstance(data["cell_id"], str):
        raise ResultsError(path, f"'cell_id' must be a string, not {type(data['cell_id']).__name__}")
    # Optional objects (null or absent is fine) that the scripts index by key:
    # a list or a number there is a damaged file, not a crash (issue 13 D8).
    for key in _OBJECT_CELL_KEYS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ResultsError(path, f"{key!r} must be an object, not {type(data[key]).__name__}")
    for i, rep in enumerate(data["repeats"]):
        if not isinstance(rep, dict):
            raise ResultsError(path, f"repeats[{i}] must be an object, not {type(rep).__name__}")
        for key in ("loss", "step_time_ms"):
            if rep.get(key) is not None and not isinstance(rep[key], list):
                raise ResultsError(path, f"repeats[{i}].{key} must be a list, not {type(rep[key]).__name__}")


def load_cell(path):
    data = read_json(path)
    _check_cell(path, data)
    return Cell(path=str(path), data=data)


def _resolve_dir(path):
    """Accept the run directory itself or a parent holding exactly one run."""
    if os.path.isfile(os.path.join(path, "manifest.json")):
        return path
    if os.path.isdir(path):
        runs = [os.path.join(path, d) for d in sorted(os.listdir(path))
                if os.path.isfile(os.path.join(path, d, "manifest.json"))]
        if len(runs) == 1:
            return runs[0]
        if len(runs) > 1:
            names = ", ".join(os.path.basename(r) for r in runs)
            raise ResultsError(path, f"holds several runs ({names}); pass one of them")
    elif not os.path.exists(path):
        raise ResultsError(path, "no such directory")
    else:
        raise ResultsError(path, "not a directory")
    raise ResultsError(os.path.join(path, "manifest.json"), "file not found (is this a results directory?)")


def _cell_order_key(manifest):
    """Sort key putting cells in the manifest's run order, unknown ones last."""
    order = {cid: i for i, cid in enumerate(manifest.get("cells") or [])}
    return lambda cell: (order.get(cell.cell_id, len(order)), cell.cell_id)


def load_results(path):
    """Load a result directory; raises ResultsError naming the first bad file."""
    path = _resolve_dir(str(path))
    manifest_path = os.path.join(path, "manifest.json")
    manifest = read_json(manifest_path)
    if not isinstance(manifest, dict):
        raise ResultsError(manifest_path, "expected a JSON object")
    schema = manifest.get("schema")
    if schema is not None and schema != MANIFEST_SCHEMA:
        raise ResultsError(manifest_path, f"unsupported schema {schema!r} (expected {MANIFEST_SCHEMA!r})")

    cells_dir = os.path.join(path, "cells")
    if not os.path.isdir(cells_dir):
        raise ResultsError(cells_dir, "directory not found (no cell has finished yet?)")
    cells = [load_cell(os.path.join(cells_dir, name))
             for name in sorted(os.listdir(cells_dir)) if name.endswith(".json")]
    seen = {}
    for cell in cells:
        if cell.cell_id in seen:
            raise ResultsError(cell.path, f"duplicate cell_id {cell.cell_id!r} (also in {seen[cell.cell_id]})")
        seen[cell.cell_id] = cell.path
    # A results directory reused by an edited experiment keeps the old cells'
    # files (the runner never deletes results); only the cells of the run the
    # manifest describes belong to this result set.
    planned = set(manifest.get("cells") or [])
    if planned:
        stale = [c for c in cells if c.cell_id not in planned]
        for cell in stale:
            print(f"note: {cell.path}: not a cell of this run (manifest.json), ignored", file=sys.stderr)
        cells = [c for c in cells if c.cell_id in planned]
    # A cell file whose configuration is not the one the manifest's run had
    # (an edited experiment resumed by an older runner, or files copied
    # together by hand) would mix two experiments in one table: refuse it.
    # The runner moves such files to stale/ before it writes anything.
    hashes = manifest.get("cell_config_hashes")
    if isinstance(hashes, dict):
        for cell in cells:
            want = hashes.get(cell.cell_id)
            got = cell.config_hash
            if want is not None and got != want:
                raise ResultsError(cell.path, f"config_hash {got!r} differs from the manifest's {want!r} for cell "
                                   f"{cell.cell_id!r}: this cell ran with another configuration than the rest of "
                                   "the set (rerun the runner with --resume: it moves stale cells to stale/)")
    cells.sort(key=_cell_order_key(manifest))
    return ResultSet(path=path, manifest=manifest, cells=cells)
