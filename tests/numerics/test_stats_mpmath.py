"""runner/measure/stats.h's Student t CDF and quantile against 50-digit values (mpmath),
at 1 to 10 million degrees of freedom and tail probabilities from 1e-12 to 1 - 1e-12.

Why besides test_stats_scipy.py: scipy's own t is good to ~1e-13 at best, so it cannot
show errors of 1e-12 and below, and it was only checked to df 1,000. Issue 40 item 7
found the hand-written t losing digits there: x = df / (df + t^2) near 1, whose 1 - x
cancelled (3e-12 relative at df 1,000, 3e-8 at 1e7), ln Gamma(df/2 + 1/2) - ln Gamma(df/2)
cancelled the same way, and |t| < 1e-8 gave exactly 0.5. The reference is the regularized
incomplete beta function in mpmath at 50 digits: P(T > |t|) = I_x(df/2, 1/2) / 2.

Tolerances (why):
- a lower tail (t < 0), whose CDF is the tail itself: 1e-12 relative. Double holds 1e-16;
  the sums (the continued fraction below df 100, the quadrature from there) reach ~5e-15
  (printed as the worst); 1e-12 is 4 orders below the old error at df 1e7.
- a CDF at or above 0.5 (t >= 0): 1e-15 absolute, about nine units in the last place at 0.5
  and four near 1: it is 1 - (a tail summed from ~300 quadrature terms, or ~1,000 of the
  fraction), and 1 - p itself has no more digits near 1. At the centre (|t| <= 1e-6) that
  still holds the CDF's offset from 0.5 (4e-13 at t = 1e-12, which the old code lost) to
  0.25% or better.
- the quantile: t such that P(T <= t) = p, found by mpmath.findroot at 50 digits:
  1e-12 relative (the bisection stops at 1e-15 of t; the CDF's 1e-12 becomes at most
  1e-12 of t where the density is not tiny).
Skips (exit 77) without mpmath; scripts/install_deps.sh --tests installs python3-mpmath.
"""
import sys

try:
    import mpmath
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIPPED: mpmath is not importable ({e}); install python3-mpmath (scripts/install_deps.sh --tests does)")
    sys.exit(77)

from stats_tool import run_stats_cases  # noqa: E402  (after the skip above)

mpmath.mp.dps = 50
DFS = [1, 2, 3, 5, 9.5, 30, 1000, 1e5, 1e7]
TAIL_RTOL = 1e-12
NEAR_ONE_ATOL = 1e-15
PPF_RTOL = 1e-12


def tail(t, df):
    """P(T > |t|), exactly enough: 50 digits."""
    t, df = mpmath.mpf(t), mpmath.mpf(df)
    return mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + t * t), regularized=True) / 2


def cdf(t, df):
    p = tail(t, df)
    return 1 - p if t >= 0 else p


def quantile(p, df):
    """The t with P(T <= t) = p: a root of cdf - p, from a bracket doubled until it holds."""
    p = mpmath.mpf(p)
    target = p if p < 0.5 else 1 - p          # the tail probability P(T > |t|)
    hi = mpmath.mpf(1)
    while tail(hi, df) > target:
        hi *= 2
    # On the log of the tail, whose values are of order one however small the target is.
    lo = hi / 2 if hi > 1 else mpmath.mpf(0)
    t = mpmath.findroot(lambda x: mpmath.log(tail(x, df)) - mpmath.log(target), (lo, hi), solver="anderson")
    return -t if p < 0.5 else t


def make_cases():
    cases = {"cdf": [], "ppf": [], "tests": []}
    for df in DFS:
        # ts spanning tails 1e-12 ... 0.5 on both sides, and the centre.
        for p in (1e-12, 1e-9, 1e-6, 1e-3, 0.05, 0.3):
            t = float(quantile(p, df))
            cases["cdf"] += [[t, df], [-t, df]]
        for t in (1e-12, 1e-9, 1e-6, -1e-9):
            cases["cdf"].append([t, df])
        for p in (1e-12, 1e-9, 1e-4, 0.025, 0.3, 0.7, 0.975, 1 - 1e-4, 1 - 1e-9, 1 - 1e-12):
            cases["ppf"].append([p, df])
    return cases


def main():
    cases = make_cases()
    got = run_stats_cases(cases)
    if got is None:
        return 1
    failures, worst = [], 0.0
    for (t, df), ours in zip(cases["cdf"], got["cdf"]):
        ref = cdf(t, df)
        if t < 0:
            err = abs(mpmath.mpf(ours) - ref) / ref
            worst = max(worst, float(err))
            ok = err <= TAIL_RTOL
        else:
            ok = abs(mpmath.mpf(ours) - ref) <= NEAR_ONE_ATOL
        if not ok:
            failures.append(f"cdf({t!r}, df={df}): ours {ours!r}, mpmath {mpmath.nstr(ref, 20)}")
    for (p, df), ours in zip(cases["ppf"], got["ppf"]):
        ref = quantile(p, df)
        err = abs(mpmath.mpf(ours) - ref) / abs(ref)
        if err > PPF_RTOL:
            failures.append(f"ppf({p!r}, df={df}): ours {ours!r}, mpmath {mpmath.nstr(ref, 20)} (rel {float(err):.2g})")
    for f in failures:
        print("MISMATCH", f)
    checked = len(cases["cdf"]) + len(cases["ppf"])
    print(f"{checked - len(failures)} of {checked} values agree with mpmath {mpmath.__version__} at 50 digits "
          f"(df {DFS[0]} to {DFS[-1]:g}; worst lower-tail relative error {worst:.2g})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
