"""summary.convergence of a cell file (docs/RESULTS.md): the runner's verdict on
"does this cell train as well as its baseline?", read for the report and compare.

Why a module of its own: the runner computes the verdict (TOST over seeds paired
with the baseline's, time to target, stability counts; runner/measure/
convergence_verdict.h); the scripts only read and show it, never recompute it,
so there is one implementation of the tests. Result sets written before the
verdict existed have no `convergence` key: convergence_of returns None and
has_convergence(rs) False, and the report says the section is absent.
"""

import math

from mpbench.results.values import finite, to_float


def convergence_of(cell):
    """The cell's summary.convergence object, or None (no baseline of the same model
    and data, or a result set from before the verdict)."""
    conv = cell.summary.get("convergence")
    return conv if isinstance(conv, dict) else None


def has_convergence(rs):
    """True when the runner that wrote `rs` records verdicts (some cell has the key,
    even if null): older sets lack it on every cell."""
    return any("convergence" in c.summary for c in rs.cells)


def verdict_of(cell):
    """equivalent | worse | better | inconclusive | baseline, or None without a verdict."""
    conv = convergence_of(cell)
    return conv.get("verdict") if conv else None


def number(obj, *keys):
    """A nested number of a convergence object as a float (NaN when absent or null)."""
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return to_float(obj)


def context_free_comparison(cell):
    """(mean final eval loss over the repeats, data.context_free_loss.loss) of a text cell: the
    best loss a model ignoring the context reaches on the same held-out tokens (docs/RESULTS.md,
    "data"). None without that bound (not text, or an older runner) or a finite final eval loss."""
    bound = number(cell.data.get("data"), "context_free_loss", "loss")
    finals = []
    for r in cell.repeats:
        evals = r.get("eval")
        if isinstance(evals, list) and evals and isinstance(evals[-1], dict):
            finals.append(to_float(evals[-1].get("loss")))
    finals = [v for v in finals if finite(v)]
    if not finite(bound) or not finals:
        return None
    return sum(finals) / len(finals), bound


def eval_loss_differences(cell, baseline):
    """Per seed both ran: (seed, [steps], [cell eval loss - baseline eval loss]) over
    the eval points at the same step (the pairing the verdict uses: repeat r of
    every cell has seed `seed + r`). Empty when nothing pairs."""
    def curves(c):
        out = {}
        for r in c.repeats:
            if "seed" in r:
                out[r["seed"]] = {e.get("step"): to_float(e.get("loss"))
                                  for e in r.get("eval") or [] if isinstance(e, dict)}
        return out
    mine, base = curves(cell), curves(baseline)
    rows = []
    for seed, points in mine.items():
        if seed not in base:
            continue
        steps = sorted(s for s in points if s in base[seed] and isinstance(s, (int, float)))
        diffs = [points[s] - base[seed][s] if finite(points[s]) and finite(base[seed][s]) else math.nan
                 for s in steps]
        if steps:
            rows.append((seed, steps, diffs))
    return rows
