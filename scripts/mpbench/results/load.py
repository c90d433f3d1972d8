"""Reading mpbench result directories from disk: the file layout and its checks.

Why a module of its own: this is the only code that opens result files. It finds
the run directory (or the one run below a parent), reads manifest.json and
cells/*.json, rejects what is not a result file of a supported schema with a
`ResultsError` naming the file, and drops cell files that are not part of the run
the manifest describes. What the files mean is results.cell's and
results.resultset's business.
"""

import json
import os
import stat
import sys

from mpbench.results.cell import Cell
from mpbench.results.schema import FieldError, check_cell_fields, check_manifest_fields
from mpbench.results.resultset import ResultSet
from mpbench.results.vocabulary import vocabulary_of

CELL_SCHEMA = "mpbench.cell/1"
MANIFEST_SCHEMA = "mpbench.manifest/1"

_REQUIRED_CELL_KEYS = ("cell_id", "axes", "repeats", "summary")


class ResultsError(Exception):
    """A result file is missing or malformed; `path` names the file to look at."""

    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message


# The largest result file read: a cell of 10,000 steps x 100 repeats is about 20 MB. A bigger
# file (a 2 GB sparse file planted as a cell, issue 43 item 5) is refused before it is read,
# not turned into a MemoryError, whose exit 1 a CI gate reads as "regression".
MAX_RESULT_FILE_BYTES = 256 << 20


def _read_regular_file(path):
    """The text of `path` if it is a regular file of at most MAX_RESULT_FILE_BYTES, else a
    ResultsError. Opened non-blocking and checked with fstat before any read: a FIFO as a cell
    file hung report.py for ever, a character device never ends."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ResultsError(path, "not a regular file (a FIFO, device, socket or directory): not read")
        if st.st_size > MAX_RESULT_FILE_BYTES:
            raise ResultsError(path, f"{st.st_size} bytes, more than a result file holds "
                                     f"({MAX_RESULT_FILE_BYTES >> 20} MiB): not read")
        os.set_blocking(fd, True)
        with os.fdopen(fd, encoding="utf-8") as f:
            fd = None  # the file object closes it
            return f.read(MAX_RESULT_FILE_BYTES + 1)
    finally:
        if fd is not None:
            os.close(fd)


def read_json(path):
    """Parse one JSON file, turning every failure into a ResultsError naming it."""
    try:
        return json.loads(_read_regular_file(path))
    except FileNotFoundError:
        raise ResultsError(path, "file not found") from None
    except IsADirectoryError:
        raise ResultsError(path, "not a regular file (a directory): not read") from None
    except json.JSONDecodeError as e:
        raise ResultsError(path, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ResultsError(path, f"cannot read: {e}") from None
    except RecursionError:
        raise ResultsError(path, "invalid JSON: nested too deeply") from None
    except MemoryError:
        raise ResultsError(path, "too large to read into memory") from None


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
    # Every field's type, finiteness and sign (results.schema): a damaged or
    # hand-edited field is an input error naming the field (issue 33 defect 2).
    try:
        check_cell_fields(data)
    except FieldError as e:
        raise ResultsError(path, str(e)) from None


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


def _refuse_strangers(manifest_path, manifest, cells):
    """A cell of another experiment or another run (copied in by hand; its config_hash may well
    match) was measured against another baseline: refuse it, naming the file and what differs
    (docs/RESULTS.md, "Guarantees"; the runner's rule is runner/results/run_identity.h). A merged set
    accepts each shard's run id (manifest.shards[].run_id); a set from before run ids, cells
    without one."""
    experiment = manifest.get("experiment")
    run_ids = [manifest["run_id"]] if isinstance(manifest.get("run_id"), str) else []
    shards = manifest.get("shards")
    if run_ids and isinstance(shards, list):
        run_ids += [s["run_id"] for s in shards if isinstance(s, dict) and isinstance(s.get("run_id"), str)]
    for cell in cells:
        if experiment is not None and "experiment" in cell.data and cell.data["experiment"] != experiment:
            raise ResultsError(cell.path, f"a cell of another experiment: experiment {cell.data['experiment']!r}, "
                               f"{manifest_path} says {experiment!r}")
        run_id = cell.data.get("run_id")
        if run_ids and run_id not in run_ids:
            got = "no run_id" if run_id is None else f"run_id {run_id!r}"
            want = " or ".join(repr(r) for r in run_ids)
            raise ResultsError(cell.path, f"a cell of another run: {got}, {manifest_path} says {want} (it was "
                               "measured against another run's baseline; move it away)")
        if not run_ids and run_id is not None:
            raise ResultsError(cell.path, f"a cell of another run: run_id {run_id!r}, {manifest_path} records none "
                               "(a set from before run ids)")


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
    try:
        check_manifest_fields(manifest)
        vocabulary_of(manifest)  # a vocabulary without its schema or with an empty list: refused here
    except (FieldError, ValueError) as e:
        raise ResultsError(manifest_path, str(e)) from None

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
    _refuse_strangers(manifest_path, manifest, cells)
    # Every speed-up and verdict is against the one baseline: two would make each
    # reader pick one silently (the runner writes is_baseline on one cell only).
    baselines = [c for c in cells if c.is_baseline]
    if len(baselines) > 1:
        raise ResultsError(baselines[1].path, f"a second baseline: is_baseline is true here and in "
                           f"{baselines[0].path}; a result set has one baseline")
    cells.sort(key=_cell_order_key(manifest))
    return ResultSet(path=path, manifest=manifest, cells=cells)
