"""Plain values of mpbench result files: JSON numbers, config settings, and their text.

Why a module of its own: every reader of results (results.cell, results.resultset,
report.py, compare.py, generations.py) turns the same JSON values into floats and
strings the same way. These functions know nothing of the file layout; they take
values, not files, so they can be used and tested without a result directory.
Code outside mpbench.results imports them through the package (mpbench.results), which
re-exports all of them.
"""

import json
import math
import re

import numpy as np

# fp16 limits (IEEE binary16), used to shade gradient histograms.
FP16_MIN_SUBNORMAL_LOG2 = -24   # 2^-24: anything smaller rounds to zero
FP16_MIN_NORMAL_LOG2 = -14      # 2^-14: below this values lose precision (subnormal)
FP16_MAX_LOG2 = 16              # 65504 < 2^16: at or above this values overflow to inf


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


_MAP_TEXT = re.compile(r"^\s*([A-Za-z_][\w]*)\s*\{(.*)\}\s*$")


def parse_map_setting(value):
    """A map-valued setting (loss_scale, ...) as a dict of strings, or None.

    Accepts the resolved config's map ({"mode": "dynamic", "init": 1024.0, ...}),
    the canonical id spelling of CONFIG.md ("dynamic{init:1024;growth_interval:100}",
    mode first, then the fields that differ from the defaults) and a JSON object.
    Values become strings the way setting_string renders them ("1024", not "1024.0").
    A bare word ("dynamic") is not a map here; callers that compare it with maps
    treat it as {"mode": word}.
    """
    if isinstance(value, dict):
        return {str(k): setting_string(v) for k, v in value.items()}
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
        return parse_map_setting(parsed) if isinstance(parsed, dict) else None
    match = _MAP_TEXT.match(text)
    if not match:
        return None
    out = {"mode": match.group(1)}
    for item in re.split(r"[;,]", match.group(2)):
        key, sep, val = item.partition(":")
        if sep and key.strip():
            out[key.strip()] = setting_string(_number_or_text(val.strip()))
    return out


def _number_or_text(text):
    """"1024.0" -> 1024.0 (so setting_string prints "1024"); anything else unchanged."""
    try:
        return float(text)
    except ValueError:
        return text


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


SLUG_MAX_CHARS = 120   # runner/experiment/config.h kSlugMaxChars


def slugify(text):
    """The runner's slug rule (runner/experiment/matrix.cpp cell_slug, CONFIG.md), for file names we derive from ids:
    the readable spelling, plus "-" and 8 hex digits of the id's FNV-1a hash when the spelling could
    belong to another id too (a character replaced, or '_' next to '_' or ',') or is too long."""
    slug = re.sub(r"[^A-Za-z0-9_.=-]", "_", text.replace(",", "__"))
    reads_back = (not re.search(r"[^A-Za-z0-9_.=,-]", text) and "__" not in text and "_," not in text
                  and ",_" not in text)
    if reads_back and len(slug) <= SLUG_MAX_CHARS:
        return slug
    h = 0xcbf29ce484222325                       # FNV-1a 64 over the id as a JSON string, as config_hash
    for byte in json.dumps(text, ensure_ascii=False, separators=(",", ":")).encode():
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return slug[:SLUG_MAX_CHARS - 9] + "-" + f"{h:016x}"[:8]


def format_table(headers, rows, align=None, groups=None):
    """Fixed-width text table.

    headers: list of header rows; align: one 'l'/'r' per column (default: first
    column left, numbers right); groups: [(column, text)] printed above the
    header starting at that column, free to overflow to the right, so a long
    group title does not widen its first column.
    """
    all_rows = headers + rows
    ncols = len(all_rows[0])
    align = align or "l" + "r" * (ncols - 1)
    widths = [max(len(str(r[i])) if i < len(r) else 0 for r in all_rows) for i in range(ncols)]
    lines = []
    if groups:
        starts = [sum(widths[:i]) + 2 * i for i in range(ncols)]
        line = ""
        for col, text in groups:
            line = line.ljust(starts[col]) + text + " "
        lines.append(line.rstrip())
    for j, row in enumerate(all_rows):
        cells = [str(v).ljust(w) if align[i] == "l" or j < len(headers) else str(v).rjust(w)
                 for i, (v, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if j == len(headers) - 1:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
