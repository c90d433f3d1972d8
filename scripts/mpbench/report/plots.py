"""The report's figures: one function per plot, and render_plots() saving them as PNGs.

Why a module of its own: everything matplotlib lives here (the backend is
chosen when this module is imported, before pyplot). A plot function takes a
ResultSet and returns a figure, or a Drawn when the figure needs notes or a key
table beside it, or raises Skip with the reason when the run did not record the
data it needs; render_plots turns that into a Plot record for the page writers.
Labels and order come from report.labels, so figures and tables agree.
"""

import io
import math
import os
import warnings
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from mpbench import output as mo  # noqa: E402
from mpbench import results as mr  # noqa: E402
from mpbench.report.labels import (cell_keys, cell_labels, clip, display_order, precision_groups,  # noqa: E402
                                   several_models, short_label, times)

DPI = 110
MIB = float(1 << 20)
PLAIN = FuncFormatter(lambda v, _: f"{v:g}")     # log axes without 10^x tick labels
FUSION_COLOURS = {"off": "#4C72B0", "on": "#DD8452"}
# One colour per memory category, in the vocabulary's stacking order (params,
# grads, optimizer, activations, workspace today); a category the runner adds
# later takes the next colour round.
MEMORY_COLOURS = ("#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD")


def bar_positions(groups, gap=0.7):
    """x positions for grouped bars: one unit per bar, `gap` between groups."""
    xs, centres, x = [], [], 0.0
    for _, cells in groups:
        start = x
        for _ in cells:
            xs.append(x)
            x += 1.0
        centres.append((start + x - 1.0) / 2)
        x += gap
    return xs, centres


def label_bars(ax, rs, xs, cells, groups, centres):
    """Group names (precision, and model where several) along the top; under each bar its key
    letter, which the key table under the figure spells out."""
    keys = cell_keys(rs)
    ax.set_xticks(xs, [keys[c.cell_id] for c in cells], fontsize=9)
    pad = max(0.9, (6 - len(xs)) / 2)          # a lone bar should not fill the whole width
    ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    top = ax.secondary_xaxis("top")
    top.set_xticks(centres, [g for g, _ in groups], fontweight="bold")
    top.tick_params(length=0)


@dataclass
class Plot:
    """One report figure: the PNG it was saved to, or why it was left out.

    notes: sentences printed under the figure (cells left out of it, and why);
    key_cells: the cells whose key letters the figure shows (a key table follows it).
    """
    name: str
    title: str
    caption: str
    file: str = None
    skipped: str = None
    notes: list = field(default_factory=list)
    key_cells: list = None


@dataclass
class Drawn:
    """What a plot function returns when the figure needs notes or a key table beside it."""
    fig: object
    notes: list = field(default_factory=list)
    key_cells: list = None


class Skip(Exception):
    """Raised by a plot function when the data it needs was not recorded."""


def speedup_whiskers(rs, cells, heights, base_sps):
    """Per cell (lo, hi) whisker ends and what they mean.

    The runner's confidence interval where the set has intervals (a cell without
    one, such as the baseline, gets none); otherwise, as older sets had it, the
    slowest..fastest repeat over the baseline's median.
    """
    intervals = [c.speedup_interval() for c in cells]
    if any(intervals):
        confidence = next(iv.confidence_text() for iv in intervals if iv)
        return ([(iv.lo, iv.hi) if iv else None for iv in intervals],
                f"whiskers: {confidence or 'the'} confidence interval of the speed-up")
    ends = []
    for cell, height in zip(cells, heights):
        reps = cell.summary_list("samples_per_s_repeats") / base_sps
        reps = reps[np.isfinite(reps)]
        ends.append((reps.min(), reps.max()) if reps.size and mr.finite(height) else None)
    return ends, "whiskers: slowest..fastest repeat"


def plot_speedup(rs):
    """Bars of throughput speedup; whiskers = the speed-up interval (or the repeats' range).

    Only cells with a speed-up are drawn: a cell of another model than the
    baseline's has none (the ratio of two models' throughputs means nothing).
    """
    base = rs.baseline()
    if base is None:
        raise Skip("no cell is flagged is_baseline, so there is nothing to take a speedup against")
    base_sps = base.summary_value("samples_per_s")
    if not mr.finite(base_sps) or base_sps <= 0:
        raise Skip(f"the baseline cell {base.cell_id} has no throughput")
    keys = cell_keys(rs)
    ordered = display_order(rs)
    cells = [c for c in ordered if mr.finite(rs.speedup(c))]
    notes = [f"{keys[c.cell_id]} ({c.cell_id}) is not in the figure: {rs.no_speedup_reason(c)}, so it has no "
             "speed-up." for c in ordered if c not in cells]
    if not cells:
        raise Skip("no cell has a speed-up")
    groups = precision_groups(rs, cells)
    xs, centres = bar_positions(groups)
    heights = [rs.speedup(c) for c in cells]
    whiskers, whisker_text = speedup_whiskers(rs, cells, heights, base_sps)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(cells) + 2.5), 4.8))
    faded_any, noisy_any = False, False
    for x, cell, height, ends in zip(xs, cells, heights, whiskers):
        emulated = bool(cell.emulated_ops())
        faded = cell.speedup_verdict() == "no measurable difference"
        faded_any |= faded
        ax.bar(x, height, 0.8, color=FUSION_COLOURS.get(cell.setting("fusion"), "#999999"),
               hatch="//" if emulated else None, edgecolor="white" if emulated else None,
               alpha=0.4 if faded else 1.0)
        if ends is not None:
            err = [[max(0.0, height - ends[0])], [max(0.0, ends[1] - height)]]
            ax.errorbar(x, height, yerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
        top = max(height, ends[1] if ends else height)
        text = f"{times(height)}×" + ("\nnoisy" if cell.is_noisy() else "")
        ax.annotate(text, (x, top), xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                    fontsize=8, color="#b00000" if cell.is_noisy() else "black")
        noisy_any |= cell.is_noisy()
    for fusion in dict.fromkeys(c.setting("fusion") for c in cells):     # legend entries at full colour
        ax.bar(math.nan, math.nan, color=FUSION_COLOURS.get(fusion, "#999999"), label=f"fusion {fusion}")
    if any(c.emulated_ops() for c in cells):
        ax.bar(math.nan, math.nan, color="#bbbbbb", hatch="//", edgecolor="white", label="emulated on this device")
    if faded_any:
        ax.bar(math.nan, math.nan, color="#bbbbbb", alpha=0.4, label="interval contains 1: no measurable difference")
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label=f"baseline ({keys[base.cell_id]})")
    label_bars(ax, rs, xs, cells, groups, centres)
    ax.set_ylabel("speedup (×, samples/s ÷ baseline)")
    ax.set_xlabel("precision (top) · fusion (colour) · cell key (below; see the table under the figure)",
                  fontsize=9)
    ax.set_title(f"Throughput speedup vs baseline — {rs.machine_label()}\n"
                 f"bar: all-repeat median; {whisker_text}" + ("; red: noisy cell" if noisy_any else ""),
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.margins(y=0.15)
    return Drawn(fig, notes=notes, key_cells=[c.cell_id for c in cells])


def plot_memory(rs):
    """Stacked per-category peak memory per cell, with the measured total marked."""
    cells = display_order(rs)
    totals = np.array([c.memory("total") for c in cells])
    categories = rs.vocabulary.memory_categories
    parts = {k: np.array([c.memory(k) for c in cells]) for k in categories}
    if not np.any(np.nan_to_num(totals) > 0) and not any(np.any(np.nan_to_num(v) > 0) for v in parts.values()):
        raise Skip("the run recorded no peak-memory numbers")
    groups = precision_groups(rs, cells)
    xs, centres = bar_positions(groups)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(cells) + 2.5), 4.8))
    bottom = np.zeros(len(cells))
    for i, k in enumerate(categories):
        values = np.nan_to_num(parts[k]) / MIB
        ax.bar(xs, values, 0.8, bottom=bottom, color=MEMORY_COLOURS[i % len(MEMORY_COLOURS)], label=k)
        bottom += values
    ax.scatter(xs, totals / MIB, marker="_", s=300, color="black", zorder=3, label="total (measured peak)")
    hatch_fusion(ax, xs, cells, bottom)
    label_bars(ax, rs, xs, cells, groups, centres)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_xlabel("precision (top) · fusion on: dotted outline · cell key (below; see the table under the figure)",
                  fontsize=9)
    ax.set_title(f"Peak memory by category — {rs.machine_label()}\n"
                 "categories peak at different times, so their sum can exceed the total", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return Drawn(fig, key_cells=[c.cell_id for c in cells])


def hatch_fusion(ax, xs, cells, heights):
    """Outline fused cells so the memory chart tells fusion on from off without colour."""
    labelled = False
    for x, cell, h in zip(xs, cells, heights):
        if cell.setting("fusion") == "on":
            ax.bar(x, h, 0.8, fill=False, edgecolor="black", ls=":", lw=1.2,
                   label=None if labelled else "fusion on (dotted outline)")
            labelled = True


def stacked_repeats(series):
    """Per-repeat arrays truncated to a common length as a 2-D array (repeats x steps)."""
    series = [s for s in series if s.size]
    if not series:
        return np.zeros((0, 0))
    n = min(s.size for s in series)
    return np.vstack([s[:n] for s in series])


def draw_band(ax, x, values, colour, label, ls="-"):
    """Mean line with a min..max band over repeats."""
    with warnings.catch_warnings():          # all-NaN columns (a diverged step) are expected
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, lo, hi = np.nanmean(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)
    ax.plot(x, mean, color=colour, lw=1.4, ls=ls, label=label)
    if values.shape[0] > 1:
        ax.fill_between(x, lo, hi, color=colour, alpha=0.18, lw=0)


def convergence_rows(rs):
    """The convergence figure's panel rows: [(model kind, precision, [cells])], one per model
    and precision, so that losses of different models (different tasks, different scales)
    never share a panel."""
    rows = []
    for cell in display_order(rs):
        if not stacked_repeats(cell.series("loss")).size:
            continue
        this = (cell.model_kind, cell.setting("precision"))
        if rows and rows[-1][:2] == this:
            rows[-1][2].append(cell)
        else:
            rows.append((*this, [cell]))
    return rows


def use_log_loss(cells):
    """A log loss axis when the losses of these cells span more than 5x."""
    values = np.concatenate([stacked_repeats(c.series("loss")).ravel() for c in cells])
    values = values[np.isfinite(values)]
    return bool(values.size and values.min() > 0 and values.max() / values.min() > 5)


def plot_convergence(rs):
    """Loss vs step and vs wall time, one row per model and precision, with the baseline for reference
    in the rows of its model. Rows of one model share the loss axis; other models get their own."""
    rows = convergence_rows(rs)
    if not rows:
        raise Skip("no cell recorded a loss curve")
    base = rs.baseline()
    keys = cell_keys(rs)
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 2.9 * len(rows) + 0.8), squeeze=False)
    first_of_model, log_y = {}, {}
    for model in dict.fromkeys(m for m, _, _ in rows):
        log_y[model] = use_log_loss([c for m, _, members in rows if m == model for c in members])
    for row, (model, precision, members) in enumerate(rows):
        ax_step, ax_wall = axes[row]
        if model in first_of_model:
            ax_step.sharey(first_of_model[model])
        else:
            first_of_model[model] = ax_step
        ax_wall.sharey(ax_step)
        labels = cell_labels(rs, members)
        lines = []
        if base is not None and base.model_kind == model and base not in members:
            lines.append((base, "#888888", ":", f"{keys[base.cell_id]}: reference, {short_label(rs, base)} (baseline)"))
        for i, cell in enumerate(members):
            label = f"{keys[cell.cell_id]}: {clip(labels[cell.cell_id])}" + (" (baseline)" if cell is base else "")
            lines.append((cell, f"C{i}", "-", label))
        walls = 0
        for cell, colour, ls, label in lines:
            loss = stacked_repeats(cell.series("loss"))
            if not loss.size:
                continue
            steps = np.arange(loss.shape[1])
            draw_band(ax_step, steps, loss, colour, label, ls)
            wall = stacked_repeats(cell.series("wall_time_s"))
            if wall.size:
                n = min(wall.shape[1], loss.shape[1])
                draw_band(ax_wall, np.nanmean(wall[:, :n], 0), loss[:, :n], colour, label, ls)
                walls += 1
        if not walls:
            ax_wall.text(0.5, 0.5, "wall_time_s not recorded", transform=ax_wall.transAxes,
                         ha="center", va="center", color="#888888")
        name = f"{model} · {precision}" if several_models(rs) else precision
        ax_step.set_title(f"{name}: loss vs step", fontsize=10)
        ax_wall.set_title(f"{name}: loss vs wall time", fontsize=10)
        ax_step.set_ylabel("training loss")
        ax_step.legend(fontsize=7)
        for ax in (ax_step, ax_wall):
            ax.grid(alpha=0.3)
            if log_y[model]:
                ax.set_yscale("log")
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
                ax.yaxis.set_major_formatter(PLAIN)
                ax.yaxis.set_minor_formatter(NullFormatter())
        ax_wall.tick_params(labelleft=False)
    axes[-1][0].set_xlabel("optimizer step")
    axes[-1][1].set_xlabel("wall time since first step (s, mean over repeats)")
    fig.suptitle(f"Convergence — {rs.machine_label()} (line: mean over repeats, band: min..max)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 / fig.get_figheight()))
    return fig


def loss_scale_cells(rs):
    """Cells whose loss scale is worth drawing: those that scale the loss or skipped a step
    (an unscaled cell that never skipped is a flat line at 1)."""
    return [c for c in display_order(rs) if c.loss_scale_mode() != "none" or c.any_skipped()]


def plot_loss_scale(rs):
    """Loss scale per step for cells that scale or skip, skipped steps marked; below it, one panel
    per fp8 cell with its per-tensor FP8 scales.

    Two kinds of panels rather than one axis: a loss scale multiplies the loss (and so every
    gradient) once, an FP8 scale multiplies one tensor before it is rounded to FP8; both are
    powers of two but they answer different questions, so they never share an axis.
    """
    ls_cells = loss_scale_cells(rs)
    fp8_cells = [c for c in display_order(rs) if c.fp8_tensors()]
    if not ls_cells and not fp8_cells:
        raise Skip("every cell uses loss_scale none, no optimizer step was skipped and no cell recorded FP8 "
                   "scales")
    heights = [4.5] * bool(ls_cells) + [3.6] * len(fp8_cells)
    fig, axes = plt.subplots(len(heights), 1, figsize=(10, sum(heights)), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    axes = list(axes[:, 0])
    if ls_cells:
        draw_loss_scales(axes.pop(0), rs, ls_cells)
    machine = "" if ls_cells else f" — {rs.machine_label()}"     # the top panel's title names it otherwise
    keys, labels = cell_keys(rs), cell_labels(rs, fp8_cells)
    for ax, cell in zip(axes, fp8_cells):
        draw_fp8_scales(ax, cell)
        ax.set_title(f"FP8 scale per tensor, {keys[cell.cell_id]}: {clip(labels[cell.cell_id], 60)}{machine}\n"
                     "line: median over layers (and repeats), band: min..max; points: sampled steps", fontsize=10)
    fig.axes[-1].set_xlabel("optimizer step")
    fig.tight_layout()
    return fig


def draw_loss_scales(ax, rs, cells):
    """The loss scale per step of each cell on a log2 axis, skipped steps marked with red crosses."""
    marked = False
    keys, labels = cell_keys(rs), cell_labels(rs, cells)
    for i, cell in enumerate(cells):
        label = f"{keys[cell.cell_id]}: {clip(labels[cell.cell_id])}"
        if "loss_scale" not in label:
            label += f", loss scale {cell.loss_scale_mode()}"
        scales, skipped = cell.series("loss_scale"), cell.series("skipped")
        for r, scale in enumerate(scales):
            if not scale.size:
                continue
            steps = np.arange(scale.size)
            ax.step(steps, scale, where="post", color=f"C{i}", lw=1.3 if r == 0 else 0.6, alpha=1 if r == 0 else 0.5,
                    label=label if r == 0 else None)
            if r < len(skipped) and skipped[r].size:
                hit = np.nonzero(np.nan_to_num(skipped[r][:scale.size]) > 0)[0]
                if hit.size:
                    ax.scatter(hit, scale[hit], marker="x", color="red", zorder=3,
                               label=None if marked else "skipped step (non-finite gradients)")
                    marked = True
    ax.set_yscale("log", base=2)
    ax.set_ylabel("loss scale (log₂ axis)")
    ax.set_title(f"Loss scale per step — {rs.machine_label()} (thin lines: further repeats)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


# Transformer Engine's roles of a linear layer's FP8 tensors, in the order a step quantizes them.
FP8_ROLES = ("input", "weight", "grad_output")
FP8_ROLE_COLOURS = {"input": "#1f77b4", "weight": "#2ca02c", "grad_output": "#d62728"}


@dataclass
class Fp8Role:
    """One role's FP8 tensors in one cell (every layer's "linearN.<role>"): their formats,
    how many there are, and every recorded scale per sampled step (layers and repeats pooled)."""
    formats: set = field(default_factory=set)
    names: set = field(default_factory=set)
    scales: dict = field(default_factory=dict)      # step -> [scale, ...]


def fp8_roles(cell):
    """{role: Fp8Role} in FP8_ROLES order (unknown roles after them), from the cell's numerics samples.

    Grouped by role because a BERT has 10 linear layers, i.e. 30 tensors: thirty lines
    would be unreadable, while the layers of one role share a format and mostly a scale."""
    roles = {}
    for _, step, tensor in cell.fp8_tensors():
        scale = mr.to_float(tensor.get("scale"))
        if not (isinstance(step, (int, float)) and mr.finite(scale) and scale > 0):
            continue
        name = str(tensor.get("name", ""))
        role = roles.setdefault(name.rsplit(".", 1)[-1], Fp8Role())
        role.formats.add(str(tensor.get("format", "?")).upper())
        role.names.add(name)
        role.scales.setdefault(step, []).append(scale)
    order = {r: i for i, r in enumerate(FP8_ROLES)}
    return dict(sorted(roles.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def log2_median(values):
    """The median of positive values taken on log2 (so two scales 2^6 and 2^7 give 2^6.5, not 96)."""
    return float(np.exp2(np.median(np.log2(values))))


def draw_fp8_scales(ax, cell):
    """One role per colour: the median scale over layers (and repeats) at each sampled step,
    with a min..max band; the legend says each role's format and how many tensors it pools."""
    for i, (role, data) in enumerate(fp8_roles(cell).items()):
        steps = sorted(data.scales)
        lo = [min(data.scales[s]) for s in steps]
        hi = [max(data.scales[s]) for s in steps]
        mid = [log2_median(data.scales[s]) for s in steps]
        colour = FP8_ROLE_COLOURS.get(role, f"C{i + 3}")
        label = f"{role} ({'/'.join(sorted(data.formats))}), {len(data.names)} tensor(s)"
        ax.plot(steps, mid, color=colour, lw=1.4, marker="o", ms=3, label=label)
        ax.fill_between(steps, lo, hi, color=colour, alpha=0.18, lw=0)
    ax.set_yscale("log", base=2)
    ax.set_ylabel("FP8 scale (log₂ axis)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def histogram_at(samples, step):
    """Sum of grad log2 histograms over repeats at `step`, as (edges, fraction)."""
    total, lo = None, None
    for _, s in samples:
        if s.get("step") != step:
            continue
        hist = ((s.get("grads") or {}).get("log2_hist")) or {}
        counts = mr.to_array(hist.get("counts"))
        if not counts.size or not mr.finite(mr.to_float(hist.get("lo"))):
            continue
        if total is None:
            total, lo = np.nan_to_num(counts), int(hist["lo"])
        elif int(hist["lo"]) == lo and counts.size == total.size:
            total = total + np.nan_to_num(counts)
    if total is None or total.sum() <= 0:
        return None
    return np.arange(lo, lo + total.size + 1), total / total.sum()


def shade_fp16_zones(ax):
    """Mark where fp16 loses gradients: underflow, subnormals, overflow. Returns legend handles."""
    return [
        ax.axvspan(-200, mr.FP16_MIN_SUBNORMAL_LOG2, color="#d62728", alpha=0.15,
                   label="fp16 underflow (< 2⁻²⁴ flushes to 0)"),
        ax.axvspan(mr.FP16_MIN_SUBNORMAL_LOG2, mr.FP16_MIN_NORMAL_LOG2, color="#ff7f0e", alpha=0.10,
                   label="fp16 subnormal (2⁻²⁴..2⁻¹⁴, reduced precision)"),
        ax.axvline(mr.FP16_MIN_NORMAL_LOG2, color="#ff7f0e", ls="--", lw=1,
                   label="2⁻¹⁴ normal/subnormal boundary"),
        ax.axvspan(mr.FP16_MAX_LOG2, 200, color="#9467bd", alpha=0.12, label="fp16 overflow (≥ 2¹⁶ → inf)"),
    ]


# E5M2 (OCP FP8, Transformer Engine's gradient format): largest finite 57344 = 1.75 x 2^15,
# smallest normal 2^-14, smallest subnormal 2^-16.
E5M2_MAX_LOG2 = math.log2(57344.0)
E5M2_MIN_NORMAL_LOG2 = -14
E5M2_MIN_SUBNORMAL_LOG2 = -16


def e5m2_scales_log2(cell, step):
    """log2 of the scales of the cell's E5M2 tensors (its grad_outputs) sampled at `step`; [] if none."""
    return [math.log2(v) for _, s, t in cell.fp8_tensors()
            if s == step and str(t.get("format", "")).lower() == "e5m2"
            for v in [mr.to_float(t.get("scale"))] if mr.finite(v) and v > 0]


def shade_e5m2_zones(ax, shift):
    """Mark where E5M2 loses gradients, moved left by `shift` = log2 of the tensor's FP8 scale.

    The histogram shows gradients as stored, before FP8 quantization multiplies them by
    their per-tensor scale s; a stored value g is rounded as g·s, so E5M2's limits sit at
    limit/s on this axis. At scale 1 the zones would be off by s (2^22..2^30 in a BERT-tiny
    run), which would show well-scaled gradients as underflowing. Returns legend handles."""
    sub, normal, top = (E5M2_MIN_SUBNORMAL_LOG2 - shift, E5M2_MIN_NORMAL_LOG2 - shift, E5M2_MAX_LOG2 - shift)
    return [
        ax.axvspan(-200, sub, color="#d62728", alpha=0.15, label="E5M2 underflow (< 2⁻¹⁶/s → 0)"),
        ax.axvspan(sub, normal, color="#ff7f0e", alpha=0.10, label="E5M2 subnormal (2⁻¹⁶/s..2⁻¹⁴/s)"),
        ax.axvspan(top, 200, color="#9467bd", alpha=0.12, label="E5M2 saturates (≥ 57344/s → ±57344)"),
    ]


def e5m2_legend_title(scales_log2, step):
    """Which scale s the E5M2 zones of a panel use, and how far the layers' own scales spread:
    each layer's zones sit where its own scale puts them, so the median's are indicative."""
    def power(v):
        return f"$2^{{{v:g}}}$"
    return (f"E5M2 zones at grad_output scale s = {power(float(np.median(scales_log2)))}\n"
            f"(median over layers at step {step};\nthe layers' scales span {power(min(scales_log2))}.."
            f"{power(max(scales_log2))})")


def sampled_steps(samples):
    """The distinct steps at which numerics were sampled, ascending."""
    return sorted({s.get("step") for _, s in samples if isinstance(s.get("step"), (int, float))})


def underflow_note(samples, step):
    """Title suffix "— underflow x% at step s" from the runner's own underflow fraction, if recorded."""
    values = [mr.to_float((s.get("grads") or {}).get("underflow_fraction")) for _, s in samples if s.get("step") == step]
    values = [v for v in values if mr.finite(v)]
    return f" — underflow {100 * np.mean(values):.2f}% at step {step}" if values else ""


def plot_grad_histograms(rs):
    """Gradient exponent histograms (first and last sampled step) per cell with numerics, with the
    zones where fp16 loses gradients, or for an fp8 cell where E5M2 at its recorded scales does."""
    cells = [c for c in display_order(rs) if c.numerics_samples()]
    if not cells:
        raise Skip("no repeat recorded numerics (gradient histograms)")
    ncols = min(2, len(cells))
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 3.3 * nrows + 1.0), squeeze=False)
    flat = [ax for row in axes for ax in row]
    xmin, xmax, fp16_handles = mr.FP16_MIN_SUBNORMAL_LOG2 - 4, mr.FP16_MAX_LOG2 + 2, []
    keys, labels = cell_keys(rs), cell_labels(rs, cells)
    for ax, cell in zip(flat, cells):
        samples = cell.numerics_samples()
        steps = sampled_steps(samples)
        # the zones of the last sampled step's scales: the state training has reached
        e5m2 = e5m2_scales_log2(cell, steps[-1]) if steps else []
        if e5m2:
            shift = float(np.median(e5m2))
            zone_handles, zone_title = shade_e5m2_zones(ax, shift), e5m2_legend_title(e5m2, steps[-1])
            xmin, xmax = min(xmin, E5M2_MIN_SUBNORMAL_LOG2 - shift - 4), max(xmax, E5M2_MAX_LOG2 - shift + 2)
        else:
            fp16_handles, zone_handles, zone_title = shade_fp16_zones(ax), [], None
        lines = []
        for step, colour in zip(dict.fromkeys([steps[0], steps[-1]]) if steps else [], ("#1f77b4", "#2ca02c")):
            h = histogram_at(samples, step)
            if h is None:
                continue
            edges, frac = h
            lines.append(ax.stairs(frac, edges, color=colour, lw=1.5, label=f"step {step}"))
            nz = np.nonzero(frac)[0]
            if nz.size:
                xmin, xmax = min(xmin, edges[nz[0]]), max(xmax, edges[nz[-1] + 1])
        note = underflow_note(samples, steps[-1]) if steps else ""
        if "bf16" in cell.setting("precision"):
            note += "\n(bf16 has fp32's exponent range; fp16 zones shown for reference)"
        ax.set_title(f"{keys[cell.cell_id]}: {clip(labels[cell.cell_id], 60)}" + note, fontsize=9)
        ax.set_xlabel("log₂ |gradient|  (bin i = [lo+i, lo+i+1))")
        ax.set_ylabel("fraction of gradient values")
        if lines or zone_handles:
            ax.legend(handles=lines + zone_handles, title=zone_title, fontsize=7, title_fontsize=7,
                      loc="upper right")
    for ax in flat[len(cells):]:
        ax.set_visible(False)
    for ax in flat:
        ax.set_xlim(xmin, xmax)
    fig.suptitle(f"Gradient exponent histograms (summed over repeats) — {rs.machine_label()}", fontsize=11)
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0.35 / height if fp16_handles else 0, 1, 1 - 0.25 / height))
    if fp16_handles:
        fig.legend(handles=fp16_handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    return fig


def plot_checkpointing(rs):
    """Activation memory vs step time, one point per checkpointing mode, lines join comparable cells."""
    modes = {c.setting("checkpointing") for c in rs.cells}
    if len(modes) < 2:
        raise Skip("the checkpointing axis does not vary in this run")
    others = [k for k in rs.axis_keys() if k != "checkpointing"]
    groups = {}
    for cell in display_order(rs):
        groups.setdefault(tuple(cell.setting(k) for k in others), []).append(cell)
    varied = {k: v for k, v in groups.items() if len({c.setting("checkpointing") for c in v}) > 1}
    groups = varied or groups
    fig, ax = plt.subplots(figsize=(9, 5))
    plotted = 0
    firsts = [members[0] for members in groups.values()]
    labels = cell_labels(rs, firsts, skip=("precision", "checkpointing"))
    for i, members in enumerate(groups.values()):
        pts = [(c.summary_value("step_time_ms.median"), c.memory("activations") / MIB, c) for c in members]
        pts = [p for p in pts if mr.finite(p[0]) and mr.finite(p[1])]
        if not pts:
            continue
        pts.sort(key=lambda p: p[0])
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        lo = [max(0.0, p[0] - p[2].summary_value("step_time_ms.p10")) for p in pts]
        hi = [max(0.0, p[2].summary_value("step_time_ms.p90") - p[0]) for p in pts]
        label = clip(labels[members[0].cell_id])
        ax.errorbar(xs, ys, xerr=[np.nan_to_num(lo), np.nan_to_num(hi)], marker="o", color=f"C{i}",
                    capsize=3, label=label)
        for x, y, c in pts:
            ax.annotate(c.setting("checkpointing"), (x, y), xytext=(6, 4), textcoords="offset points", fontsize=8)
        plotted += 1
    if not plotted:
        plt.close(fig)
        raise Skip("no cell recorded both activation memory and step time")
    ax.set_xlabel("step time, median (ms; whiskers p10..p90)")
    ax.set_ylabel("peak activation memory (MiB)")
    ax.set_title(f"Activation checkpointing trade-off — {rs.machine_label()}\n"
                 "down = less memory, right = slower; labels are checkpointing modes", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="cells (other settings)", title_fontsize=8)
    return fig


PLOTS = [
    ("speedup.png", "Throughput speedup", plot_speedup,
     "Samples per second relative to the baseline cell. Bars are grouped by precision (top axis), "
     "coloured by fusion and named by cell key (table below). Whiskers are the speed-up's confidence "
     "interval where the runner recorded one (older result sets: the slowest to the fastest repeat); a "
     "faded bar's interval contains 1, so it is no measurable difference from the baseline. Hatched bars "
     "run on an emulated code path on this device; red labels mark noisy cells. Cells of another model "
     "than the baseline's have no speed-up and are left out."),
    ("memory.png", "Peak memory", plot_memory,
     "Peak bytes per category, bars named by cell key (table below); the black tick is the measured peak "
     "of the whole process. Master "
     "weights, gradients and optimizer state scale with the parameter count; activations with batch size "
     "and depth (and shrink with checkpointing)."),
    ("convergence.png", "Convergence", plot_convergence,
     "Training loss per optimizer step (left) and against wall-clock time (right), one row per model and "
     "precision; rows of one model share the loss axis, another model gets its own. Legends start with the "
     "cell key. The dotted grey line is the baseline cell for reference (in its model's rows only). A "
     "mixed-precision run that tracks the reference on the left and sits left of it on the right converges "
     "just as well, faster."),
    ("loss_scale.png", "Loss scale", plot_loss_scale,
     "The loss scale used at every step; red crosses are steps whose gradients were non-finite and whose "
     "optimizer update was skipped (the scale backs off there). Each fp8 cell gets a panel of its own "
     "(under the loss scales, where some cell scales the loss): the FP8 scale of every linear layer's "
     "input and weight (E4M3) and grad_output (E5M2) at the sampled steps, one colour per role, the line "
     "the median over layers, the band their min..max. "
     "A delayed scale follows the tensor's recent amax (the power of two at or below FP8 max ÷ amax, "
     "less the margin), so a rising grad_output scale means shrinking gradients. The two kinds of scale "
     "never share an axis: a loss scale multiplies every gradient, an FP8 scale one tensor."),
    ("grad_hist.png", "Gradient exponents", plot_grad_histograms,
     "Where gradient magnitudes sit on the binary exponent axis, at the first and last sampled step. "
     "Mass in the red zone flushes to zero in fp16, the orange zone loses precision (subnormals); a loss "
     "scale shifts the whole histogram right. An fp8 cell's panel marks E5M2's zones instead (underflow "
     "below 2⁻¹⁶, subnormals to 2⁻¹⁴, saturation from 57344), moved left by its grad_output FP8 scale s: "
     "the histogram shows gradients as stored, before quantization multiplies each tensor by its own "
     "scale, so at scale 1 the zones would sit a factor s too far right. Each layer has its own scale; "
     "the zones use the median over layers at the last sampled step (the legend gives it and the "
     "layers' spread), so they are indicative for the layers near the median. E4M3 is not marked: it "
     "holds inputs and weights, no gradient."),
    ("checkpointing.png", "Checkpointing trade-off", plot_checkpointing,
     "Each point is a checkpointing mode: how much activation memory it saves against how much step time "
     "it costs (recomputation). Lines join cells that differ only in checkpointing."),
]


def render_plots(rs, out_dir):
    """Draw every plot, saving those with data and recording why the others were skipped."""
    results = []
    for name, title, fn, caption in PLOTS:
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            os.remove(path)                      # never leave a stale figure from an older run
        try:
            drawn = fn(rs)
        except Skip as why:
            results.append(Plot(name, title, caption, skipped=str(why)))
            continue
        if not isinstance(drawn, Drawn):
            drawn = Drawn(drawn)
        png = io.BytesIO()
        drawn.fig.savefig(png, format="png", dpi=DPI, bbox_inches="tight")
        mo.write_output(path, png.getvalue())  # atomic: a reader never sees half a figure
        plt.close(drawn.fig)
        results.append(Plot(name, title, caption, file=path, notes=list(drawn.notes), key_cells=drawn.key_cells))
    return results
