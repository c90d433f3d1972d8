"""How the report names, orders and writes cells: names, key letters, groups, number text.

Why a module of its own: the figures, the Cells table, the key table and the
Notes/Noise sections must all call a cell by the same name and list cells in
the same order. Nothing here draws or writes a file.

Figures call every cell by its name (plot_names): the precision and what sets
the cell apart from the baseline ("amp_fp16 fusion=on, loss_scale=dynamic"),
made distinct for distinct cells (distinct_labels), down to the sub-field of a
map setting such as loss_scale; the same name in every figure. Readers had to
look letters up in a key printed four times (issue 41), so figures no longer
use them. The tables keep a key letter per cell (A, B, C... in display order)
as a short row name beside the full cell id.
"""

from mpbench import results as mr


def reference_cell(rs):
    """The cell other cells are described relative to: the baseline, else the first."""
    return rs.baseline() or (rs.cells[0] if rs.cells else None)


def map_parts(key, mine, maps, axis_keys):
    """What sets the map setting `mine` apart among `maps`: "key=mode" when modes differ,
    then "key.field=value" for each field that differs among the cells of the same mode
    (a field with an axis of its own, "loss_scale.init", is left to that axis)."""
    out = []
    if len({m.get("mode") for m in maps}) > 1:
        out.append(f"{key}={mine.get('mode')}")
    peers = [m for m in maps if m.get("mode") == mine.get("mode")]
    fields = [f for f in dict.fromkeys(f for m in peers for f in m) if f != "mode"]
    for f in fields:
        if f"{key}.{f}" not in axis_keys and f in mine and len({m.get(f) for m in peers}) > 1:
            out.append(f"{key}.{f}={mine[f]}")
    return out


def setting_parts(rs, cell, among, skip=()):
    """"key=value" for each axis setting of `cell` that is not the same in every cell of `among`.

    Map-valued settings (loss_scale) show only what differs: the mode, or the
    sub-field ("loss_scale.init=1024") when two cells share the mode.
    """
    among = list(among) + ([cell] if cell not in among else [])
    axis_keys = rs.axis_keys()
    parts = []
    for key in axis_keys:
        if key in skip or len({c.setting(key) for c in among}) <= 1:
            continue
        maps = [c.map_setting(key) for c in among]
        if any(m is not None for m in maps):
            maps = [m if m is not None else {"mode": c.setting(key)} for m, c in zip(maps, among)]
            mine = maps[among.index(cell)]
            parts.extend(map_parts(key, mine, maps, axis_keys))
        else:
            parts.append(f"{key}={cell.setting(key)}")
    return list(dict.fromkeys(parts))


def describe(rs, cell, skip=("precision",)):
    """Settings that set `cell` apart from the reference cell, as "key=value" parts.

    Labels stay short ("fusion=on") instead of repeating every axis, and
    include cells that only set one extra key read naturally.
    """
    ref = reference_cell(rs)
    return [] if ref is None or ref is cell else setting_parts(rs, cell, [ref, cell], skip)


def model_reference(rs, cell):
    """What a label describes `cell` against: the baseline for cells of its model; for
    another model, that model's first cell (its settings, "model.kind=bert" and all, are
    what makes it that model, and the label names the model instead)."""
    ref = reference_cell(rs)
    if ref is None or cell.model_kind == ref.model_kind:
        return ref
    return next(c for c in rs.cells if c.model_kind == cell.model_kind)


def short_label(rs, cell, skip=("precision",), sep=" "):
    """The bare precision value, then the other settings that distinguish the cell
    (those named in `skip` left out; precision is always shown bare, never as key=value).
    A cell of another model than the baseline's starts with the model: "bert · amp_bf16"."""
    ref = model_reference(rs, cell)
    parts = [] if ref is None or ref is cell else setting_parts(rs, cell, [ref, cell], skip)
    head = cell.setting("precision") if "precision" in skip else ""
    if ref is not None and ref is not reference_cell(rs):
        head = " · ".join(p for p in (cell.model_kind, head) if p)
    return sep.join(p for p in (head, ", ".join(parts)) if p) or cell.cell_id


def flat_config(config, prefix=""):
    """{"model.width": 512, ...}: every leaf of the resolved config under its dotted key."""
    out = {}
    for k, v in (config or {}).items():
        if isinstance(v, dict):
            out.update(flat_config(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = mr.setting_string(v)
    return out


def config_differences(cell, group):
    """"key=value" for resolved-config leaves that differ within `group` (the last resort)."""
    flats = [flat_config(c.config) for c in group]
    mine = flat_config(cell.config)
    keys = dict.fromkeys(k for f in flats for k in f)
    return [f"{k}={mine.get(k, '—')}" for k in keys if len({f.get(k) for f in flats}) > 1][:3]


def distinct_labels(rs, cells, texts):
    """texts ({cell_id: label}) with clashing labels extended until distinct cells differ:
    first by the settings that differ within the clashing group (a map setting's
    sub-field when that is all), then by the resolved config, last by the cell id."""
    texts = dict(texts)
    resolvers = (lambda c, g: setting_parts(rs, c, g),
                 config_differences,
                 lambda c, g: [c.cell_id])
    for resolve in resolvers:
        groups = {}
        for c in cells:
            groups.setdefault(texts[c.cell_id], []).append(c)
        clashes = [g for g in groups.values() if len(g) > 1]
        if not clashes:
            break
        for group in clashes:
            for c in group:
                extra = [p for p in resolve(c, group) if p not in texts[c.cell_id]]
                if extra:
                    texts[c.cell_id] = ", ".join([texts[c.cell_id]] * bool(texts[c.cell_id]) + extra)
    return texts


def cell_labels(rs, cells, skip=("precision",)):
    """{cell_id: label} for cells shown together (one legend, one figure): the precision and
    what differs from the baseline, distinct for distinct cells. No key letter."""
    return distinct_labels(rs, cells, {c.cell_id: short_label(rs, c, skip) for c in cells})


def plot_names(rs, stacked=False):
    """{cell_id: name} for every cell of the set: what every figure calls it (cell_labels over all
    cells, so a cell has one name in all figures). stacked: one setting a line, for bar ticks."""
    names = cell_labels(rs, rs.cells)
    if stacked:
        names = {cid: "\n".join(part for line in name.split(", ") for part in stacked_head(line))
                 for cid, name in names.items()}
    return names


def stacked_head(line):
    """"amp_fp16 fusion=on" -> ["amp_fp16", "fusion=on"]: the precision apart from the first setting."""
    head, _, rest = line.partition(" ")
    return [head, rest] if rest and "=" in rest and "=" not in head and "·" not in line else [line]


def clip(text, limit=70):
    """Cut a long label (legends and titles stay readable; the Cells table has the full cell id)."""
    return text if len(text) <= limit else text[:limit - 1].rstrip(" ,") + "…"


def key_name(index):
    """0 -> "A", 25 -> "Z", 26 -> "AA", ..."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def cell_keys(rs):
    """{cell_id: "A", ...}: each cell's short name, in display order (the Cells table's order)."""
    return {c.cell_id: key_name(i) for i, c in enumerate(display_order(rs))}


def model_rank(rs):
    """{model kind: rank}: the baseline's model first, then the others as they first appear."""
    base = reference_cell(rs)
    kinds = ([base.model_kind] if base else []) + [c.model_kind for c in rs.cells]
    return {k: i for i, k in enumerate(dict.fromkeys(kinds))}


def several_models(rs):
    return len({c.model_kind for c in rs.cells}) > 1


def display_order(rs):
    """Cells grouped by model (the baseline's first), then precision (fixed order), then other
    axes, fusion off before on."""
    others = [k for k in rs.axis_keys() if k not in ("precision", "fusion")]
    vocabulary = rs.vocabulary
    run_order = {c.cell_id: i for i, c in enumerate(rs.cells)}
    models = model_rank(rs)

    def key(cell):
        return (models[cell.model_kind], vocabulary.precision_sort_key(cell.setting("precision")),
                tuple(describe(rs, cell, skip=("precision", "fusion"))) if others else (),
                cell.setting("fusion") != "off", run_order[cell.cell_id])
    return sorted(rs.cells, key=key)


def group_name(rs, model, precision):
    """A precision group's name: "amp_bf16", or "amp_bf16 (bert)" for another model than the baseline's."""
    base = reference_cell(rs)
    return precision if base is None or model == base.model_kind else f"{precision} ({model})"


def precision_groups(rs, cells):
    """[(group name, [cells...]), ...] by model and precision, keeping the order of `cells`."""
    groups, last = [], None
    for cell in cells:
        this = (cell.model_kind, cell.setting("precision"))
        if groups and this == last:
            groups[-1][1].append(cell)
        else:
            groups.append((group_name(rs, *this), [cell]))
        last = this
    return groups


KEY_COLUMNS = ["key", "precision", "fusion", "other settings that differ from the baseline", "cell"]


def key_rows(rs, cell_ids=None):
    """The key table: each short name with the cell's full settings, in display order."""
    keys = cell_keys(rs)
    rows = []
    for c in display_order(rs):
        if cell_ids is not None and c.cell_id not in cell_ids:
            continue
        other = ", ".join(describe(rs, c, skip=("precision", "fusion")))
        rows.append([keys[c.cell_id], c.setting("precision") or "—", c.setting("fusion") or "—",
                     "(the baseline)" if c.is_baseline else other or "—", c.cell_id])
    return rows


def times(value):
    """A ratio as "1.07": two decimals, two significant digits below 0.1 ("0.0041", not "0.00")."""
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def percent(value):
    return f"{100 * value:.1f}%" if mr.finite(value) else "—"
