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
from mpbench.report.labels import cell_keys, display_order, times
from mpbench.report.plot_base import Drawn, Skip, plt
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


def plot_eval_loss_diff(rs):
    """One row per cell with a verdict: each seed's eval loss minus the baseline's at the
    same step, with the margin ±δ shaded, so a reader sees which seeds leave the band."""
    if not has_convergence(rs):
        raise Skip(ABSENT)
    base = rs.baseline()
    cells = [c for c in verdict_cells(rs) if not c.is_baseline and base is not None]
    rows = [(c, eval_loss_differences(c, base)) for c in cells]
    rows = [(c, d) for c, d in rows if d]
    if not rows:
        raise Skip(NO_BASELINE if not cells else "no cell has eval points paired by seed with the baseline's")
    keys = cell_keys(rs)
    fig, axes = plt.subplots(len(rows), 1, figsize=(9, 2.2 * len(rows) + 0.8), squeeze=False, sharex=True)
    for (cell, diffs), (ax,) in zip(rows, axes):
        conv = convergence_of(cell)
        delta = number(conv, "delta") if conv.get("metric", "eval_loss") == "eval_loss" else number(
            conv, "time_to_target", "delta")
        if mr.finite(delta):
            ax.axhspan(-delta, delta, color="#55A868", alpha=0.15, lw=0, label=f"margin ±δ = ±{delta:.3g}")
            for y in (-delta, delta):
                ax.axhline(y, color="#55A868", lw=0.8, ls="--")
        ax.axhline(0, color="#888888", lw=0.8)
        for i, (seed, steps, d) in enumerate(diffs):
            ax.plot(steps, d, marker="o", ms=3, lw=1.2, color=f"C{i}", label=f"seed {seed}")
        ax.set_title(f"{keys[cell.cell_id]}: {cell.cell_id} — {verdict_of(cell)}", fontsize=9)
        ax.set_ylabel("eval loss − baseline", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1][0].set_xlabel("optimizer step (eval points)")
    fig.suptitle(f"Eval-loss difference vs the baseline, per seed — {rs.machine_label()}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    return Drawn(fig, key_cells=[c.cell_id for c, _ in rows])


PLOT_CAPTION = ("Per cell with a verdict (one row each, titled with its key and verdict), each seed's eval loss "
                "minus the baseline's at the same eval step; the green band is the margin ±δ the verdict tests "
                "against. Points inside the band at the last step on every seed support `equivalent`; points "
                "above it, `worse`. Cells without a baseline of the same model and data have no row.")
