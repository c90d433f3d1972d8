"""The report's numerics figures: the loss scale (with each fp8 cell's FP8 scales) and the
gradient-exponent histograms with fp16's and E5M2's zones.

Why a module of its own: these read the numerics a run records (loss-scale series, FP8 scale
samples, gradient histograms), not its timings; plots.py lists them among the report's figures.
"""

import math
from dataclasses import dataclass, field

from mpbench import results as mr
from mpbench.report.labels import clip, display_order, plot_names
from mpbench.report.plot_base import Skip, np, plt, power_of_two, power_of_two_axis

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
    names = plot_names(rs)
    for ax, cell in zip(axes, fp8_cells):
        draw_fp8_scales(ax, cell)
        ax.set_title(f"FP8 scale per tensor, {clip(names[cell.cell_id], 60)}{machine}\n"
                     "line: median over layers (and repeats), band: min..max; points: sampled steps", fontsize=10)
    fig.axes[-1].set_xlabel("optimizer step")
    fig.tight_layout()
    return fig


def same_scale_groups(cells):
    """[[cell, ...], ...] in order: cells whose loss scale is the same at every step of every repeat
    share a group, since their lines would lie on top of each other (one visible line, several legend
    entries, issue 41). Cells that recorded no loss scale are left out: nothing of them would show."""
    groups = {}
    for cell in cells:
        series = tuple(tuple(np.nan_to_num(s, nan=-1.0).tolist()) for s in cell.series("loss_scale"))
        if any(series):
            groups.setdefault(series, []).append(cell)
    return list(groups.values())


def draw_loss_scales(ax, rs, cells):
    """The loss scale per step of each cell on a log2 axis, skipped steps marked with red crosses;
    one line, and one legend entry naming them all, for cells whose scales are identical."""
    marked = False
    names = plot_names(rs)
    for i, group in enumerate(same_scale_groups(cells)):
        label = "\n= ".join(clip(names[c.cell_id]) for c in group)
        if not all("loss_scale" in names[c.cell_id] for c in group):
            label += f", loss scale {group[0].loss_scale_mode()}"
        label += " (the same scale every step)" if len(group) > 1 else ""
        first = True                         # the first repeat with a scale: thick, and in the legend
        for scale in group[0].series("loss_scale"):
            if scale.size:
                ax.step(np.arange(scale.size), scale, where="post", color=f"C{i}", lw=1.3 if first else 0.6,
                        alpha=1 if first else 0.5, label=label if first else None)
                first = False
        for cell in group:
            marked |= mark_skipped(ax, cell, marked)
    power_of_two_axis(ax)
    ax.set_ylabel("loss scale (log₂ axis)")
    ax.set_title(f"Loss scale per step — {rs.machine_label()} (thin lines: further repeats)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def mark_skipped(ax, cell, labelled):
    """Red crosses on `cell`'s loss-scale line at its skipped steps; True if it drew any (the legend
    entry goes with the first crosses only, `labelled` says whether they are drawn already)."""
    drew = False
    for scale, skipped in zip(cell.series("loss_scale"), cell.series("skipped")):
        hit = np.nonzero(np.nan_to_num(skipped[:scale.size]) > 0)[0] if scale.size and skipped.size else []
        if len(hit):
            ax.scatter(hit, scale[hit], marker="x", color="red", zorder=3,
                       label=None if labelled or drew else "skipped step (non-finite gradients)")
            drew = True
    return drew


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
    power_of_two_axis(ax)
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
    power = power_of_two
    return (f"E5M2 zones at grad_output scale s = {power(float(np.median(scales_log2)))}\n"
            f"(median over layers at step {step};\nthe layers' scales span {power(min(scales_log2))}.."
            f"{power(max(scales_log2))})")


def sampled_steps(samples):
    """The distinct steps at which numerics were sampled, ascending."""
    return sorted({s.get("step") for _, s in samples if isinstance(s.get("step"), (int, float))})


def underflow_note(samples, step):
    """Title suffix "— exact zeros x% at step s" from the runner's grads.underflow_fraction, if recorded.

    Not called underflow: the runner counts every gradient that is exactly 0 as stored
    (runner/results/results.cpp), and most of those are 0 by construction (masked or padded
    positions, a ReLU's dead half), not values rounded to 0 (issue 41: a BERT bf16 cell read
    "underflow 33.14%" where bf16 has fp32's range). The red zone of the histogram is where
    underflow shows."""
    values = [mr.to_float((s.get("grads") or {}).get("underflow_fraction")) for _, s in samples if s.get("step") == step]
    values = [v for v in values if mr.finite(v)]
    return f" — exact zeros {100 * np.mean(values):.2f}% at step {step}" if values else ""


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
    names = plot_names(rs)
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
        ax.set_title(clip(names[cell.cell_id], 60) + note, fontsize=9)
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
