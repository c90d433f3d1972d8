"""The report's time-estimate table: what `runner --dry-run` estimated for each
cell before the run (summary.estimated_time, runner/measure/cost_estimate.h) against
the time its steps took (summary.measured_time_s), so the estimate is checked
by every run that records one.

Why a module of its own: the HTML page and report.md show the same table, so
its rows are built once here as plain strings, like report.tables'.
"""

import math

from mpbench import results as mr
from mpbench.report.labels import cell_keys, display_order

ESTIMATE_COLUMNS = ["key", "cell", "estimated", "measured", "measured / estimated"]


def duration_text(seconds):
    """h:mm:ss (m:ss under an hour; seconds under a minute, ms under a second), "—" when unknown."""
    if not mr.finite(seconds):
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def has_estimates(rs):
    """Whether any cell recorded an estimate (result sets before issue 16 have none)."""
    return any(isinstance(c.summary.get("estimated_time"), dict) for c in rs.cells)


def estimate_rows(rs):
    """One row per cell with an estimate: key, cell, estimated, measured, their ratio."""
    rows, keys = [], cell_keys(rs)
    for c in display_order(rs):
        est = c.summary.get("estimated_time")
        if not isinstance(est, dict):
            continue
        estimated = c.summary_value("estimated_time.seconds")
        measured = c.summary_value("measured_time_s")
        ratio = measured / estimated if mr.finite(estimated) and estimated > 0 and mr.finite(measured) else math.nan
        why = est.get("why")
        rows.append([keys[c.cell_id], c.cell_id, duration_text(estimated) if mr.finite(estimated) else f"— ({why})",
                     duration_text(measured), f"{ratio:.2f}×" if mr.finite(ratio) else "—"])
    return rows


def estimate_legend(rs):
    """What the estimate assumed (the first cell's basis; a run has one device) and how to read the ratio."""
    est = next((c.summary["estimated_time"] for c in rs.cells if isinstance(c.summary.get("estimated_time"), dict)),
               None)
    if est is None:
        return ""
    mfu = est.get("assumed_mfu")
    share = f"{mfu * 100:.0f}%" if isinstance(mfu, (int, float)) else "a share"
    what = {"gpu_peak": f"of the dense peak of each cell's GEMM mode on {est.get('device')}",
            "measured_ceiling": f"of the GEMM ceiling of each cell's mode measured at start on {est.get('device')}",
            }.get(est.get("basis"), "(no basis)")
    source = f" ({est.get('source')})" if est.get("basis") == "gpu_peak" else ""
    # The GPU step model (runner/measure/cost_estimate.h) adds the memory-bound rest at the bandwidth.
    bandwidth = est.get("bandwidth_tbs")
    memory = (f", plus the memory-bound rest (non-GEMM kernels over the activations, the optimizer over the "
              f"parameters) at {bandwidth:g} TB/s" if isinstance(bandwidth, (int, float)) else "")
    return (f"estimated: per step, the GEMM FLOPs at {share} {what}{source}{memory}; × steps × repeats, "
            "made before the run as runner --dry-run prints it; measured: every step of every repeat by the device's "
            "timer (set-up and evaluation are in neither). A ratio above 1 means the run was slower than the "
            "estimate assumed.")
