"""What every report figure shares: the matplotlib backend, sizes and colours, the Plot/Drawn/Skip
records, and the bar and band helpers.

Why a module of its own: the backend is chosen here, when the first figure module is imported and
before pyplot; the figure modules (plots: speed, memory, convergence, checkpointing;
plot_numerics: loss and FP8 scales, gradient exponents) draw with these helpers.
"""

import re
import warnings
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
# Text is text: a `$` in a cell id, a data.path or a machine name must never start matplotlib's
# mathtext (an odd number of them raised a ParseException and report.py exited 1, issue 43 item 7).
# Exponents are written with Unicode superscripts instead (see superscript()).
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt  # noqa: E402,F401  (plt: the figure modules' pyplot)
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from mpbench.report.labels import plot_names  # noqa: E402

DPI = 110
MIB = float(1 << 20)
PLAIN = FuncFormatter(lambda v, _: f"{v:g}")     # log axes without 10^x tick labels
FUSION_COLOURS = {"off": "#4C72B0", "on": "#DD8452"}
# One colour per memory category, in the vocabulary's stacking order (params,
# grads, optimizer, activations, workspace today); a category the runner adds
# later takes the next colour round.
MEMORY_COLOURS = ("#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD")


SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def power_of_two(exponent):
    """2 to a power as plain text ("2⁻²²"), since mathtext is off; a fractional exponent as "2^6.5"."""
    text = f"{exponent:g}"
    return "2" + text.translate(SUPERSCRIPTS) if re.fullmatch(r"-?\d+", text) else f"2^{text}"


def power_of_two_axis(ax):
    """A log₂ y axis labelled "2¹⁶", not matplotlib's default "$\\mathdefault{2^{16}}$" (with
    text.parse_math off, above, the default formatter's mathtext printed as raw text)."""
    ax.set_yscale("log", base=2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: power_of_two(np.log2(v)) if v > 0 else ""))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


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


def bar_figure_width(rs, cells):
    """Inches for a bar chart whose bars are named by stacked cell names (bar_names): wide enough
    that the longest line of one name does not run into the next."""
    names = plot_names(rs, stacked=True)
    longest = max((len(line) for c in cells for line in names[c.cell_id].split("\n")), default=4)
    return max(7.0, max(0.55, 0.075 * longest + 0.2) * len(cells) + 2.5)


def label_bars(ax, rs, xs, cells, groups, centres):
    """Group names (precision, and model where several) along the top; under each bar the cell's
    name (labels.plot_names), one setting a line."""
    names = plot_names(rs, stacked=True)
    ax.set_xticks(xs, [names[c.cell_id] for c in cells], fontsize=8)
    pad = max(0.9, (6 - len(xs)) / 2)          # a lone bar should not fill the whole width
    ax.set_xlim(xs[0] - pad, xs[-1] + pad)
    top = ax.secondary_xaxis("top")
    top.set_xticks(centres, [g for g, _ in groups], fontweight="bold")
    top.tick_params(length=0)


@dataclass
class Plot:
    """One report figure: the PNG it was saved to, or why it was left out.

    notes: sentences printed under the figure (cells left out of it, and why);
    key_cells: the cells the figure draws, by id (None: not recorded).
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
    """What a plot function returns when the figure needs notes beside it, or says which cells it drew."""
    fig: object
    notes: list = field(default_factory=list)
    key_cells: list = None


class Skip(Exception):
    """Raised by a plot function when the data it needs was not recorded."""


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
