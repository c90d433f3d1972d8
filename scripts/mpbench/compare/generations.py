"""The generation table: the same matrix on several machines, side by side
(compare.py --generations, and compare.py BASE NEW across machines).

Per cell: its speed-up over each machine's own fp32 cell (what each technique
buys on that machine) and its throughput relative to the first machine, with
the sample counts behind each number; and samples per joule on each machine
where its runner could read an energy counter (NVML, RAPL).
"""

import io
import math
import os

import numpy as np

from mpbench import output as mo
from mpbench import results as mr
from mpbench.results import format_table
from mpbench.stats import BLOCKS_PER_REPEAT, block_medians


def ratio_of(new, base):
    if not (mr.finite(new) and mr.finite(base)):
        return math.nan
    if base == 0:
        return 1.0 if new == 0 else math.inf
    return new / base


def unique_labels(sets):
    """Machine names as column headers, disambiguated by directory when two are equal."""
    labels = [rs.machine_label() for rs in sets]
    return [f"{label} ({os.path.basename(os.path.normpath(rs.path))})" if labels.count(label) > 1 else label
            for label, rs in zip(labels, sets)]


def throughput(cell):
    return cell.summary_value("samples_per_s") if cell is not None else math.nan


def generation_rows(sets):
    """Per cell id: speedup over each machine's own fp32 cell, and throughput vs the first machine."""
    order = list(dict.fromkeys(c.cell_id for rs in sets for c in rs.cells))
    rows = []
    for cid in order:
        speedups, ratios = [], []
        first = sets[0].by_id.get(cid)
        for rs in sets:
            cell = rs.by_id.get(cid)
            ref = mr.fp32_reference(rs, cell) if cell is not None else None
            speedups.append(ratio_of(throughput(cell), throughput(ref)) if ref is not None else math.nan)
            ratios.append(ratio_of(throughput(cell), throughput(first)))
        cells = [rs.by_id.get(cid) for rs in sets]
        rows.append({"cell_id": cid, "speedup_vs_own_fp32": speedups, "throughput_vs_first": ratios,
                     "samples_per_s": [throughput(c) for c in cells],
                     "samples_per_joule": [c.summary_value("samples_per_joule") if c is not None else math.nan
                                           for c in cells],
                     "repeats": [len(c.repeats) if c is not None else 0 for c in cells],
                     "step_blocks": [int(block_medians(c.timed_steps()).size) if c is not None else 0
                                     for c in cells]})
    return rows


def generations(sets):
    """The machine-readable generation table."""
    return {"machines": unique_labels(sets),
            "dirs": [rs.path for rs in sets],
            "identities": [list(rs.machine_identity()) for rs in sets],
            "rows": generation_rows(sets)}


def x_text(value, digits=2):
    return f"{value:.{digits}f}×" if mr.finite(value) else "—"


def generation_table_text(gen):
    """Two header rows: what the column group means, then the machine names."""
    machines = gen["machines"]
    header = ["cell"] + machines
    groups = [(1, "speedup vs own fp32 ->")]
    if len(machines) > 1:
        header += machines[1:]
        groups.append((len(machines) + 1, f"samples/s ÷ {machines[0]} ->"))
    energy = any(mr.finite(v) for row in gen["rows"] for v in row.get("samples_per_joule", []))
    if energy:
        groups.append((len(header), "samples/J ->"))
        header += machines
    rows = []
    for row in gen["rows"]:
        rows.append([row["cell_id"]] + [x_text(v) for v in row["speedup_vs_own_fp32"]] +
                    [x_text(v) for v in row["throughput_vs_first"][1:]] +
                    ([mr.format_number(v) if mr.finite(v) else "—" for v in row["samples_per_joule"]]
                     if energy else []))
    return format_table([header], rows, groups=groups)


def tick_label(cell_id):
    """A cell id stacked one setting per line, precision without its key: fits under a bar group."""
    parts = [p[len("precision="):] if p.startswith("precision=") else p for p in cell_id.split(",")]
    return "\n".join(parts)


def plot_generations(gen, path):
    """Grouped bars: per cell, one bar per machine (speedup vs own fp32); below, vs the first machine."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False   # a `$` in a cell id is text, not mathtext
    import matplotlib.pyplot as plt

    rows, machines = gen["rows"], gen["machines"]
    n, k = len(rows), len(machines)
    panels = 2 if k > 1 else 1
    fig, axes = plt.subplots(panels, 1, figsize=(max(8.0, (0.35 * k + 0.6) * n + 2), 3.8 * panels + 1),
                             squeeze=False, sharex=True)
    x = np.arange(n)
    width = 0.8 / k
    for a, (key, title, ylabel) in enumerate([
            ("speedup_vs_own_fp32", "Speedup over each machine's own fp32 cell", "speedup (×)"),
            ("throughput_vs_first", f"Throughput relative to {machines[0]}", f"samples/s ÷ {machines[0]} (×, log)")
    ][:panels]):
        ax = axes[a][0]
        for i, machine in enumerate(machines):
            values = [r[key][i] if mr.finite(r[key][i]) else np.nan for r in rows]
            ax.bar(x - 0.4 + width * (i + 0.5), values, width, label=machine, color=f"C{i}")
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        if key == "throughput_vs_first":
            ax.set_yscale("log")
        ax.set_xticks(x, [tick_label(r["cell_id"]) for r in rows], fontsize=8)
        ax.legend(fontsize=8, title="machine", title_fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[-1][0].set_xlabel("cell")
    fig.suptitle("Generations: " + " vs ".join(machines), fontsize=11)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    mo.write_output(path, png.getvalue())  # compare.py checked the path before the work


def sample_counts_text(gen):
    """The samples behind the table's numbers, per machine: the same counts
    compare.py's tests use (repeats, and step blocks of BLOCKS_PER_REPEAT per repeat)."""
    lines = []
    for i, machine in enumerate(gen["machines"]):
        reps = [r["repeats"][i] for r in gen["rows"] if r["repeats"][i]]
        blocks = [r["step_blocks"][i] for r in gen["rows"] if r["repeats"][i]]
        if reps:
            lines.append(f"  {machine}: {min(reps)}-{max(reps)} repeats per cell, "
                         f"{min(blocks)}-{max(blocks)} step blocks ({BLOCKS_PER_REPEAT} per repeat)")
    return "samples per cell:\n" + "\n".join(lines) if lines else ""


def report_generations(sets, plot_path, title):
    """Print the generation table (and plot it when a destination is known)."""
    gen = generations(sets)
    print(title)
    print(generation_table_text(gen))
    print("\nspeedup: samples/s over the same machine's fp32 (fusion off) cell with the same other settings")
    counts = sample_counts_text(gen)
    if counts:
        print(counts)
    path = plot_path
    if path:
        plot_generations(gen, path)
        gen["plot"] = path
        print(f"plot: {path}")
    else:
        print("(no plot written: pass --plot PNG or --json OUT)")
    return gen
