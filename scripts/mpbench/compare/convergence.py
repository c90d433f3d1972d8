"""compare.py's convergence rule: the runner's verdict of a cell against its
baseline (summary.convergence.verdict, docs/RESULTS.md) in BASE and in NEW.

Why a module of its own: the verdict is not a number with a threshold; it is a
state, and the rule is about its transitions (docs/REPORTS.md):
  - equivalent (or better) in BASE, worse in NEW: regressed. The cell trained as
    well as its baseline before and provably worse now: it gates like a
    throughput drop (exit 1, a REGRESSED line).
  - any other change (equivalent -> inconclusive above all: too few seeds or a
    wider spread, not evidence of harm): changed, reported in the table and the
    JSON, never gating.
  - the same verdict: same. A cell without a verdict on either side (a set from
    before the verdict, no baseline of the same model and data): no result.
"""

import math

from mpbench.results.convergence import verdict_of

METRIC = "convergence"
GATING_FROM = ("equivalent", "better")
GATING_TO = "worse"


def verdict_change(base_verdict, new_verdict):
    """(verdict, note) of compare for one cell's verdict transition; None without both."""
    if not base_verdict or not new_verdict:
        return None
    if base_verdict == new_verdict:
        return "same", ""
    if base_verdict in GATING_FROM and new_verdict == GATING_TO:
        return "regressed", ""
    return "changed", "convergence verdict changed (reported, does not gate)"


def convergence_results(base_cell, new_cell, result_type):
    """[result_type(...)] for the cell's verdict transition, or [] (no verdict on a side)."""
    base_v, new_v = verdict_of(base_cell), verdict_of(new_cell)
    change = verdict_change(base_v, new_v)
    if change is None:
        return []
    verdict, note = change
    return [result_type(base_cell.cell_id, METRIC, math.nan, math.nan, math.nan, verdict, note=note,
                        text=base_v if base_v == new_v else f"{base_v} → {new_v}")]
