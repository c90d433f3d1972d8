"""Every statistic the scripts compute, in one module: the Student t intervals (the
runner's speed-up interval of runner/measure/stats.cpp, ab_compare.py's paired test over
rounds), compare.py's pooled t test over repeats, the Mann-Whitney U test over step blocks
reported beside it, and what sample sizes allow.

The t intervals are the runner's definitions, computed here with scipy's t distribution
(an implementation independent of stats.cpp's own incomplete beta): py.test_stats_runner_agreement
recomputes the runner's written intervals from its per-repeat values, and test_stats_scipy
holds the building blocks to scipy's ttest_rel / ttest_ind.

Why the deciding test is over repeats, with a spread pooled over cells
(docs/REPORTS.md has the measurements): on a shared machine a repeat's speed
drifts as a whole (its median moves 5-10% from one repeat to the next), so
step blocks of one repeat share its drift and are not independent samples: a
U test over blocks turned two clean runs into "regressed" at p < 1e-5 (CI,
and 14 of 15 clean pairs here). Repeats are the independent unit, but two per
side give a U test nothing (smallest p 0.33). The machine's repeat-to-repeat
spread is a property of the run, not of a cell, so it is estimated once from
every cell's repeats on both sides (log scale, degrees of freedom summed over
cells), and each cell's change is tested with Student t against that spread.
"""

import math

import numpy as np

BLOCKS_PER_REPEAT = 10
# runner/measure/stats.cpp interval_units: a side with one repeat is cut into this many blocks.
BLOCKS_IF_ONE_REPEAT = 5


def t_quantile(p, df):
    """The Student t quantile: P(T <= t) = p with df degrees of freedom (scipy's t.ppf)."""
    from scipy.stats import t as student_t
    return float(student_t.ppf(p, df))


def two_sided_p(mean, se, df):
    """Two-sided p of Student t for mean / se with df degrees of freedom."""
    from scipy.stats import t as student_t
    return float(2.0 * student_t.sf(abs(mean) / se, df))


def mean_interval(d, confidence):
    """The t interval of the mean of d (a one-sample t; paired data: d = the per-pair differences).

    Returns (mean, half-width, se, df); half-width 0 when every value is equal. Needs two or more values.
    """
    d = np.asarray(d, dtype=float)
    centre, se, df = d.mean(), d.std(ddof=1) / math.sqrt(d.size), d.size - 1.0
    half = t_quantile(0.5 + confidence / 2, df) * se if se > 0 else 0.0
    return centre, half, se, df


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


def paired_ratio_test(base, new, confidence=0.95, min_pairs=3):
    """new/base as a ratio of paired positive values (e.g. throughputs, or step times base/new).

    Returns (geometric-mean ratio, (lo, hi) t interval of it, two-sided p of a one-sample t on the
    log ratios); interval and p are NaN with fewer than min_pairs pairs (a t over 2 pairs has 1
    degree of freedom: nothing is significant).
    """
    d = np.log(np.asarray(new, dtype=float)) - np.log(np.asarray(base, dtype=float))
    mean = float(np.mean(d))
    if d.size < min_pairs:
        return math.exp(mean), (math.nan, math.nan), math.nan
    centre, half, se, df = mean_interval(d, confidence)
    if se == 0:
        return math.exp(mean), (math.exp(mean), math.exp(mean)), (1.0 if mean == 0 else 0.0)
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half)), two_sided_p(mean, se, df)


def u_test(base, new):
    """Two-sided Mann-Whitney U p-value; NaN without samples, 1.0 when nothing differs."""
    from scipy.stats import mannwhitneyu
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if base.size == 0 or new.size == 0:
        return math.nan
    if np.all(base == base[0]) and np.all(new == base[0]):
        return 1.0                     # all equal: scipy would warn/return nan
    p = mannwhitneyu(base, new, alternative="two-sided").pvalue
    return float(p) if math.isfinite(p) else 1.0


def pooled_log_sd(groups):
    """The pooled standard deviation of log values within groups, and its degrees of freedom.

    groups: per-repeat values of one metric, one array per (cell, side); a group
    with n finite positive values contributes n - 1 degrees of freedom.
    """
    ss, df = 0.0, 0
    for g in groups:
        g = np.asarray(g, dtype=float)
        g = np.log(g[np.isfinite(g) & (g > 0)])
        if g.size >= 2:
            ss += float(np.sum((g - g.mean()) ** 2))
            df += g.size - 1
    return (math.sqrt(ss / df) if df else math.nan), df


def pooled_t_test(base, new, sd, df):
    """Two-sided p of Student t for mean(log new) - mean(log base) with a pooled sd.

    NaN when it cannot be tested (a side empty, or no degrees of freedom).
    """
    from scipy.stats import t as student_t
    base, new = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    base, new = base[np.isfinite(base) & (base > 0)], new[np.isfinite(new) & (new > 0)]
    if base.size == 0 or new.size == 0 or df < 1 or not math.isfinite(sd):
        return math.nan
    diff = float(np.mean(np.log(new)) - np.mean(np.log(base)))
    se = sd * math.sqrt(1.0 / base.size + 1.0 / new.size)
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return float(2.0 * student_t.sf(abs(diff) / se, df))


def block_medians(repeats, blocks=BLOCKS_PER_REPEAT):
    """Medians of `blocks` consecutive blocks of each repeat's steps, concatenated.

    A repeat with fewer steps than blocks gives one sample per step; empty
    repeats give none.
    """
    out = []
    for steps in repeats:
        steps = np.asarray(steps, dtype=float)
        if steps.size == 0:
            continue
        for chunk in np.array_split(steps, min(blocks, steps.size)):
            out.append(float(np.median(chunk)))
    return np.array(out)


def autocorrelation(x, max_lag):
    """Sample autocorrelation of a series at lags 1..max_lag (NaN where undefined)."""
    x = np.asarray(x, dtype=float)
    x = x - x.mean()
    denom = float(np.dot(x, x))
    if x.size < 2 or denom == 0:
        return np.full(max_lag, math.nan)
    return np.array([float(np.dot(x[:-k], x[k:])) / denom if k < x.size else math.nan
                     for k in range(1, max_lag + 1)])
