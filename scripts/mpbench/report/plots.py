"""The report's figures: one function per plot, and render_plots() saving them as PNGs.

Why a module of its own: the figures live in report/ (plot_base: the backend, colours and
records; plot_numerics: loss scale, FP8 scales, gradient exponents; here: speed, memory,
convergence, checkpointing, and the list of figures). A plot function takes a
ResultSet and returns a figure, or a Drawn when the figure needs notes beside it
(or says which cells it drew), or raises Skip with the reason when the run did not record the
data it needs; render_plots turns that into a Plot record for the page writers.
Cell names and order come from report.labels (plot_names), the same in every figure.
"""

import io
import math
import os

from matplotlib.ticker import LogLocator, NullFormatter

from mpbench import output as mo
from mpbench import results as mr
from mpbench.report.figure_cells import figure_view
from mpbench.report.labels import (cell_labels, clip, display_order, plot_names, precision_groups, several_models,
                                   times)
# plot_base first: it chooses matplotlib's backend before pyplot loads.
from mpbench.report.plot_base import (DPI, FUSION_COLOURS, MEMORY_COLOURS, MIB, PLAIN, Drawn, Plot, Skip,
                                      bar_figure_width, bar_positions, draw_band, hatch_fusion, label_bars, np,
                                      plt, stacked_repeats)
from mpbench.report.plot_numerics import loss_scale_cells, plot_grad_histograms, plot_loss_scale  # noqa: F401
from mpbench.report.verdict import PLOT_CAPTION, PLOT_NAME, plot_eval_loss_diff


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
    names = plot_names(rs)
    ordered = display_order(rs)
    cells = [c for c in ordered if mr.finite(rs.speedup(c))]
    notes = [f"{names[c.cell_id]} ({c.cell_id}) is not in the figure: {rs.no_speedup_reason(c)}, so it has no "
             "speed-up." for c in ordered if c not in cells]
    if not cells:
        raise Skip("no cell has a speed-up")
    groups = precision_groups(rs, cells)
    xs, centres = bar_positions(groups)
    heights = [rs.speedup(c) for c in cells]
    whiskers, whisker_text = speedup_whiskers(rs, cells, heights, base_sps)
    fig, ax = plt.subplots(figsize=(bar_figure_width(rs, cells), 4.8))
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
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label=f"baseline ({clip(names[base.cell_id])})")
    label_bars(ax, rs, xs, cells, groups, centres)
    ax.set_ylabel("speedup (×, samples/s ÷ baseline)")
    ax.set_xlabel("precision (top) · fusion (colour) · cell (below)", fontsize=9)
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
    fig, ax = plt.subplots(figsize=(bar_figure_width(rs, cells), 4.8))
    bottom = np.zeros(len(cells))
    for i, k in enumerate(categories):
        values = np.nan_to_num(parts[k]) / MIB
        ax.bar(xs, values, 0.8, bottom=bottom, color=MEMORY_COLOURS[i % len(MEMORY_COLOURS)], label=k)
        bottom += values
    ax.scatter(xs, totals / MIB, marker="_", s=300, color="black", zorder=3, label="total (measured peak)")
    hatch_fusion(ax, xs, cells, bottom)
    label_bars(ax, rs, xs, cells, groups, centres)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_xlabel("precision (top) · fusion on: dotted outline · cell (below)", fontsize=9)
    ax.set_title(f"Peak memory by category — {rs.machine_label()}\n"
                 "categories peak at different times, so their sum can exceed the total", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return Drawn(fig, key_cells=[c.cell_id for c in cells])

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
    names = plot_names(rs)
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
        lines = []
        if base is not None and base.model_kind == model and base not in members:
            lines.append((base, "#888888", ":", f"reference: {clip(names[base.cell_id])} (baseline)"))
        for i, cell in enumerate(members):
            label = clip(names[cell.cell_id]) + (" (baseline)" if cell is base else "")
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
     "coloured by fusion and named by cell under each bar. Whiskers are the speed-up's confidence "
     "interval where the runner recorded one (older result sets: the slowest to the fastest repeat); a "
     "faded bar's interval contains 1, so it is no measurable difference from the baseline. Hatched bars "
     "run on an emulated code path on this device; red labels mark noisy cells. Cells of another model "
     "than the baseline's have no speed-up and are left out."),
    ("memory.png", "Peak memory", plot_memory,
     "Peak bytes per category, one bar per cell (named below it); the black tick is the measured peak "
     "of the whole process. Master "
     "weights, gradients and optimizer state scale with the parameter count; activations with batch size "
     "and depth (and shrink with checkpointing)."),
    (PLOT_NAME, "Eval-loss difference vs the baseline", plot_eval_loss_diff, PLOT_CAPTION),
    ("convergence.png", "Convergence", plot_convergence,
     "Training loss per optimizer step (left) and against wall-clock time (right), one row per model and "
     "precision; rows of one model share the loss axis, another model gets its own. Legends name "
     "the cells. The dotted grey line is the baseline cell for reference (in its model's rows only). A "
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
     "holds inputs and weights, no gradient. A panel's title gives the share of gradients that are exactly "
     "zero as stored at the last sampled step: masked positions and dead activations are zero by "
     "construction, so that share is not underflow; the red zone is."),
    ("checkpointing.png", "Checkpointing trade-off", plot_checkpointing,
     "Each point is a checkpointing mode: how much activation memory it saves against how much step time "
     "it costs (recomputation). Lines join cells that differ only in checkpointing."),
]


def render_plots(rs, out_dir):
    """Draw every plot, saving those with data and recording why the others were skipped.
    A large set's figures draw a bounded view of it (report.figure_cells), and say so."""
    results = []
    rs, cap_note = figure_view(rs)
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
        notes = list(drawn.notes) + [cap_note] * bool(cap_note)
        results.append(Plot(name, title, caption, file=path, notes=notes, key_cells=drawn.key_cells))
    return results
