"""The report's "Does it train as well?" section: one row per cell with the
runner's convergence verdict against its baseline (summary.convergence,
docs/RESULTS.md), and the figure of each seed's eval-loss difference from the
baseline with the margin drawn.

Why a module of its own: the section sits above the loss curves in both
index.html and report.md, so its rows are built once here as plain strings;
the figure is drawn here too because it reads the same records. Nothing is
recomputed: the verdict, interval, p values and time to target are the
runner's (one statistics implementation, runner/measure/stats.h).
"""

from mpbench import results as mr
from mpbench.report.labels import cell_keys, clip, display_order, plot_names, times
from mpbench.report.plot_base import Drawn, Skip, bar_figure_width, np, plt
from mpbench.results.convergence import (context_free_comparison, convergence_of, eval_loss_differences,
                                         has_convergence, number, verdict_of)

TITLE = "Does it train as well?"
PLOT_NAME = "eval_loss_diff.png"
COLUMNS = ["key", "cell", "verdict", "δ (source)", "mean paired diff [interval]", "seeds", "seeds needed",
           "steps to target [interval]", "samples to target", "seconds to target [interval]",
           "speed-up to target [interval]", "never reached", "eval curves: mean absolute gap (upper bound)",
           "diverged / recovered / NaN steps / skipped steps"]
ABSENT = ("absent: this result set was written before the runner recorded a convergence verdict "
          "(no summary.convergence in its cell files); rerun with a current runner to get one")
NO_BASELINE = "no cell has a verdict: none shares the baseline's model and data (or there is no baseline)"


def interval_text(value, lo, hi, digits=4):
    """"0.0465 [0.039–0.0539]"; the value alone without an interval; "—" without a value."""
    if not mr.finite(value):
        return "—"
    text = mr.format_number(value, digits)
    return text + (f" [{mr.format_number(lo, digits)}–{mr.format_number(hi, digits)}]"
                   if mr.finite(lo) and mr.finite(hi) else "")


def time_text(ttt, key):
    """Mean time to target over the seeds that reached it, with its interval."""
    return interval_text(number(ttt, key, "mean"), number(ttt, key, "lo"), number(ttt, key, "hi"))


def verdict_cells(rs):
    """The cells that have a verdict, in the report's order."""
    return [c for c in display_order(rs) if convergence_of(c)]


def seeds_needed_text(conv):
    """The seeds for power at a true difference of δ/2: for an inconclusive cell, or one run with fewer."""
    needed = conv.get("seeds_needed")
    if conv.get("underpowered") and conv.get("verdict") != "inconclusive":
        return f"{needed} (underpowered)" if needed is not None else "> 10000 (underpowered)"
    return str(needed) if conv.get("verdict") == "inconclusive" and needed is not None else "—"


def curve_text(curve):
    """"within: 0.0012 (≤ 0.0031)"; "apart: NaN on one curve"; "—" for sets from before the check."""
    if not isinstance(curve, dict) or curve.get("verdict") in (None, "none"):
        return "—"
    if curve.get("nan_gap"):
        return f"{curve['verdict']}: NaN on one curve"
    gap, hi = number(curve, "mean_abs_gap"), number(curve, "gap_hi")
    bound = f" (≤ {mr.format_number(hi, 3)})" if mr.finite(hi) else ""
    return f"{curve['verdict']}: {mr.format_number(gap, 3)}{bound}" if mr.finite(gap) else str(curve["verdict"])


def verdict_rows(rs):
    """One list of display strings per cell with a verdict, in COLUMNS order."""
    rows, keys = [], cell_keys(rs)
    for c in verdict_cells(rs):
        conv = convergence_of(c)
        ttt = conv.get("time_to_target") if isinstance(conv.get("time_to_target"), dict) else {}
        speed = ttt.get("speedup") if isinstance(ttt.get("speedup"), dict) else {}
        stab = conv.get("stability") if isinstance(conv.get("stability"), dict) else {}
        speedup = number(speed, "speedup")
        rows.append([
            keys[c.cell_id],
            c.cell_id + (" (baseline)" if c.is_baseline else ""),
            str(conv.get("verdict") or "—"),
            f"{mr.format_number(number(conv, 'delta'), 4)} ({conv.get('delta_source') or '?'})",
            interval_text(number(conv, "mean_diff"), number(conv, "ci", "lo"), number(conv, "ci", "hi")),
            str(conv.get("n", "—")),
            seeds_needed_text(conv),
            time_text(ttt, "steps"),
            time_text(ttt, "samples"),
            time_text(ttt, "seconds"),
            (f"{times(speedup)}×" + (f" [{times(number(speed, 'lo'))}–{times(number(speed, 'hi'))}]"
                                     if mr.finite(number(speed, "lo")) else "")) if mr.finite(speedup) else "—",
            str(ttt.get("never_reached", "—")),
            curve_text(conv.get("curve")),
            " / ".join(str(stab.get(k, "—"))
                       for k in ("diverged_seeds", "excursion_seeds", "nan_steps", "skipped_steps")),
        ])
    return rows


def verdict_status(rs):
    """None when the table has rows, else the sentence the section shows instead."""
    if not has_convergence(rs):
        return ABSENT
    return None if verdict_cells(rs) else NO_BASELINE


def verdict_legend(rs):
    """How to read the table: the rule, the interval, the target."""
    convs = [convergence_of(c) for c in verdict_cells(rs)]
    alpha = next((number(c, "alpha") for c in convs if mr.finite(number(c, "alpha"))), 0.05)
    metric = next((c.get("metric") for c in convs if c.get("metric")), "eval_loss")
    return (f"Each cell against its baseline on the final {metric}, seeds paired (repeat r of every cell uses seed "
            f"seed + r). diff = cell − baseline; interval: the {100 * (1 - 2 * alpha):g}% t interval of the mean "
            f"paired difference (TOST's own). equivalent: both one-sided tests of TOST reject at alpha {alpha:g} "
            "(the interval lies inside ±δ) and the cell is stable; worse (better): the one-sided t test of 'worse "
            "(better) by at most δ' rejects at alpha (better, only if the cell is stable too); otherwise inconclusive, with the seeds the observed spread "
            "would need for a true difference of δ/2 (also shown, marked underpowered, when the cell has fewer). A "
            "seed diverged when its loss is not finite or it ends more than 10% above its initial loss; a cell whose "
            "seeds diverge more often than the baseline's (Fisher's exact test) is worse. The p values are "
            f"Holm-adjusted over the {family_size(convs)} cell(s) judged against the baseline. "
            "Eval curves: per seed pair the mean absolute difference of the eval losses over the shared eval steps, tested "
            "against δ (within / apart / inconclusive; beside the verdict, not part of it); recovered: seeds "
            "that left those bounds mid-run and came back, which keeps a cell from equivalent. "
            "δ is fixed in advance, never from the "
            "observed spread: the configured margin (configured: relative, configured_abs: absolute), else 1% of "
            "the baseline's mean (relative_1pct). Time to target: the first eval step whose smoothed eval loss "
            "reaches the baseline's final eval loss + δ, mean over the seeds that reached it with its 95% "
            "interval; speed-up to target: baseline seconds / cell seconds, paired by seed when every seed of both "
            "reached it, else the ratio of Kaplan–Meier medians (seeds that never arrived censored), and none when "
            "the cell's seeds reach it less often than the baseline's. See docs/RESULTS.md." +
            context_free_sentence(rs))


def family_size(convs):
    """The Holm family's size the verdicts carry (their count for sets from before the adjustment)."""
    sizes = [c["family"].get("size") for c in convs if isinstance(c.get("family"), dict)]
    return next((s for s in sizes if isinstance(s, int)), sum(1 for c in convs if c.get("verdict") != "baseline"))


def context_free_sentence(rs):
    """For a baseline trained on text: where its final eval loss stands against the best loss a
    model ignoring the context reaches on the same held-out tokens (issue 31's sanity bar); ""
    otherwise. Above it, the verdicts compare cells that have learned token frequencies at most."""
    base = rs.baseline()
    got = context_free_comparison(base) if base is not None else None
    if got is None:
        return ""
    final, bound = got
    where = (f"{bound - final:.3f} nats below it: the model uses the context" if final < bound else
             f"{final - bound:.3f} nats above it: the model has learned no more than token frequencies yet, "
             "so the verdicts compare that stretch of training")
    return (f" Context: the best loss a model ignoring the context reaches on these held-out tokens is "
            f"{bound:.3f} nats (data.context_free_loss); the baseline's final eval loss, {final:.3f} (mean over "
            f"repeats), is {where}.")


def verdict_delta(conv):
    """The margin δ the verdict tests the eval loss against (NaN when it judged another metric)."""
    if conv.get("metric", "eval_loss") == "eval_loss":
        return number(conv, "delta")
    return number(conv, "time_to_target", "delta")


def plot_eval_loss_diff(rs):
    """One panel with the cells on its x axis: each seed's final eval loss minus the baseline's (dots),
    the runner's mean paired difference and interval, and each cell's margin ±δ shaded; below it, when
    the cells were evaluated more than once, each cell's mean difference over the eval steps. One panel
    per cell spent a full-width row on a single dot where a cell is evaluated once (issue 41)."""
    if not has_convergence(rs):
        raise Skip(ABSENT)
    base = rs.baseline()
    cells = [c for c in verdict_cells(rs) if not c.is_baseline and base is not None]
    rows = [(c, eval_loss_differences(c, base)) for c in cells]
    rows = [(c, d) for c, d in rows if d]
    if not rows:
        raise Skip(NO_BASELINE if not cells else "no cell has eval points paired by seed with the baseline's")
    over_time = any(len(steps) > 1 for _, diffs in rows for _, steps, _ in diffs)
    drawn = [c for c, _ in rows]
    fig, axes = plt.subplots(1 + over_time, 1, figsize=(bar_figure_width(rs, drawn), 4.6 + 3.4 * over_time),
                             squeeze=False, gridspec_kw={"height_ratios": [4.6, 3.4][:1 + over_time]})
    draw_final_differences(axes[0][0], rs, rows)
    if over_time:
        draw_differences_over_steps(axes[1][0], rs, rows)
    fig.suptitle(f"Eval-loss difference vs the baseline — {rs.machine_label()}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    return Drawn(fig, key_cells=[c.cell_id for c in drawn])


def draw_final_differences(ax, rs, rows):
    """Per cell (x axis): the margin band, each seed's last paired difference, and the runner's mean
    paired difference with its interval (only where the verdict judged the eval loss)."""
    names = plot_names(rs, stacked=True)
    labelled = set()

    def once(what):
        """The legend text for the first mark of each kind, None (no entry) for the others."""
        if what in labelled:
            return None
        labelled.add(what)
        return what
    for x, (cell, diffs) in enumerate(rows):
        conv = convergence_of(cell)
        delta = verdict_delta(conv)
        if mr.finite(delta):
            ax.fill_between([x - 0.4, x + 0.4], -delta, delta, color="#55A868", alpha=0.18, lw=0,
                            label=once("margin ±δ (the cell's)"))
        finals = [d[-1] for _, _, d in diffs if d and mr.finite(d[-1])]
        offsets = np.linspace(-0.22, 0.22, len(finals)) if len(finals) > 1 else [0.0]
        ax.scatter(x + np.asarray(offsets[:len(finals)]), finals, s=14, color="#4C72B0", zorder=3,
                   label=once("a seed's final difference"))
        mean, lo, hi = number(conv, "mean_diff"), number(conv, "ci", "lo"), number(conv, "ci", "hi")
        if conv.get("metric", "eval_loss") == "eval_loss" and mr.finite(mean) and mr.finite(lo) and mr.finite(hi):
            ax.errorbar(x + 0.32, mean, yerr=[[mean - lo], [hi - mean]], fmt="D", ms=4, color="black", capsize=3,
                        label=once("mean paired difference, its interval (the verdict's)"))
        ax.annotate(verdict_of(cell), (x, 1.0), xycoords=("data", "axes fraction"), xytext=(0, -12),
                    textcoords="offset points", ha="center", fontsize=8)
    ax.axhline(0, color="#888888", lw=0.8)
    ax.set_xticks(range(len(rows)), [names[c.cell_id] for c, _ in rows], fontsize=8)
    ax.set_xlim(-0.7, len(rows) - 0.3)
    ax.margins(y=0.15)
    ax.set_ylabel("final eval loss − baseline")
    ax.set_title("At the last eval step, per seed (paired with the baseline's seed); the verdict above each cell",
                 fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def draw_differences_over_steps(ax, rs, rows):
    """One line per cell: the mean over seeds of its paired difference at each eval step; cells whose
    lines would coincide share one line and one legend entry."""
    names = plot_names(rs)
    deltas = {verdict_delta(convergence_of(c)) for c, _ in rows}
    if len(deltas) == 1 and mr.finite(next(iter(deltas))):
        delta = next(iter(deltas))
        ax.axhspan(-delta, delta, color="#55A868", alpha=0.12, lw=0, label=f"margin ±δ = ±{delta:.3g}")
    series = []
    for cell, diffs in rows:
        by_step = {}
        for _, steps, d in diffs:
            for step, value in zip(steps, d):
                if mr.finite(value):
                    by_step.setdefault(step, []).append(value)
        steps = sorted(by_step)
        series.append((cell, steps, np.array([np.mean(by_step[s]) for s in steps])))
    for i, (group, steps, means) in enumerate(coinciding_lines(series)):
        label = "\n≈ ".join(clip(names[c.cell_id]) for c in group) + (" (lines coincide)" if len(group) > 1 else "")
        ax.plot(steps, means, marker="o", ms=3, lw=1.2, color=f"C{i}", label=label)
    ax.axhline(0, color="#888888", lw=0.8)
    ax.set_xlabel("optimizer step (eval points)")
    ax.set_ylabel("eval loss − baseline\n(mean over seeds)", fontsize=9)
    ax.set_title("Over training: each cell's mean paired difference at every eval step", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def coinciding_lines(series, resolution=0.005):
    """[(cells, steps, values)]: lines of `series` ([(cell, steps, values)]) that are everywhere within
    `resolution` of the axis' span of each other drawn once, as they could not be told apart."""
    values = np.concatenate([v for _, _, v in series] + [np.zeros(1)])
    tolerance = resolution * max(float(np.ptp(values)), 1e-12)
    groups = []
    for cell, steps, v in series:
        same = next((g for g in groups if g[1] == steps and np.all(np.abs(g[2] - v) <= tolerance)), None)
        if same:
            same[0].append(cell)
        else:
            groups.append(([cell], steps, v))
    return groups


PLOT_CAPTION = ("Top: one column per cell with a verdict (named below it, the verdict above it): each seed's "
                "final eval loss minus the baseline's with the same seed (dots), the runner's mean paired "
                "difference and its interval (black diamond, the interval the verdict tests), and the cell's "
                "margin ±δ (green). An interval inside the band supports `equivalent`; one above it, `worse`. "
                "Bottom, when the cells were evaluated more than once: each cell's mean difference over the "
                "seeds at every eval step. Cells without a baseline of the same model and data are left out.")
