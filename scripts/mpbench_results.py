#!/usr/bin/python3
"""Reading mpbench result directories (the contract in docs/RESULTS.md).

report.py and compare.py both import this module, so there is exactly one
place that knows the file layout, the field names, which fields are optional,
and how a machine is identified. Everything else works on `ResultSet` and
`Cell` objects and never opens a result file itself.

Missing optional data is normal (numerics, checkpointing, eval accuracy,
ceilings are added by later runner issues), so accessors return None or empty
arrays instead of raising; only a structurally broken file raises
`ResultsError`, which always names the offending file.
"""

import json
import math
import os
import sys
import re
from dataclasses import dataclass, field

import numpy as np

CELL_SCHEMA = "mpbench.cell/1"
MANIFEST_SCHEMA = "mpbench.manifest/1"

# Peak-memory categories in stacking order (bottom to top); "total" is separate.
MEMORY_CATEGORIES = ("params", "grads", "optimizer", "activations", "workspace")

# Display order of well-known precisions; unknown ones follow in order of appearance.
PRECISION_ORDER = ("fp32", "tf32", "amp_bf16", "amp_fp16", "O0", "O1", "O2", "O3")

# fp16 limits (IEEE binary16), used to shade gradient histograms.
FP16_MIN_SUBNORMAL_LOG2 = -24   # 2^-24: anything smaller rounds to zero
FP16_MIN_NORMAL_LOG2 = -14      # 2^-14: below this values lose precision (subnormal)
FP16_MAX_LOG2 = 16              # 65504 < 2^16: at or above this values overflow to inf

_REQUIRED_CELL_KEYS = ("cell_id", "axes", "repeats", "summary")


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


def to_float(value):
    """A JSON number as float; None/strings/NaN placeholders become NaN.

    The runner writes non-finite values (a diverged fp16 loss) as JSON null.
    """
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def to_array(values):
    """A JSON list of numbers (possibly containing nulls) as a float ndarray."""
    if not isinstance(values, list):
        return np.zeros(0)
    return np.array([to_float(v) for v in values], dtype=float)


def finite(value):
    """True when value is a real, finite number (not None, not NaN/inf)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def dotted_get(mapping, key, default=None):
    """Look up a dotted key ("model.width") in nested dicts."""
    node = mapping
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def setting_string(value):
    """Render a config value the way the runner renders axis values (strings)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else str(value)


@dataclass
class Cell:
    """One cell's JSON file. Accessors tolerate every optional field being absent."""

    path: str
    data: dict

    @property
    def cell_id(self):
        return self.data["cell_id"]

    @property
    def slug(self):
        return self.data.get("slug") or os.path.splitext(os.path.basename(self.path))[0]

    @property
    def axes(self):
        return self.data.get("axes") or {}

    @property
    def config(self):
        return self.data.get("config") or {}

    @property
    def config_hash(self):
        return self.data.get("config_hash")

    @property
    def is_baseline(self):
        return bool(self.data.get("is_baseline"))

    @property
    def device(self):
        return self.data.get("device") or {}

    @property
    def summary(self):
        return self.data.get("summary") or {}

    @property
    def repeats(self):
        return [r for r in self.data.get("repeats") or [] if isinstance(r, dict)]

    def setting(self, key):
        """The cell's value for an axis/config key as a string.

        Include cells only list the keys they set, so a key absent from `axes`
        falls back to the resolved config (every cell has every config key).
        """
        if key in self.axes:
            return setting_string(self.axes[key])
        return setting_string(dotted_get(self.config, key))

    def loss_scale_mode(self):
        """none | static | dynamic, whichever way loss_scale was written."""
        raw = self.axes.get("loss_scale", dotted_get(self.config, "loss_scale"))
        if isinstance(raw, dict):
            return str(raw.get("mode", "static"))
        if raw is None:
            return "none"
        text = setting_string(raw).strip()
        # canonical ids spell a map as its mode plus changed fields: "dynamic{init:1024}"
        mode = re.match(r"(none|static|dynamic)\b", text)
        if mode:
            return mode.group(1)
        if not text:
            return "none"
        try:
            float(text)
            return "static"      # a bare number is a static scale
        except ValueError:
            pass
        if text.startswith("{"):
            try:
                return str(json.loads(text).get("mode", "static"))
            except (ValueError, AttributeError):
                pass
        return text

    def summary_value(self, key):
        """A summary number (dotted for nested, e.g. "step_time_ms.median") or NaN."""
        return to_float(dotted_get(self.summary, key))

    def summary_list(self, key):
        """A per-repeat summary list (samples_per_s_repeats, ...) as an array."""
        return to_array(self.summary.get(key))

    def memory(self, category):
        """Peak memory of one category (or "total") in bytes, NaN when absent."""
        return to_float((self.summary.get("peak_memory_bytes") or {}).get(category))

    def series(self, key):
        """One array per repeat for a per-step series (loss, step_time_ms, ...)."""
        return [to_array(r.get(key)) for r in self.repeats]

    def numerics_samples(self):
        """(repeat index, sample dict) for every numerics sample of every repeat."""
        out = []
        for i, r in enumerate(self.repeats):
            numerics = r.get("numerics")
            if isinstance(numerics, dict):
                out.extend((i, s) for s in numerics.get("samples") or [] if isinstance(s, dict))
        return out

    def any_skipped(self):
        """Whether any optimizer step of any repeat was skipped (non-finite grads)."""
        if finite(to_float(self.summary.get("skipped_steps"))) and to_float(self.summary.get("skipped_steps")) > 0:
            return True
        return any(np.nansum(s) > 0 for s in self.series("skipped"))

    def emulated_ops(self):
        """{op: how} for ops this device only emulates (anything other than native).

        `device.emulated` is a map op -> "native" | description; a bare bool or
        string is accepted too so a future runner can simplify the field.
        """
        emulated = self.device.get("emulated")
        if isinstance(emulated, dict):
            return {op: str(how) for op, how in emulated.items()
                    if how not in (None, False, "native", "")}
        if emulated is True:
            return {"all": "emulated"}
        if isinstance(emulated, str) and emulated not in ("", "native"):
            return {"all": emulated}
        return {}

    def warmup_steps(self):
        """Steps the runner excluded from timing statistics (0 if unknown)."""
        value = to_float(self.config.get("warmup_steps"))
        return int(value) if finite(value) else 0


@dataclass
class ResultSet:
    """A result directory: its manifest and its cells in run order."""

    path: str
    manifest: dict
    cells: list = field(default_factory=list)

    @property
    def experiment(self):
        return self.manifest.get("experiment") or os.path.basename(os.path.normpath(self.path))

    @property
    def by_id(self):
        return {c.cell_id: c for c in self.cells}

    def baseline(self):
        """The cell speedups are relative to (flagged is_baseline), or None."""
        return next((c for c in self.cells if c.is_baseline), None)

    def axis_keys(self):
        """Every axis key used by any cell, in first-seen order (matrix order first)."""
        keys = []
        for cell in self.cells:
            keys.extend(k for k in cell.axes if k not in keys)
        return keys

    def varying_keys(self):
        """Axis keys whose value differs between cells (the ones worth labelling)."""
        return [k for k in self.axis_keys() if len({c.setting(k) for c in self.cells}) > 1]

    def missing_cells(self):
        """Cells the manifest planned but for which no result file exists (interrupted run)."""
        planned = self.manifest.get("cells") or []
        have = self.by_id
        return [cid for cid in planned if cid not in have]

    def finished(self):
        return bool(self.manifest.get("finished"))

    def machine_identity(self):
        return machine_identity(self.manifest)

    def machine_label(self):
        return machine_label(self.manifest)


def machine_identity(manifest):
    """(device kind, device name, GPU name): equal tuples mean "the same machine".

    RESULTS.md: differences between different identities are generational,
    not regressions.
    """
    device = manifest.get("device") or {}
    gpu = device.get("gpu") or {}
    return (str(device.get("kind") or ""), str(device.get("name") or ""),
            str(gpu.get("name") or "") if isinstance(gpu, dict) else "")


def machine_label(manifest):
    """A short human name for a machine: the GPU name if any, else the device name."""
    kind, name, gpu = machine_identity(manifest)
    return gpu or name or kind or "unknown machine"


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
    cells.sort(key=_cell_order_key(manifest))
    return ResultSet(path=path, manifest=manifest, cells=cells)


def precision_sort_key(precision):
    """Known precisions in a fixed, meaningful order; others alphabetically after."""
    if precision in PRECISION_ORDER:
        return (0, PRECISION_ORDER.index(precision), "")
    return (1, 0, precision)


def fp32_reference(result_set, cell):
    """The same machine's fp32 (fusion off) counterpart of `cell`.

    Same values for every other axis, so a width-512 cell is compared with the
    width-512 fp32 cell. Falls back to the set's baseline cell.
    """
    wanted = {k: cell.setting(k) for k in result_set.axis_keys()}
    wanted["precision"] = "fp32"
    if "fusion" in wanted:
        wanted["fusion"] = "off"
    for other in result_set.cells:
        if all(other.setting(k) == v for k, v in wanted.items()):
            return other
    return result_set.baseline()


def format_number(value, digits=3):
    """Compact human formatting shared by tables: NaN/None -> '—'."""
    value = to_float(value)
    if not math.isfinite(value):
        return "—"
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.{digits - 1}e}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:#.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}f}"


def format_bytes(value):
    """Bytes as MiB/GiB text."""
    value = to_float(value)
    if not math.isfinite(value):
        return "—"
    if value >= 1 << 30:
        return f"{value / (1 << 30):.2f} GiB"
    return f"{value / (1 << 20):.1f} MiB"


def slugify(text):
    """The runner's slug rule (CONFIG.md), reused for file names we derive from ids."""
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", text.replace(",", "__"))
