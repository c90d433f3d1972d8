"""The report's first line: which cell to use and why, in one sentence.

Why a module of its own: a reader's first question is "what should I run?", and the answer
draws on three sections at once (the speed-up and its interval, the peak memory, the
convergence verdict). Everything here is the runner's numbers; the choice rule is:
the fastest cell measurably faster than the baseline (its interval above 1) among those
that train like it (verdict equivalent or better); without verdicts, the fastest faster cell,
saying training was not checked; without a faster cell, says so.
"""

from mpbench import results as mr
from mpbench.report.labels import short_label, times
from mpbench.results.convergence import convergence_of, number, verdict_of

TRAINS_LIKE = ("equivalent", "better")


def memory_text(cell, base):
    """"−33% memory" (the cell's peak total against the baseline's), or "" when either is missing."""
    mine, theirs = cell.memory("total"), base.memory("total")
    if not (mr.finite(mine) and mr.finite(theirs) and theirs > 0):
        return ""
    change = 100 * (mine / theirs - 1)
    return f", {change:+.0f}% memory".replace("-", "−")


def training_text(rs, cell, base):
    """How the cell trains against the baseline, from its convergence verdict."""
    verdict = verdict_of(cell)
    if verdict is None:
        return "training not checked (no convergence verdict)"
    p = number(convergence_of(cell), "p_equivalence")
    p_text = f", TOST p {p:.2g}" if mr.finite(p) else ""
    like = "trains like" if verdict in TRAINS_LIKE else "does not train like"
    return f"{like} {short_label(rs, base)} ({verdict}{p_text})"


def decision_line(rs):
    """The sentence, or None without a baseline."""
    base = rs.baseline()
    if base is None:
        return None
    faster = [c for c in rs.cells if c is not base and c.speedup_verdict() == "faster"
              and mr.finite(rs.speedup(c))]
    if not faster:
        return f"No cell is measurably faster than the baseline ({short_label(rs, base)})."
    good = [c for c in faster if verdict_of(c) in TRAINS_LIKE]
    checked = any(verdict_of(c) is not None for c in faster)
    pick = max(good or faster, key=rs.speedup)
    interval = pick.speedup_interval()
    bounds = f" [{times(interval.lo)}–{times(interval.hi)}]" if interval else ""
    head = f"{short_label(rs, pick)}: {times(rs.speedup(pick))}×{bounds} vs {short_label(rs, base)}"
    tail = training_text(rs, pick, base)
    if checked and not good:
        tail += "; no faster cell trains like the baseline"
    return f"{head}{memory_text(pick, base)}, {tail}."
