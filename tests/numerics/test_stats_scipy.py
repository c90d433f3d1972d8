"""runner/measure/stats.h against scipy.stats: the Student t CDF and quantile,
one-sided one-sample / paired t tests, TOST and the t interval of a mean,
Fisher's one-sided exact test (scipy.stats.fisher_exact) and Holm's
adjustment (against its step-down definition, written out here).

scipy is an implementation independent of ours (Cephes' stdtr / stdtri and
its own ttest_rel). The C++ side runs through tests/numerics/stats_cases
(MPB_STATS_CASES). Paired tests are checked as scipy's ttest_rel(cell, base)
on constructed pairs (cell = base + d), TOST as the two one-sided ttest_rel
calls against base -+ delta (Schuirmann's definition), the interval as
scipy.stats.t.interval around the mean.

Tolerances (why): stats.cpp's CDF comes from a continued fraction converged
to 1e-15 and its quantile from bisection on the tail probability to 1e-15 of
t, in double. scipy's t.cdf (Cephes stdtr before 1.15, Boost after) agrees
with it to ~1e-15, so the CDF and every p value are compared at rtol 1e-9
(atol 1e-15 for tails near 0, where a relative check of two ~1e-16 numbers
means nothing). scipy's t.ppf is not that good before 1.15: Debian bookworm's
scipy 1.10 (Cephes stdtri) is off by up to 3.5e-9 relative at p = 0.9, df = 3
and 3e-8 at p = 1e-9, df = 1 (exact there: -1 / tan(pi p); scipy 1.17 and
ours agree with it to 1e-14). So quantiles, and the interval bounds built on
them, are checked two ways: against t.ppf at rtol 5e-8 (what old scipy
allows), and round trip, t.cdf(our quantile) == p at rtol 1e-9, which holds
ours to scipy's accurate CDF. Both are tight enough that a wrong degree of
freedom, a one- vs two-sided mix-up or a sign error (all >= 1e-3) fail.

Skips (exit 77) with the reason when scipy is not installed: it never
passes without comparing. scripts/install_deps.sh installs python3-scipy.
"""
import sys

import numpy as np

try:
    import scipy
    from scipy import stats
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIPPED: scipy is not importable ({e}); install python3-scipy (scripts/install_deps.sh does)")
    sys.exit(77)

from stats_tool import run_stats_cases  # noqa: E402  (after the skip above)

RTOL, ATOL = 1e-9, 1e-15
PPF_RTOL = 5e-8  # scipy < 1.15's t.ppf (see above)


def make_cases():
    rng = np.random.default_rng(31)
    dfs = [1, 2, 3, 4, 7, 9.5, 29, 100, 1000]
    ts = [-40, -6.3, -2.1, -1, -1e-3, 0, 1e-3, 0.5, 1.7, 2.9, 12, 80]
    cdf = [[t, df] for df in dfs for t in ts]
    ps = [1e-9, 1e-4, 0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.77, 0.9, 0.95, 0.975, 0.995, 0.9999]
    ppf = [[p, df] for df in dfs for p in ps]
    tests = []
    for n in (2, 3, 5, 8, 20):
        for shift in (-0.3, 0.0, 0.02, 0.5):
            d = (rng.normal(shift, 0.1, n)).tolist()
            tests.append({"d": d, "mu": float(rng.normal(0, 0.05)), "delta": 0.05, "confidence": 0.9})
    tests.append({"d": [1.0, 1.5], "mu": 0.0, "delta": 2.0, "confidence": 0.95})
    # Far upper tails: p_greater 7.5e-9 and 7e-139 (t 141 and 7e7 with 4 and
    # 19 degrees of freedom), which 1 - cdf(t) loses to cancellation (1e-8
    # relative, and 0); checked relative only (TAIL_CASES).
    tests.append({"d": [5.0, 5.1, 4.9, 5.05, 4.95], "mu": 0.0, "delta": 0.05, "confidence": 0.9})
    tests.append({"d": (1.0 + 1e-7 * np.linspace(-1, 1, 20)).tolist(), "mu": 0.0, "delta": 0.05,
                  "confidence": 0.9})
    # Fisher's one-sided exact test of divergence rates: equal and unequal repeats, 0 and all diverged.
    fisher = [[x, n1, y, n2] for n1, n2 in ((5, 5), (3, 10), (10, 3), (20, 20), (1000, 1000))
              for x, y in ((0, 0), (1, 0), (n1, 0), (n1 // 2, n2 // 3), (1, n2))]
    holm = [rng.uniform(0, 0.2, m).tolist() for m in (1, 2, 6, 30)] + [[0.03, None, 0.01, 0.5, 0.02], [0.9, 0.8]]
    return {"cdf": cdf, "ppf": ppf, "tests": tests, "fisher": fisher, "holm": holm}


def holm_by_definition(p):
    """Holm (1979) as its step-down rejection rule, for each alpha: the adjusted p of a value is the
    smallest alpha at which it is rejected. Independent of holm_adjust's sort-and-running-maximum form."""
    finite = [x for x in p if x is not None]
    m = len(finite)
    out = []
    for x in p:
        if x is None:
            out.append(None)
            continue
        # Rejected at alpha iff every p_(j) <= p (sorted ascending) has p_(j) <= alpha / (m - j + 1):
        # the smallest such alpha is max over those j of (m - j + 1) p_(j), capped at 1.
        s = sorted(finite)
        out.append(min(1.0, max((m - j) * s[j] for j in range(m) if s[j] <= x)))
    return out


TAIL_CASES = 2  # the last cases of make_cases()["tests"]: p_greater at rtol 1e-9, no atol


def close(name, ours, ref, failures, rtol=RTOL):
    if not np.isclose(ours, ref, rtol=rtol, atol=ATOL):
        failures.append(f"{name}: ours {ours!r}, scipy {ref!r}")


def main():
    cases = make_cases()
    got = run_stats_cases(cases)
    if got is None:
        return 1
    failures = []
    for (t, df), ours in zip(cases["cdf"], got["cdf"]):
        close(f"t.cdf({t}, df={df})", ours, stats.t.cdf(t, df), failures)
    for (p, df), ours in zip(cases["ppf"], got["ppf"]):
        close(f"t.ppf({p}, df={df})", ours, stats.t.ppf(p, df), failures, rtol=PPF_RTOL)
        close(f"t.cdf(our t.ppf({p}, df={df}))", stats.t.cdf(ours, df), p, failures)
    for i, (c, ours) in enumerate(zip(cases["tests"], got["tests"])):
        d = np.array(c["d"])
        base = np.linspace(1.0, 2.0, len(d))  # any baseline: the paired test sees only cell - base
        cell = base + d
        mu, delta = c["mu"], c["delta"]
        # ttest_rel(cell, base + mu) is the one-sample test of d against mu.
        ref_greater = stats.ttest_rel(cell, base + mu, alternative="greater").pvalue
        if i >= len(cases["tests"]) - TAIL_CASES:  # on d itself: base + d - base moves a 1e-139 p by 1e-8
            tail = stats.ttest_1samp(d, mu, alternative="greater").pvalue
            if not np.isclose(ours["p_greater"], tail, rtol=RTOL, atol=0.0):
                failures.append(f"case {i} far-tail p_greater: ours {ours['p_greater']!r}, scipy {tail!r}")
        close(f"case {i} p_greater", ours["p_greater"], ref_greater, failures)
        close(f"case {i} p_less", ours["p_less"], stats.ttest_rel(cell, base + mu, alternative="less").pvalue, failures)
        close(f"case {i} t", ours["t"], stats.ttest_1samp(d, mu).statistic, failures)
        # TOST: H1 d > -delta and H1 d < +delta.
        close(f"case {i} tost_lower", ours["tost_lower"],
              stats.ttest_rel(cell, base - delta, alternative="greater").pvalue, failures)
        close(f"case {i} tost_upper", ours["tost_upper"],
              stats.ttest_rel(cell, base + delta, alternative="less").pvalue, failures)
        lo, hi = stats.t.interval(c["confidence"], len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        close(f"case {i} lo", ours["lo"], lo, failures, rtol=PPF_RTOL)
        close(f"case {i} hi", ours["hi"], hi, failures, rtol=PPF_RTOL)
    for (x, n1, y, n2), ours in zip(cases["fisher"], got["fisher"]):
        ref = stats.fisher_exact([[x, n1 - x], [y, n2 - y]], alternative="greater").pvalue
        # 1e-12: products of up to 1,000 neighbour ratios, each rounded (~1e-16): ~1e-13 at worst
        close(f"fisher_exact([[{x}, {n1 - x}], [{y}, {n2 - y}]], greater)", ours, ref, failures, rtol=1e-12)
    for p, ours in zip(cases["holm"], got["holm"]):
        for k, (a, b) in enumerate(zip(ours, holm_by_definition(p))):
            if (a is None) != (b is None) or (a is not None and not np.isclose(a, b, rtol=1e-15, atol=0)):
                failures.append(f"holm({p})[{k}]: ours {a!r}, by definition {b!r}")
    checked = (len(cases["cdf"]) + 2 * len(cases["ppf"]) + 7 * len(cases["tests"]) + len(cases["fisher"])
               + sum(len(p) for p in cases["holm"]))
    for f in failures:
        print("MISMATCH", f)
    print(f"{checked - len(failures)} of {checked} values agree with scipy {scipy.__version__} "
          f"(rtol {RTOL}, atol {ATOL})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
