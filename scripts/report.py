#!/usr/bin/python3
"""Turn an mpbench result directory into plots, a self-contained HTML page and Markdown.

Usage: report.py RESULTS_DIR [--out DIR]        (default DIR: RESULTS_DIR/report)

Writes DIR/*.png, DIR/index.html (images embedded as data URIs, so the one
file can be mailed or attached to a CI run) and DIR/report.md (the summary
table, images referenced by file name). A plot whose data the run did not
record (numerics, a varying checkpointing axis, a loss scale) is left out
with a note in the report instead of failing. See docs/REPORTS.md.
"""

import argparse
import base64
import html
import math
import os
import sys
import warnings
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpbench_results as mr  # noqa: E402

DPI = 110
MIB = float(1 << 20)
PLAIN = FuncFormatter(lambda v, _: f"{v:g}")     # log axes without 10^x tick labels
FUSION_COLOURS = {"off": "#4C72B0", "on": "#DD8452"}
MEMORY_COLOURS = {"params": "#4C72B0", "grads": "#55A868", "optimizer": "#C44E52",
                  "activations": "#8172B2", "workspace": "#CCB974"}


# ---------------------------------------------------------------- labelling ---

def reference_cell(rs):
    """The cell other cells are described relative to: the baseline, else the first."""
    return rs.baseline() or (rs.cells[0] if rs.cells else None)


def describe(rs, cell, skip=("precision",)):
    """Settings that set `cell` apart from the reference cell, as "key=value" parts.

    Labels stay short ("fusion=on") instead of repeating every axis, and
    include cells that only set one extra key read naturally.
    """
    ref = reference_cell(rs)
    return [f"{k}={cell.setting(k)}" for k in rs.varying_keys()
            if k not in skip and (ref is None or cell.setting(k) != ref.setting(k))]


def short_label(rs, cell, skip=("precision",), sep=" "):
    """The bare precision value, then the other settings that distinguish the cell
    (those named in `skip` left out; precision is always shown bare, never as key=value)."""
    parts = ([cell.setting("precision")] if "precision" in skip else []) + describe(rs, cell, skip)
    return sep.join(parts) or cell.cell_id


def display_order(rs):
    """Cells grouped by precision (fixed order), then other axes, fusion off before on."""
    others = [k for k in rs.axis_keys() if k not in ("precision", "fusion")]
    run_order = {c.cell_id: i for i, c in enumerate(rs.cells)}

    def key(cell):
        return (mr.precision_sort_key(cell.setting("precision")),
                tuple(describe(rs, cell, skip=("precision", "fusion"))) if others else (),
                cell.setting("fusion") != "off", run_order[cell.cell_id])
    return sorted(rs.cells, key=key)


def precision_groups(cells):
    """[(precision, [cells...]), ...] keeping the order of `cells`."""
    groups = []
    for cell in cells:
        p = cell.setting("precision")
        if groups and groups[-1][0] == p:
            groups[-1][1].append(cell)
        else:
            groups.append((p, [cell]))
    return groups


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
    """Precision names along the top; below each bar only what sets it apart beyond
    precision and fusion (fusion is the bar colour), so ticks stay short."""
    ax.set_xticks(xs, [", ".join(describe(rs, c, skip=("precision", "fusion"))) for c in cells],
                  rotation=25, ha="right", fontsize=8)
    pad = max(0.9, (6 - len(xs)) / 2)          # a lone bar should not fill the whole width
    ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    top = ax.secondary_xaxis("top")
    top.set_xticks(centres, [g for g, _ in groups], fontweight="bold")
    top.tick_params(length=0)


# -------------------------------------------------------------------- plots ---

@dataclass
class Plot:
    """One report figure: the PNG it was saved to, or why it was left out."""
    name: str
    title: str
    caption: str
    file: str = None
    skipped: str = None


class Skip(Exception):
    """Raised by a plot function when the data it needs was not recorded."""


def plot_speedup(rs):
    """Bars of throughput speedup, error bars = min..max over repeats."""
    base = rs.baseline()
    if base is None:
        raise Skip("no cell is flagged is_baseline, so there is nothing to take a speedup against")
    base_sps = base.summary_value("samples_per_s")
    if not mr.finite(base_sps) or base_sps <= 0:
        raise Skip(f"the baseline cell {base.cell_id} has no throughput")
    cells = display_order(rs)
    groups = precision_groups(cells)
    xs, centres = bar_positions(groups)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(cells) + 2.5), 4.8))
    seen = set()
    for x, cell in zip(xs, cells):
        sps = cell.summary_value("samples_per_s")
        height = sps / base_sps if mr.finite(sps) else math.nan
        reps = cell.summary_list("samples_per_s_repeats") / base_sps
        reps = reps[np.isfinite(reps)]
        fusion = cell.setting("fusion")
        label = f"fusion {fusion}" if fusion not in seen else None
        seen.add(fusion)
        emulated = bool(cell.emulated_ops())
        ax.bar(x, height, 0.8, color=FUSION_COLOURS.get(fusion, "#999999"), label=label,
               hatch="//" if emulated else None, edgecolor="white" if emulated else None)
        if reps.size and mr.finite(height):
            err = [[max(0.0, height - reps.min())], [max(0.0, reps.max() - height)]]
            ax.errorbar(x, height, yerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
        if mr.finite(height):
            ax.annotate(f"{height:.2f}×", (x, height), xytext=(0, 4 if not reps.size else 10),
                        textcoords="offset points", ha="center", fontsize=8)
    if any(c.emulated_ops() for c in cells):
        ax.bar(math.nan, math.nan, color="#bbbbbb", hatch="//", edgecolor="white", label="emulated on this device")
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label=f"baseline ({base.cell_id})")
    label_bars(ax, rs, xs, cells, groups, centres)
    ax.set_ylabel("speedup (×, samples/s ÷ baseline)")
    ax.set_xlabel("precision (top) · fusion (colour) · other settings that differ from the baseline (below)",
                  fontsize=9)
    ax.set_title(f"Throughput speedup vs baseline — {rs.machine_label()}\n"
                 "bar: all-repeat median; whiskers: slowest..fastest repeat", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.margins(y=0.15)
    return fig


def plot_memory(rs):
    """Stacked per-category peak memory per cell, with the measured total marked."""
    cells = display_order(rs)
    totals = np.array([c.memory("total") for c in cells])
    parts = {k: np.array([c.memory(k) for c in cells]) for k in mr.MEMORY_CATEGORIES}
    if not np.any(np.nan_to_num(totals) > 0) and not any(np.any(np.nan_to_num(v) > 0) for v in parts.values()):
        raise Skip("the run recorded no peak-memory numbers")
    groups = precision_groups(cells)
    xs, centres = bar_positions(groups)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(cells) + 2.5), 4.8))
    bottom = np.zeros(len(cells))
    for k in mr.MEMORY_CATEGORIES:
        values = np.nan_to_num(parts[k]) / MIB
        ax.bar(xs, values, 0.8, bottom=bottom, color=MEMORY_COLOURS[k], label=k)
        bottom += values
    ax.scatter(xs, totals / MIB, marker="_", s=300, color="black", zorder=3, label="total (measured peak)")
    hatch_fusion(ax, xs, cells, bottom)
    label_bars(ax, rs, xs, cells, groups, centres)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_xlabel("precision (top) · fusion on: dotted outline · other settings that differ from the baseline",
                  fontsize=9)
    ax.set_title(f"Peak memory by category — {rs.machine_label()}\n"
                 "categories peak at different times, so their sum can exceed the total", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


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


def plot_convergence(rs):
    """Loss vs step and vs wall time, one row per precision, with the fp32/baseline reference."""
    cells = [c for c in display_order(rs) if stacked_repeats(c.series("loss")).size]
    if not cells:
        raise Skip("no cell recorded a loss curve")
    groups = precision_groups(cells)
    ref = reference_cell(rs)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 2.9 * len(groups) + 0.8), squeeze=False,
                             sharey=True)
    all_loss = np.concatenate([stacked_repeats(c.series("loss")).ravel() for c in cells])
    all_loss = all_loss[np.isfinite(all_loss)]
    log_y = all_loss.size and all_loss.min() > 0 and all_loss.max() / all_loss.min() > 5
    for row, (precision, members) in enumerate(groups):
        ax_step, ax_wall = axes[row]
        if ref is not None and ref.setting("precision") != precision:
            members_plus = [(ref, "#888888", ":", f"reference: {short_label(rs, ref)}")]
        else:
            members_plus = []
        for i, cell in enumerate(members):
            label = f"loss scale {cell.loss_scale_mode()}"
            extra = describe(rs, cell, skip=("precision", "loss_scale"))
            members_plus.append((cell, f"C{i}", "-", ", ".join([label] + extra)))
        walls = 0
        for cell, colour, ls, label in members_plus:
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
        ax_step.set_title(f"{precision}: loss vs step", fontsize=10)
        ax_wall.set_title(f"{precision}: loss vs wall time", fontsize=10)
        ax_step.set_ylabel("training loss")
        ax_step.legend(fontsize=7)
        for ax in (ax_step, ax_wall):
            ax.grid(alpha=0.3)
            if log_y:
                ax.set_yscale("log")
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
                ax.yaxis.set_major_formatter(PLAIN)
                ax.yaxis.set_minor_formatter(NullFormatter())
    axes[-1][0].set_xlabel("optimizer step")
    axes[-1][1].set_xlabel("wall time since first step (s, mean over repeats)")
    fig.suptitle(f"Convergence — {rs.machine_label()} (line: mean over repeats, band: min..max)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 / fig.get_figheight()))
    return fig


def plot_loss_scale(rs):
    """Loss scale per step for cells that scale or skip, skipped steps marked."""
    cells = [c for c in display_order(rs) if c.loss_scale_mode() != "none" or c.any_skipped()]
    if not cells:
        raise Skip("every cell uses loss_scale none and no optimizer step was skipped")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    marked = False
    for i, cell in enumerate(cells):
        scales, skipped = cell.series("loss_scale"), cell.series("skipped")
        for r, scale in enumerate(scales):
            if not scale.size:
                continue
            steps = np.arange(scale.size)
            ax.step(steps, scale, where="post", color=f"C{i}", lw=1.3 if r == 0 else 0.6, alpha=1 if r == 0 else 0.5,
                    label=f"{short_label(rs, cell, skip=('precision', 'loss_scale'))}, "
                          f"loss scale {cell.loss_scale_mode()}" if r == 0 else None)
            if r < len(skipped) and skipped[r].size:
                hit = np.nonzero(np.nan_to_num(skipped[r][:scale.size]) > 0)[0]
                if hit.size:
                    ax.scatter(hit, scale[hit], marker="x", color="red", zorder=3,
                               label=None if marked else "skipped step (non-finite gradients)")
                    marked = True
    ax.set_yscale("log", base=2)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss scale (log₂ axis)")
    ax.set_title(f"Loss scale per step — {rs.machine_label()} (thin lines: further repeats)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


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


def sampled_steps(samples):
    """The distinct steps at which numerics were sampled, ascending."""
    return sorted({s.get("step") for _, s in samples if isinstance(s.get("step"), (int, float))})


def underflow_note(samples, step):
    """Title suffix "— underflow x% at step s" from the runner's own underflow fraction, if recorded."""
    values = [mr.to_float((s.get("grads") or {}).get("underflow_fraction")) for _, s in samples if s.get("step") == step]
    values = [v for v in values if mr.finite(v)]
    return f" — underflow {100 * np.mean(values):.2f}% at step {step}" if values else ""


def plot_grad_histograms(rs):
    """Gradient exponent histograms (first and last sampled step) per cell with numerics."""
    cells = [c for c in display_order(rs) if c.numerics_samples()]
    if not cells:
        raise Skip("no repeat recorded numerics (gradient histograms)")
    ncols = min(2, len(cells))
    nrows = math.ceil(len(cells) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 3.3 * nrows + 1.0), squeeze=False)
    flat = [ax for row in axes for ax in row]
    xmin, xmax, zone_handles = math.inf, -math.inf, []
    for ax, cell in zip(flat, cells):
        samples = cell.numerics_samples()
        steps = sampled_steps(samples)
        zone_handles = shade_fp16_zones(ax)
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
        ax.set_title(short_label(rs, cell) + note, fontsize=9)
        ax.set_xlabel("log₂ |gradient|  (bin i = [lo+i, lo+i+1))")
        ax.set_ylabel("fraction of gradient values")
        if lines:
            ax.legend(handles=lines, fontsize=7, loc="upper right")
    for ax in flat[len(cells):]:
        ax.set_visible(False)
    if math.isfinite(xmin):
        for ax in flat:
            ax.set_xlim(min(xmin, mr.FP16_MIN_SUBNORMAL_LOG2 - 4), max(xmax, mr.FP16_MAX_LOG2 + 2))
    fig.suptitle(f"Gradient exponent histograms (summed over repeats) — {rs.machine_label()}", fontsize=11)
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0.35 / height, 1, 1 - 0.25 / height))
    fig.legend(handles=zone_handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
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
    for i, members in enumerate(groups.values()):
        pts = [(c.summary_value("step_time_ms.median"), c.memory("activations") / MIB, c) for c in members]
        pts = [p for p in pts if mr.finite(p[0]) and mr.finite(p[1])]
        if not pts:
            continue
        pts.sort(key=lambda p: p[0])
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        lo = [max(0.0, p[0] - p[2].summary_value("step_time_ms.p10")) for p in pts]
        hi = [max(0.0, p[2].summary_value("step_time_ms.p90") - p[0]) for p in pts]
        label = short_label(rs, members[0], skip=("precision", "checkpointing"))
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
     "Samples per second relative to the baseline cell. Bars are grouped by precision (top axis) and "
     "coloured by fusion; whiskers span the slowest to the fastest repeat. Hatched bars run on an "
     "emulated code path on this device."),
    ("memory.png", "Peak memory", plot_memory,
     "Peak bytes per category; the black tick is the measured peak of the whole process. Master "
     "weights, gradients and optimizer state scale with the parameter count; activations with batch size "
     "and depth (and shrink with checkpointing)."),
    ("convergence.png", "Convergence", plot_convergence,
     "Training loss per optimizer step (left) and against wall-clock time (right), one row per precision. "
     "The dotted grey line is the baseline cell for reference. A mixed-precision run that tracks the "
     "reference on the left and sits left of it on the right converges just as well, faster."),
    ("loss_scale.png", "Loss scale", plot_loss_scale,
     "The loss scale used at every step; red crosses are steps whose gradients were non-finite and whose "
     "optimizer update was skipped (the scale backs off there)."),
    ("grad_hist.png", "Gradient exponents", plot_grad_histograms,
     "Where gradient magnitudes sit on the binary exponent axis, at the first and last sampled step. "
     "Mass in the red zone flushes to zero in fp16, the orange zone loses precision (subnormals); a loss "
     "scale shifts the whole histogram right."),
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
            fig = fn(rs)
        except Skip as why:
            results.append(Plot(name, title, caption, skipped=str(why)))
            continue
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        plt.close(fig)
        results.append(Plot(name, title, caption, file=path))
    return results


# ------------------------------------------------------------------- tables ---

SUMMARY_COLUMNS = ["cell", "samples/s", "speedup", "step ms median", "p10", "p90", "GFLOP/s",
                   "% of ceiling", "peak memory", "final loss", "eval loss", "eval acc", "skipped steps"]


def speedup_text(rs, cell):
    """Speedup with the slowest..fastest repeat range, e.g. "1.45× (1.43–1.47)"."""
    base = rs.baseline()
    value = cell.summary_value("speedup")
    base_sps = base.summary_value("samples_per_s") if base else math.nan
    if not mr.finite(value) and mr.finite(base_sps) and base_sps > 0:
        value = cell.summary_value("samples_per_s") / base_sps
    if not mr.finite(value):
        return "—"
    reps = cell.summary_list("samples_per_s_repeats")
    reps = reps[np.isfinite(reps)]
    if reps.size > 1 and mr.finite(base_sps) and base_sps > 0:
        return f"{value:.2f}× ({reps.min() / base_sps:.2f}–{reps.max() / base_sps:.2f})"
    return f"{value:.2f}×"


def percent(value):
    return f"{100 * value:.1f}%" if mr.finite(value) else "—"


def summary_rows(rs):
    """One list of display strings per cell, in SUMMARY_COLUMNS order."""
    rows = []
    for c in display_order(rs):
        name = c.cell_id + (" (baseline)" if c.is_baseline else "") + (" (emulated)" if c.emulated_ops() else "")
        skipped = c.summary_value("skipped_steps")
        rows.append([
            name,
            mr.format_number(c.summary_value("samples_per_s")),
            speedup_text(rs, c),
            mr.format_number(c.summary_value("step_time_ms.median")),
            mr.format_number(c.summary_value("step_time_ms.p10")),
            mr.format_number(c.summary_value("step_time_ms.p90")),
            mr.format_number(c.summary_value("gflops")),
            percent(c.summary_value("ceiling_fraction")),
            mr.format_bytes(c.memory("total")),
            mr.format_number(c.summary_value("final_loss"), 4),
            mr.format_number(c.summary_value("eval_loss"), 4),
            percent(c.summary_value("eval_accuracy")),
            str(int(skipped)) if mr.finite(skipped) else "—",
        ])
    return rows


def machine_rows(rs):
    """(label, value) pairs describing where and with what the run happened."""
    m = rs.manifest
    device = m.get("device") or {}
    gpu = device.get("gpu") if isinstance(device.get("gpu"), dict) else None
    machine = m.get("machine") or {}
    rows = [
        ("experiment", rs.experiment), ("config", m.get("config_path")),
        ("config hash", m.get("config_hash")),
        ("started / finished", f"{m.get('started') or '?'} / {m.get('finished') or 'not finished'}"),
        ("mpbench / git", f"{m.get('mpbench_version') or '?'} / {m.get('git_commit') or '?'}"),
        ("device", f"{device.get('kind') or '?'}: {device.get('name') or '?'}"),
    ]
    if gpu:
        mem = gpu.get("memory_bytes")
        rows.append(("GPU", f"{gpu.get('name')} (compute capability {gpu.get('compute_capability')}, "
                            f"{mr.format_bytes(mem) if mem else '? memory'})"))
    ceilings = device.get("ceiling_gflops") or {}
    if ceilings:
        rows.append(("ceilings (GFLOP/s)", ", ".join(f"{k} {mr.format_number(v)}" for k, v in ceilings.items())))
    if machine:
        rows += [
            ("host", f"{machine.get('hostname') or '?'} — {machine.get('cpu_model') or '?'}, "
                     f"{machine.get('cores') or '?'} cores, {mr.format_bytes(machine.get('memory_bytes'))}"),
            ("OS", f"{machine.get('os') or '?'}, kernel {machine.get('kernel') or '?'}"),
        ]
    if m.get("compiler"):
        rows.append(("compiler", m["compiler"]))
    libs = {k: v for k, v in (m.get("libraries") or {}).items() if v}
    if libs:
        rows.append(("libraries", ", ".join(f"{k} {v}" for k, v in libs.items())))
    return [(k, "—" if v is None else str(v)) for k, v in rows]


def report_notes(rs, plots):
    """Things a reader must know before trusting the numbers."""
    notes = []
    if not rs.finished():
        notes.append("The run has not finished (manifest.json has no 'finished' time): results are partial.")
    missing = rs.missing_cells()
    if missing:
        notes.append(f"{len(missing)} planned cell(s) have no results: " + ", ".join(missing))
    if rs.baseline() is None:
        notes.append("No baseline cell: speedups are not available.")
    emulated = {}
    for c in display_order(rs):
        ops = c.emulated_ops()
        if ops:
            how = "; ".join(f"{op}: {v}" for op, v in ops.items())
            emulated.setdefault((c.setting("precision"), how), []).append(c.cell_id)
    for (precision, how), ids in emulated.items():
        notes.append(f"{precision} is emulated on this device ({how}) in {len(ids)} cell(s): its throughput "
                     "measures the emulation, not hardware support for that precision. Cells: " + "; ".join(ids))
    for p in plots:
        if p.skipped:
            notes.append(f"{p.title} plot left out: {p.skipped}.")
    return notes


# ------------------------------------------------------------------ writers ---

IMAGE_CHECK_SCRIPT = """
<script>
// Sets the body attribute data-images-loaded to "loaded/total" as images decode, so a headless browser test
// (tests/scripts/test_report_browser.py) can tell that every embedded figure rendered.
function mpbCountImages() {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
}
for (var i = 0; i < document.images.length; i++) document.images[i].addEventListener('load', mpbCountImages);
window.addEventListener('load', mpbCountImages);
mpbCountImages();
</script>
"""

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; text-align: left; }
.scroll { overflow-x: auto; }
td.text { max-width: 32em; overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.notes li { margin: 0.2em 0; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { color: #555; max-width: 60em; }
"""


def html_table(header, rows, numeric_from=1):
    """A plain HTML table (scrolls sideways if too wide); columns from `numeric_from` are right-aligned."""
    out = ["<div class=scroll><table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = [f"<td class={'num' if i >= numeric_from else 'text'}>{html.escape(v)}</td>"
                 for i, v in enumerate(row)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out + ["</table></div>"])


def write_html(rs, plots, notes, path):
    """index.html with every image inlined as a base64 data URI."""
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>mpbench report: {html.escape(rs.experiment)}</title><style>{CSS}</style></head><body>",
        f"<h1>mpbench report: {html.escape(rs.experiment)}</h1>",
        f"<p>{len(rs.cells)} cells on <b>{html.escape(rs.machine_label())}</b>. "
        "See docs/REPORTS.md for how to read each figure.</p>",
        "<h2>Machine and versions</h2>",
        html_table(None, machine_rows(rs), numeric_from=99),
    ]
    if notes:
        parts.append("<h2>Notes</h2><ul class=notes>" +
                     "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    parts += ["<h2>Cells</h2>", html_table(SUMMARY_COLUMNS, summary_rows(rs))]
    for p in plots:
        if not p.file:
            continue
        with open(p.file, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        parts.append(f"<figure><h2>{html.escape(p.title)}</h2>"
                     f"<img src=\"data:image/png;base64,{data}\" alt=\"{html.escape(p.title)}\">"
                     f"<figcaption>{html.escape(p.caption)}</figcaption></figure>")
    parts += [IMAGE_CHECK_SCRIPT, "</body></html>"]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))


def md_escape(text):
    return str(text).replace("|", "\\|")


def markdown_table(header, rows):
    lines = ["| " + " | ".join(md_escape(h) for h in header) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(md_escape(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def write_markdown(rs, plots, notes, path):
    """report.md: the same content, images referenced by file name beside it."""
    lines = [f"# mpbench report: {rs.experiment}", "",
             f"{len(rs.cells)} cells on **{rs.machine_label()}**.", "", "## Machine and versions", ""]
    lines += [f"- **{k}**: {v}" for k, v in machine_rows(rs)]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += ["", "## Cells", "", markdown_table(SUMMARY_COLUMNS, summary_rows(rs)), ""]
    for p in plots:
        if p.file:
            lines += [f"## {p.title}", "", f"![{p.title}]({p.name})", "", p.caption, ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


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
