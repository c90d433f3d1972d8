"""Every statistic the scripts compute, in one module: the Student t intervals
(ab_compare.py's paired test over rounds), compare.py's pooled t test over repeats, the
Mann-Whitney U test over step blocks reported beside it, and what sample sizes allow.
The runner's speed-up interval is the runner's (runner/measure/stats.cpp; the scripts read
it from the cell files): its independent Python copy lives with the test that checks it,
tests/scripts/speedup_reference.py.

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
