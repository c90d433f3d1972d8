"""The runner's speed-up interval (runner/measure/stats.cpp speedup_interval) written again
in Python with scipy's t distribution, an implementation independent of stats.cpp's own
incomplete beta: py.test_stats_runner_agreement recomputes the runner's written intervals
with it, and py.test_stats_intervals holds its pieces to scipy's ttest_ind. Only tests use
it (issue 42: it lived in mpbench.stats, where nothing else read it)."""

import math

import numpy as np

from script_test_helpers import SOURCE_DIR  # noqa: F401  (puts scripts/ on sys.path)

from mpbench.stats import mean_interval, t_quantile  # noqa: E402

# runner/measure/stats.cpp interval_units: a side with one repeat is cut into this many blocks.
BLOCKS_IF_ONE_REPEAT = 5


def welch_interval(a, b, confidence):
    """Welch's t interval of mean(a) - mean(b) for independent samples of two or more each.

    Returns (difference, half-width, se, df): df by Welch-Satterthwaite, NaN (and half-width 0)
    when both samples are constant.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    centre, se = a.mean() - b.mean(), math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1)) if va + vb > 0 else math.nan
    half = t_quantile(0.5 + confidence / 2, df) * se if se > 0 else 0.0
    return centre, half, se, df


def interval_units(timed, blocks_if_one=BLOCKS_IF_ONE_REPEAT):
    """runner/measure/stats.cpp interval_units: whole repeats, or one repeat cut into consecutive blocks."""
    units = [np.asarray(t, dtype=float) for t in timed]
    units = [t for t in units if t.size]
    if len(units) != 1:
        return units
    one, n = units[0], units[0].size
    blocks = min(max(1, blocks_if_one), n)
    # Block b is [b*n/blocks, (b+1)*n/blocks) in integer division, as stats.cpp cuts it (np.array_split
    # puts the longer blocks first instead, which moved a one-repeat interval's df by 24%: seen).
    return [one[b * n // blocks:(b + 1) * n // blocks] for b in range(blocks)]


PAIRED_METHOD = ("paired t over rounds (repeat i of both cells ran in round i of the interleaved order; Student t "
                 "on the rounds' log ratios of median step times)")
WELCH_REPEATS_METHOD = "Welch t over repeats (each side's log median step times, independent samples)"
WELCH_BLOCKS_METHOD = ("Welch t over consecutive blocks of a single repeat (sees drift within the run, not "
                       "run-to-run noise: use repeats >= 2 for an honest interval)")


def speedup_interval(base_timed, base_batch, timed, batch, paired, confidence=0.95):
    """summary.speedup_interval as runner/measure/stats.cpp speedup_interval defines it.

    base_timed, timed: each repeat's timed step times (ms) of the baseline and the cell. Student t
    on the log medians of the units: paired over interleaved rounds (same count, two or more, none
    empty), else Welch over repeats (or over blocks of a single repeat). None with fewer than two
    units a side. The dict has the cell JSON's fields: lo, hi, confidence, method, df, units.
    """
    paired = paired and len(base_timed) == len(timed) >= 2 and all(np.size(t) for t in list(base_timed) + list(timed))
    base_units = [np.asarray(t, dtype=float) for t in base_timed] if paired else interval_units(base_timed)
    units = [np.asarray(t, dtype=float) for t in timed] if paired else interval_units(timed)
    if len(base_units) < 2 or len(units) < 2:
        return None
    lb = np.log([np.median(u) for u in base_units])
    lc = np.log([np.median(u) for u in units])
    log_batch = math.log(batch / base_batch)
    if paired:
        centre, half, _, df = mean_interval(log_batch + lb - lc, confidence)
        method = PAIRED_METHOD
    else:
        centre, half, _, df = welch_interval(lb, lc, confidence)
        centre += log_batch
        method = WELCH_REPEATS_METHOD if len(base_timed) >= 2 and len(timed) >= 2 else WELCH_BLOCKS_METHOD
    return {"lo": math.exp(centre - half), "hi": math.exp(centre + half), "confidence": confidence,
            "method": method, "df": df if math.isfinite(df) else None,
            "units": {"baseline": len(base_units), "cell": len(units)}}
