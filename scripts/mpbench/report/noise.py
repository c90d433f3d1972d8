"""The report's Notes and Noise sections: what a reader must know before trusting the numbers.

Why a module of its own: these sentences interpret the run as a whole (an
unfinished run, missing cells, emulated precisions, cells of another model,
skipped plots) and the machine load the runner measured (busy rounds, noisy
cells and why). They warn only: no data is hidden or dropped because of them.
"""

from mpbench import results as mr
from mpbench.report.labels import cell_keys, display_order, percent


def report_notes(rs, plots):
    """Things a reader must know before trusting the numbers."""
    notes = []
    if not rs.finished():
        notes.append("The run has not finished (manifest.json has no 'finished' time): results are partial.")
    missing = rs.missing_cells()
    failed = {f.get("cell_id"): f for f in (rs.manifest.get("failed_cells") or []) if isinstance(f, dict)}
    hung = [cid for cid in missing if cid in failed]
    for cid in hung:  # the runner's watchdog ended them (docs/RESULTS.md, failed/)
        notes.append(f"Cell {cid} hung and has no results: {failed[cid].get('reason', 'no reason recorded')} "
                     f"(repeat {int(failed[cid].get('repeat', 0)) + 1}).")
    missing = [cid for cid in missing if cid not in failed]
    if missing:
        notes.append(f"{len(missing)} planned cell(s) have no results: " + ", ".join(missing))
    if rs.baseline() is None:
        notes.append("No baseline cell: speedups are not available.")
    keys = cell_keys(rs)
    base = rs.baseline()
    other_model = [c for c in display_order(rs) if base is not None and c.model_kind != base.model_kind]
    if other_model:
        names = "; ".join(f"{keys[c.cell_id]} ({c.model_kind}): {c.cell_id}" for c in other_model)
        notes.append(f"{len(other_model)} cell(s) train another model than the baseline's ({base.model_kind}) and "
                     f"have no speed-up: a throughput ratio across models means nothing. Cells: {names}")
    emulated = {}
    for c in display_order(rs):
        ops = c.emulated_ops()
        if ops:
            how = "; ".join(f"{op}: {v}" for op, v in ops.items())
            emulated.setdefault((c.setting("precision"), how), []).append(c.cell_id)
    for (precision, how), ids in emulated.items():
        notes.append(f"{precision} is emulated on this device ({how}) in {len(ids)} cell(s): its throughput "
                     "measures the emulation, not hardware support for that precision. Cells: " + "; ".join(ids))
    throttled = [c for c in display_order(rs) if c.summary.get("throttled") is True]
    if throttled:
        names = "; ".join(f"{c.cell_id} ({', '.join(c.summary.get('throttle_reasons') or []) or 'reason not given'})"
                          for c in throttled)
        notes.append(f"The GPU throttled its clocks during {len(throttled)} cell(s) (NVML; every sample kept, "
                     f"see repeats[].gpu_telemetry): their speed is lower than the GPU can sustain. Cells: {names}")
    for c in display_order(rs):
        util = c.summary.get("utilization")
        if isinstance(util, dict) and isinstance(util.get("warning"), str):
            notes.append(f"{c.cell_id}: {util['warning']}.")
    noise = rs.noise()
    if (noise and noise.busy) or rs.noisy_cells():
        notes.append("The machine was busy during the run or some cells' step times were noisy: see Noise.")
    for p in plots:
        if p.skipped:
            notes.append(f"{p.title} plot left out: {p.skipped}.")
    return notes


def noise_lines(rs):
    """The Noise section: the runner's warnings about machine load, what ran in busy rounds, and
    noisy cells with the runner's reasons. Warnings only: no data is hidden or dropped."""
    noise, keys = rs.noise(), cell_keys(rs)
    noisy = [c for c in display_order(rs) if c.is_noisy()]
    measured = [c for c in rs.cells if c.noise() is not None]
    if noise is None and not measured:
        return ["Not recorded: this result set comes from a runner without noise detection."]
    lines = []
    if noise is not None:
        lines += [f"Runner warning: {w}" for w in noise.warnings]
        before = noise.before
        if before is not None and (not before.busy or not noise.warnings):
            lines.append(f"Before the run: {before.describe()} ({'busy' if before.busy else 'quiet'}).")
        busy = [busy_round_text(rs, window, with_load=not noise.warnings) for window in noise.busy_rounds()]
        if busy:
            lines.append("Busy rounds: " + "; ".join(busy) + ". Their steps stay in every median and interval "
                         "(nothing is dropped), so those cells may look slower or less certain than the machine "
                         "can do.")
        elif noise.rounds:
            lines.append(f"The machine was quiet in all {len(noise.rounds)} round(s).")
    for c in noisy:
        n = c.noise()
        stats = f"robust CV {percent(n.robust_cv)}, p90/median {mr.format_number(n.p90_over_median)}"
        lines.append(f"Noisy: {keys[c.cell_id]} ({c.cell_id}): {'; '.join(n.reasons) or 'flagged by the runner'} "
                     f"({stats}).")
    if noisy:
        lines.append(f"{len(noisy)} noisy cell(s) are shown as measured, marked (noisy) in the Cells table and red "
                     "in the speedup figure; rerun on a quiet machine before relying on their numbers.")
    elif measured:
        lines.append("No cell's step times were flagged as noisy. Noise here and in the Cells table's step CV "
                     "is the robust CV (1.4826 × MAD / median of the timed steps), the measure the runner's "
                     "flag tests, beside its p90/median and outlier-step rules.")
    rule = next((c.noise().outlier_rule for c in measured if c.noise().outlier_rule), "")
    if rule:
        lines.append(f"Outlier rule: {rule}.")
    return lines


def busy_round_text(rs, window, with_load):
    """What ran in one busy round: "round 2 ran repeat 2 of every cell" (interleaved), or
    "while C (precision=...) ran: all 5 of its repeats" (sequential). Repeats count from 1."""
    order, keys = rs.run_order(), cell_keys(rs)
    load = f" ({window.describe()})" if with_load else ""
    ran = [(c, rep) for c in display_order(rs) for rep, rnd in c.repeat_rounds() if rnd == window.round]
    cells = list(dict.fromkeys(c.cell_id for c, _ in ran))
    if order is not None and order.mode == "sequential" and window.round < len(order.rounds):
        cid = order.rounds[window.round][0] if order.rounds[window.round] else "?"
        name = f"{keys[cid]} ({cid})" if cid in keys else cid
        reps = [rep for c, rep in ran if c.cell_id == cid]
        what = ""
        if reps and cid in rs.by_id:
            what = (f": all {len(reps)} of its repeats" if len(reps) == len(rs.by_id[cid].repeats)
                    else ": its repeats " + ", ".join(str(r + 1) for r in reps))
        return f"while {name} ran{load}{what}"
    what = ""
    if ran and len(ran) == len(rs.cells) and len(cells) == len(rs.cells):
        numbers = {rep for _, rep in ran}
        what = (f" ran repeat {numbers.pop() + 1} of every cell" if len(numbers) == 1
                else " ran one repeat of every cell")
    elif ran:
        what = " ran " + ", ".join(f"{keys[c.cell_id]} repeat {rep + 1}" for c, rep in ran)
    return f"round {window.round + 1}{load}{what}"
