"""The report's tables: the Cells summary (one row per cell) and the machine section.

Why a module of its own: the HTML page and report.md show the same tables, so
their rows are built once here as plain strings and each writer only formats
them. The speed-up column shows the runner's confidence interval and verdict
(or, for older result sets, the range of the repeats).
"""

import math

import numpy as np

from mpbench import results as mr
from mpbench.report.labels import cell_keys, display_order, percent, times


SUMMARY_COLUMNS = ["key", "cell", "samples/s", "speedup", "step ms median", "p10", "p90", "GFLOP/s",
                   "% of ceiling", "peak memory", "final loss", "eval loss", "eval acc", "skipped steps"]
STEP_CV_COLUMN = "step CV"       # after p90, when the runner measured step-time noise: the robust CV
# The one measure of a cell's step-time noise the report shows (the Cells table and the Noise section):
# the runner's robust CV (1.4826 x MAD / median), the one its noisy flag tests. The plain CV
# (stdev / mean) is swayed by a few slow steps, so a table showing it beside "no cell's step times were
# flagged as noisy" read as a contradiction (issue 41); slow steps have their own rule and p90.
STEP_CV_TEXT = ("step CV: the robust coefficient of variation of the cell's timed steps (1.4826 × MAD / median), "
                "the measure the runner's noisy flag tests; a few slow steps show in p90 instead")
# After "peak memory" (the allocator's peak), the other two figures of the
# memory triple (docs/RESULTS.md), each when some cell recorded it.
MEMORY_TRIPLE_COLUMNS = (("process peak", "process_peak_bytes"), ("device used peak", "device_used_peak_bytes"))
# After "% of ceiling", when some cell measured energy (NVML's counter on a GPU, RAPL on a CPU).
ENERGY_COLUMN = "samples/J"


def speedup_text(rs, cell):
    """The speed-up as the table shows it.

    "1.07× [1.01–1.12]" with the runner's confidence interval, followed by "no
    measurable difference" when that interval contains 1; older result sets
    (no intervals) show the slowest..fastest repeat in round brackets instead,
    "1.45× (1.43–1.47)". "—" where there is no speed-up (no baseline, or
    another model than the baseline's).
    """
    value = rs.speedup(cell)
    if not mr.finite(value):
        base = rs.baseline()
        return "— (other model)" if base is not None and cell.model_kind != base.model_kind else "—"
    interval = cell.speedup_interval()
    if interval is not None:
        text = f"{times(value)}× [{times(interval.lo)}–{times(interval.hi)}]"
        return text + (" no measurable difference" if cell.speedup_verdict() == "no measurable difference" else "")
    if cell.records_speedup_intervals():      # a runner that writes intervals wrote none for this cell
        return f"{times(value)}×" if cell.is_baseline else f"{times(value)}× (no interval)"
    base = rs.baseline()
    base_sps = base.summary_value("samples_per_s") if base else math.nan
    reps = cell.summary_list("samples_per_s_repeats")
    reps = reps[np.isfinite(reps)]
    if reps.size > 1 and mr.finite(base_sps) and base_sps > 0:
        return f"{times(value)}× ({times(reps.min() / base_sps)}–{times(reps.max() / base_sps)})"
    return f"{times(value)}×"


def has_step_noise(rs):
    return any(c.noise() is not None for c in rs.cells)


def memory_triple_columns(rs):
    """The memory-triple columns some cell of `rs` has a figure for: [(title, summary.memory key)]."""
    return [(title, key) for title, key in MEMORY_TRIPLE_COLUMNS
            if any(mr.finite(c.memory_figure(key)) for c in rs.cells)]


def has_energy(rs):
    return any(mr.finite(c.summary_value("samples_per_joule")) for c in rs.cells)


def summary_columns(rs):
    columns = list(SUMMARY_COLUMNS)
    if has_step_noise(rs):
        columns.insert(columns.index("p90") + 1, STEP_CV_COLUMN)
    if has_energy(rs):
        columns.insert(columns.index("% of ceiling") + 1, ENERGY_COLUMN)
    at = columns.index("peak memory") + 1
    columns[at:at] = [title for title, _ in memory_triple_columns(rs)]
    return columns


def summary_rows(rs):
    """One list of display strings per cell, in summary_columns(rs) order."""
    rows, keys, with_cv, with_energy = [], cell_keys(rs), has_step_noise(rs), has_energy(rs)
    triple = memory_triple_columns(rs)
    for c in display_order(rs):
        name = (c.cell_id + (" (baseline)" if c.is_baseline else "") + (" (emulated)" if c.emulated_ops() else "")
                + (" (noisy)" if c.is_noisy() else ""))
        skipped = c.summary_value("skipped_steps")
        noise = c.noise()
        row = [
            keys[c.cell_id],
            name,
            mr.format_number(c.summary_value("samples_per_s")),
            speedup_text(rs, c),
            mr.format_number(c.summary_value("step_time_ms.median")),
            mr.format_number(c.summary_value("step_time_ms.p10")),
            mr.format_number(c.summary_value("step_time_ms.p90")),
        ] + ([percent(noise.robust_cv if noise else math.nan)] if with_cv else []) + [
            mr.format_number(c.summary_value("gflops")),
            percent(c.summary_value("ceiling_fraction")),
        ] + ([mr.format_number(c.summary_value("samples_per_joule"))] if with_energy else []) + [
            mr.format_bytes(c.memory("total")),
        ] + [mr.format_bytes(c.memory_figure(key)) if mr.finite(c.memory_figure(key)) else "—"
             for _, key in triple] + [
            mr.format_number(c.summary_value("final_loss"), 4),
            mr.format_number(c.summary_value("eval_loss"), 4),
            percent(c.summary_value("eval_accuracy")),
            str(int(skipped)) if mr.finite(skipped) else "—",
        ]
        rows.append(row)
    return rows


def summary_legend(rs):
    """How to read the Cells table: the speedup column, and the step CV where there is one."""
    return speedup_legend(rs) + (f" {STEP_CV_TEXT}." if has_step_noise(rs) else "")


def speedup_legend(rs):
    """One sentence on how to read the speedup column."""
    intervals = [c.speedup_interval() for c in rs.cells if c.speedup_interval()]
    if intervals:
        iv = intervals[0]
        how = f"{iv.confidence_text()} confidence interval" if iv.confidence_text() else "confidence interval"
        methods = "; ".join(dict.fromkeys(i.method for i in intervals if i.method))
        return (f"speedup: samples/s over the baseline's, with its {how} in square brackets. "
                "\"no measurable difference\": the interval contains 1, so this run cannot tell the cell from "
                "the baseline." + (f" Interval method: {methods}." if methods else "")
                + " The key is a short row name; the figures name cells by their settings.")
    return ("speedup: samples/s over the baseline's, with the slowest–fastest repeat in round brackets. "
            "The key is a short row name; the figures name cells by their settings.")


def run_order_text(rs):
    """How the runner ordered the repeats (manifest.order), for the machine section."""
    order = rs.run_order()
    if order is None:
        return "not recorded (a result set from before run orders were recorded)"
    rounds = len(order.rounds)
    seed = f", seed {order.seed}" if order.seed is not None else ""
    if order.mode == "interleaved":
        return (f"interleaved: {rounds} round(s), each running one repeat of every cell in a shuffled order{seed}, "
                "so a slow spell on the machine hits every cell alike")
    if order.mode == "sequential":
        return ("sequential: every repeat of a cell back to back, cell after cell, so a slow spell on the machine "
                "hits only the cells that ran then")
    return f"{order.mode} ({rounds} round(s){seed})"


def machine_rows(rs):
    """(label, value) pairs describing where and with what the run happened."""
    m = rs.manifest
    device = m.get("device") or {}
    gpu = device.get("gpu") if isinstance(device.get("gpu"), dict) else None
    machine = m.get("machine") or {}
    rows = [
        ("experiment", rs.experiment), ("config", m.get("config_path")),
        ("config hash", m.get("config_hash")),
        ("started / finished", f"{m.get('started') or '?'} / {m.get('finished') or 'not finished'}"),
        ("run order", run_order_text(rs)),
        ("mpbench / git", f"{m.get('mpbench_version') or '?'} / {m.get('git_commit') or '?'}"),
        ("device", f"{device.get('kind') or '?'}: {device.get('name') or '?'}"),
    ]
    if gpu:
        mem = gpu.get("memory_bytes")
        rows.append(("GPU", f"{gpu.get('name')} (compute capability {gpu.get('compute_capability')}, "
                            f"{mr.format_bytes(mem) if mem else '? memory'})"))
    kernels = device.get("cpu_kernels") or {}
    if kernels:
        runnable = ", ".join(kernels.get("runnable") or []) or "?"
        rows.append(("CPU kernels", f"{kernels.get('isa') or '?'} ({kernels.get('source') or '?'}; this CPU runs "
                                    f"{runnable}); GEMM: {kernels.get('gemm') or '?'}"))
    ceilings = device.get("ceiling_gflops") or {}
    if ceilings:
        rows.append(("ceilings (GFLOP/s)", ", ".join(f"{k} {mr.format_number(v)}" for k, v in ceilings.items())))
    if machine:
        rows += [
            ("host", f"{machine.get('hostname') or '?'} — {machine.get('cpu_model') or '?'}, "
                     f"{machine.get('cores') or '?'} cores, {mr.format_bytes(machine.get('memory_bytes'))}"),
            ("OS", f"{machine.get('os') or '?'}, kernel {machine.get('kernel') or '?'}"),
        ]
    if m.get("compiler"):
        rows.append(("compiler", m["compiler"]))
    libraries = m.get("libraries") or {}
    # The version strings; header_vs_runtime, warnings and the mapped copies are objects (docs/RESULTS.md).
    libs = {k: v for k, v in libraries.items() if v and isinstance(v, str)}
    if libs:
        rows.append(("libraries", ", ".join(f"{k} {v}" for k, v in libs.items())))
    for w in libraries.get("warnings") or []:
        rows.append(("library warning", w))
    return [(k, "—" if v is None else str(v)) for k, v in rows]
