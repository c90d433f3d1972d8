#!/usr/bin/python3
"""Compare two mpbench result sets, or line up several machines side by side.

    compare.py BASE NEW [--threshold 5%] [--loss-threshold 2%] [--alpha 0.05] [--json OUT]
    compare.py --generations DIR [DIR...] [--json OUT] [--plot PNG]

BASE vs NEW (same machine): per cell (matched by cell_id) and metric, the ratio
NEW/BASE and a verdict. Timing metrics are noisy, so a regression needs both a
Mann-Whitney U test over the per-repeat values (two-sided, as Google
Benchmark's tools/compare.py does) with p < alpha AND a change beyond
--threshold in the worse direction. Peak memory and losses are deterministic
for a fixed seed, so they are compared against their threshold directly.

When BASE and NEW come from different machines (manifest device kind/name/GPU)
nothing is a regression: the output is a generation table instead.

Exit status: 0 nothing regressed; 1 something regressed (gate CI on this);
2 usage error or unreadable input (the message names the file).
"""

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpbench_results as mr  # noqa: E402

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE = 0, 1, 2

# Default for --loss-threshold. Losses are deterministic for a fixed seed on one
# machine and build, so any difference comes from a code or library change.
# Legitimate changes (a fused kernel or a new oneDNN/cuBLAS summing in a different
# order) perturb a low-precision trajectory at about the rounding level of the
# narrowest format: bf16 keeps 8 significand bits (relative step 2^-8 = 0.4%),
# and final_loss already averages the last 10% of steps over all repeats, which
# damps that further. Numerical bugs (gradients lost to underflow, a broken loss
# scale, a wrong cast) cost several percent or diverge outright. 2% sits between
# the two; tighten it for fp32-only matrices, loosen it for very short runs.
DEFAULT_LOSS_THRESHOLD = 0.02
DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Metric:
    """How to read, and judge, one compared quantity."""
    name: str
    unit: str
    higher_is_better: bool
    repeats_key: str = None          # per-repeat list in the summary (noisy metrics)
    summary_key: str = None          # scalar fallback / deterministic value
    memory: bool = False
    loss: bool = False

    @property
    def noisy(self):
        return self.repeats_key is not None

    def values(self, cell):
        """Per-repeat values of a noisy metric (finite only)."""
        values = cell.summary_list(self.repeats_key)
        return values[np.isfinite(values)]

    def scalar(self, cell):
        """The single value shown for a cell (median over repeats for noisy metrics)."""
        if self.noisy:
            values = self.values(cell)
            if values.size:
                return float(np.median(values))
        if self.memory:
            return cell.memory("total")
        return cell.summary_value(self.summary_key)

    def recorded(self, cell):
        """False when the field is absent altogether (not recorded), as opposed to null (non-finite)."""
        if self.memory:
            return "total" in (cell.summary.get("peak_memory_bytes") or {})
        if self.noisy:
            return (bool(cell.summary.get(self.repeats_key))
                    or mr.dotted_get(cell.summary, self.summary_key) is not None)
        return self.summary_key in cell.summary


METRICS = [
    Metric("throughput", "samples/s", True, "samples_per_s_repeats", "samples_per_s"),
    Metric("step_time", "ms", False, "step_time_ms_repeats", "step_time_ms.median"),
    Metric("peak_memory", "bytes", False, memory=True),
    Metric("final_loss", "", False, summary_key="final_loss", loss=True),
    Metric("eval_loss", "", False, summary_key="eval_loss", loss=True),
]


@dataclass
class Options:
    threshold: float = DEFAULT_THRESHOLD
    loss_threshold: float = DEFAULT_LOSS_THRESHOLD
    alpha: float = DEFAULT_ALPHA


@dataclass
class Result:
    """The comparison of one metric of one cell."""
    cell_id: str
    metric: str
    base: float
    new: float
    ratio: float
    verdict: str                     # improved | regressed | same | n/a
    p_value: float = None
    n_base: int = None
    n_new: int = None
    underpowered: bool = False       # the U test cannot reach alpha with these repeat counts
    note: str = ""

    def to_json(self):
        return {k: clean(v) for k, v in self.__dict__.items()}


@dataclass
class Comparison:
    results: list = field(default_factory=list)
    only_in_base: list = field(default_factory=list)
    only_in_new: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def by_verdict(self, verdict):
        return [r for r in self.results if r.verdict == verdict]


def clean(value):
    """JSON-safe: NaN/inf become null (json.dump would otherwise write invalid NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (np.floating, np.integer)):
        return clean(value.item())
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


# ------------------------------------------------------------- statistics ---

def min_attainable_p(n1, n2):
    """Smallest two-sided exact Mann-Whitney p for sample sizes n1, n2 (complete separation)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def repeats_needed(alpha):
    """Repeats per side for which the U test can reach p < alpha at all."""
    n = 1
    while min_attainable_p(n, n) >= alpha and n < 100:
        n += 1
    return n


def u_test(base, new):
    """Two-sided Mann-Whitney U p-value; 1.0 when the samples cannot be told apart."""
    from scipy.stats import mannwhitneyu
    if base.size == 0 or new.size == 0:
        return math.nan
    if np.all(base == base[0]) and np.all(new == base[0]):
        return 1.0                     # all equal: scipy would warn/return nan
    p = mannwhitneyu(base, new, alternative="two-sided").pvalue
    return float(p) if math.isfinite(p) else 1.0


def direction(ratio, threshold, higher_is_better):
    """'worse' / 'better' / None depending on whether ratio moved beyond threshold."""
    if not math.isfinite(ratio):
        return None
    if ratio < 1 - threshold:
        return "better" if not higher_is_better else "worse"
    if ratio > 1 + threshold:
        return "better" if higher_is_better else "worse"
    return None


def ratio_of(new, base):
    if not (mr.finite(new) and mr.finite(base)):
        return math.nan
    if base == 0:
        return 1.0 if new == 0 else math.inf
    return new / base


# -------------------------------------------------------------- comparing ---

def compare_noisy(metric, cid, base_cell, new_cell, opts):
    """Repeated timing measurements: U test AND threshold must both agree."""
    b, n = metric.values(base_cell), metric.values(new_cell)
    base_v, new_v = metric.scalar(base_cell), metric.scalar(new_cell)
    ratio = ratio_of(new_v, base_v)
    p = u_test(b, n)
    underpowered = min_attainable_p(b.size, n.size) >= opts.alpha
    moved = direction(ratio, opts.threshold, metric.higher_is_better)
    verdict, note = "same", ""
    if not math.isfinite(ratio):
        verdict, note = "n/a", "not recorded"
    elif mr.finite(p) and p < opts.alpha and moved:
        verdict = "regressed" if moved == "worse" else "improved"
    elif moved and underpowered:
        note = "beyond threshold but too few repeats to test"
    elif moved:
        note = "beyond threshold but not significant"
    return Result(cid, metric.name, base_v, new_v, ratio, verdict, p, int(b.size), int(n.size), underpowered, note)


def compare_deterministic(metric, cid, base_cell, new_cell, opts):
    """Memory and losses: no noise to test, the threshold alone decides."""
    threshold = opts.loss_threshold if metric.loss else opts.threshold
    base_v, new_v = metric.scalar(base_cell), metric.scalar(new_cell)
    if not (metric.recorded(base_cell) and metric.recorded(new_cell)):
        return Result(cid, metric.name, base_v, new_v, math.nan, "n/a", note="not recorded in both sets")
    if metric.loss and mr.finite(base_v) != mr.finite(new_v):
        # null in a loss field means the run diverged (non-finite loss).
        verdict = "regressed" if mr.finite(base_v) else "improved"
        return Result(cid, metric.name, base_v, new_v, math.nan, verdict,
                      note="non-finite in " + ("NEW" if mr.finite(base_v) else "BASE"))
    ratio = ratio_of(new_v, base_v)
    moved = direction(ratio, threshold, metric.higher_is_better)
    verdict = {"worse": "regressed", "better": "improved", None: "same"}[moved]
    if not math.isfinite(ratio) and not (mr.finite(base_v) or mr.finite(new_v)):
        verdict = "n/a"
    return Result(cid, metric.name, base_v, new_v, ratio, verdict)


def compare_cells(base_cell, new_cell, opts):
    cid = base_cell.cell_id
    return [(compare_noisy if m.noisy else compare_deterministic)(m, cid, base_cell, new_cell, opts)
            for m in METRICS]


def power_warning(results, alpha):
    """A warning when some noisy metric could not possibly reach p < alpha."""
    weak = [r for r in results if r.underpowered and r.n_base is not None]
    if not weak:
        return None
    sizes = sorted({(r.n_base, r.n_new) for r in weak})
    best = min(min_attainable_p(a, b) for a, b in sizes)
    counts = ", ".join(f"{a} vs {b}" for a, b in sizes)
    return (f"with {counts} repeats the smallest attainable Mann-Whitney p-value is {best:.3g} >= alpha={alpha:g}, "
            f"so timing changes cannot be called significant; use at least {repeats_needed(alpha)} repeats "
            "per result set (repeats: in the experiment YAML)")


def compare_sets(base, new, opts):
    """Match cells by cell_id and compare every metric of every common cell."""
    comparison = Comparison()
    base_ids, new_ids = base.by_id, new.by_id
    comparison.only_in_base = [c.cell_id for c in base.cells if c.cell_id not in new_ids]
    comparison.only_in_new = [c.cell_id for c in new.cells if c.cell_id not in base_ids]
    for cell in base.cells:
        other = new_ids.get(cell.cell_id)
        if other is None:
            continue
        if cell.config_hash and other.config_hash and cell.config_hash != other.config_hash:
            comparison.warnings.append(f"{cell.cell_id}: configuration differs (config_hash "
                                       f"{cell.config_hash} vs {other.config_hash}); comparing anyway")
        comparison.results.extend(compare_cells(cell, other, opts))
    warning = power_warning(comparison.results, opts.alpha)
    if warning:
        comparison.warnings.insert(0, warning)
    return comparison


# ------------------------------------------------------------ generations ---

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
        rows.append({"cell_id": cid, "speedup_vs_own_fp32": speedups, "throughput_vs_first": ratios,
                     "samples_per_s": [throughput(rs.by_id.get(cid)) for rs in sets]})
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
    rows = []
    for row in gen["rows"]:
        rows.append([row["cell_id"]] + [x_text(v) for v in row["speedup_vs_own_fp32"]] +
                    [x_text(v) for v in row["throughput_vs_first"][1:]])
    return format_table([header], rows, groups=groups)


def tick_label(cell_id):
    """A cell id stacked one setting per line, precision without its key: fits under a bar group."""
    parts = [p[len("precision="):] if p.startswith("precision=") else p for p in cell_id.split(",")]
    return "\n".join(parts)


def plot_generations(gen, path):
    """Grouped bars: per cell, one bar per machine (speedup vs own fp32); below, vs the first machine."""
    import matplotlib
    matplotlib.use("Agg")
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
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- output ---

def format_table(headers, rows, align=None, groups=None):
    """Fixed-width text table.

    headers: list of header rows; align: one 'l'/'r' per column (default: first
    column left, numbers right); groups: [(column, text)] printed above the
    header starting at that column, free to overflow to the right, so a long
    group title does not widen its first column.
    """
    all_rows = headers + rows
    ncols = len(all_rows[0])
    align = align or "l" + "r" * (ncols - 1)
    widths = [max(len(str(r[i])) if i < len(r) else 0 for r in all_rows) for i in range(ncols)]
    lines = []
    if groups:
        starts = [sum(widths[:i]) + 2 * i for i in range(ncols)]
        line = ""
        for col, text in groups:
            line = line.ljust(starts[col]) + text + " "
        lines.append(line.rstrip())
    for j, row in enumerate(all_rows):
        cells = [str(v).ljust(w) if align[i] == "l" or j < len(headers) else str(v).rjust(w)
                 for i, (v, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if j == len(headers) - 1:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def value_text(metric_name, value):
    if metric_name == "peak_memory":
        return mr.format_bytes(value)
    return mr.format_number(value, 4 if "loss" in metric_name else 3)


def change_text(r):
    """Change as text: "-20.0% p=0.008" for noisy metrics, "+0.0%" for deterministic ones; † = underpowered."""
    text = f"{100 * (r.ratio - 1):+.1f}%" if mr.finite(r.ratio) else (r.note or "—")
    if r.p_value is not None and mr.finite(r.p_value):
        text += f" p={r.p_value:.3f}" + ("†" if r.underpowered else "")
    return text


def verdict_text(results):
    """One cell's overall verdict: which metrics regressed / improved, and any caveats
    (a change beyond the threshold that the U test could not confirm)."""
    parts = []
    for verdict in ("regressed", "improved"):
        names = [r.metric for r in results if r.verdict == verdict]
        if names:
            parts.append(("REGRESSED" if verdict == "regressed" else "improved") + ": " + ", ".join(names))
    notes = {}
    for r in results:
        if r.note and r.verdict not in ("regressed", "improved"):
            notes.setdefault(r.note, []).append(r.metric)
    caveats = [f"{note}: {', '.join(names)}" for note, names in notes.items()]
    return "; ".join((parts or ["same"]) + caveats)


def comparison_table_text(comparison):
    """One row per cell, one column per metric (change NEW vs BASE), then the verdict."""
    by_cell = {}
    for r in comparison.results:
        by_cell.setdefault(r.cell_id, []).append(r)
    header = ["cell"] + [m.name for m in METRICS] + ["verdict"]
    rows = []
    for cid, results in by_cell.items():
        changes = {r.metric: change_text(r) for r in results}
        rows.append([cid] + [changes.get(m.name, "—") for m in METRICS] + [verdict_text(results)])
    return format_table([header], rows, align="l" + "r" * len(METRICS) + "l")


def details_table_text(results):
    """Absolute values for the metrics that changed verdict, so a reader sees the size of the change."""
    rows = [[r.cell_id, r.metric, value_text(r.metric, r.base), value_text(r.metric, r.new), change_text(r),
             r.verdict] for r in results]
    return format_table([["cell", "metric", "base", "new", "change", "verdict"]], rows, align="llrrrl")


def describe_set(role, rs):
    m = rs.manifest
    return (f"{role:<4} {rs.path}  [{rs.experiment}; {rs.machine_label()}; "
            f"git {m.get('git_commit') or '?'}; {len(rs.cells)} cells]")


def print_only_in(comparison):
    for role, ids in (("BASE", comparison.only_in_base), ("NEW", comparison.only_in_new)):
        if ids:
            print(f"\nOnly in {role} ({len(ids)}): " + ", ".join(ids))


def print_comparison(base, new, comparison, opts):
    print(describe_set("BASE", base))
    print(describe_set("NEW", new))
    print(f"threshold {100 * opts.threshold:g}% (throughput, step time, peak memory), "
          f"loss threshold {100 * opts.loss_threshold:g}%, alpha {opts.alpha:g}\n")
    for w in comparison.warnings:
        print(f"warning: {w}")
    if comparison.warnings:
        print()
    if comparison.results:
        print("Change NEW vs BASE (p: two-sided Mann-Whitney U over repeats)")
        print(comparison_table_text(comparison))
        if any(r.underpowered for r in comparison.results):
            print("† the U test cannot reach alpha with this many repeats")
    else:
        print("No cell is present in both sets.")
    print_only_in(comparison)
    regressed, improved = comparison.by_verdict("regressed"), comparison.by_verdict("improved")
    if regressed or improved:
        print("\n" + details_table_text(regressed + improved))
    print(f"\n{len(regressed)} regressed, {len(improved)} improved, "
          f"{len(comparison.by_verdict('same'))} same (of {len(comparison.results)} cell metrics)")
    for r in regressed:
        print(f"REGRESSED: {r.cell_id} {r.metric} {change_text(r)}")


def write_json(path, payload):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(clean(payload), f, indent=1, allow_nan=False)
    os.replace(path + ".tmp", path)


def set_json(rs):
    return {"path": rs.path, "experiment": rs.experiment, "machine": rs.machine_label(),
            "identity": list(rs.machine_identity()), "git_commit": rs.manifest.get("git_commit")}


# ------------------------------------------------------------------- CLI ---

def parse_fraction(text):
    """'5%' -> 0.05, '0.05' -> 0.05. A bare number is a fraction (as in Google Benchmark)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage like 5% or a fraction like 0.05, got {text!r}")
    if not (0 <= value < 10) or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"out of range: {text!r}")
    return value


def parse_alpha(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"alpha must be in (0, 1), got {text!r}")
    return value


def build_parser():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 no regression, 1 regression (use as a CI gate), 2 usage or input error.")
    p.add_argument("base", nargs="?", help="baseline result directory (holds manifest.json, cells/)")
    p.add_argument("new", nargs="?", help="new result directory")
    p.add_argument("--threshold", type=parse_fraction, default=DEFAULT_THRESHOLD,
                   help="relative change that counts for throughput, step time, memory (default 5%%)")
    p.add_argument("--loss-threshold", type=parse_fraction, default=DEFAULT_LOSS_THRESHOLD,
                   help="relative loss increase that regresses (default 2%%)")
    p.add_argument("--alpha", type=parse_alpha, default=DEFAULT_ALPHA,
                   help="significance level of the Mann-Whitney U test (default 0.05)")
    p.add_argument("--json", metavar="OUT", help="write everything machine-readable to OUT")
    p.add_argument("--generations", nargs="+", metavar="DIR",
                   help="result directories, one per machine: speedups side by side (put BASE NEW first)")
    p.add_argument("--plot", metavar="PNG", help="where to write the generations plot "
                   "(default: next to --json as <OUT stem>_generations.png)")
    return p


def plot_path(args):
    if args.plot:
        return args.plot
    if args.json:
        return os.path.splitext(args.json)[0] + "_generations.png"
    return None


def report_generations(sets, args, title):
    """Print the generation table (and plot it when a destination is known)."""
    gen = generations(sets)
    print(title)
    print(generation_table_text(gen))
    print("\nspeedup: samples/s over the same machine's fp32 (fusion off) cell with the same other settings")
    path = plot_path(args)
    if path:
        plot_generations(gen, path)
        gen["plot"] = path
        print(f"plot: {path}")
    else:
        print("(no plot written: pass --plot PNG or --json OUT)")
    return gen


def run(args):
    """Everything after argument parsing; returns (exit code, JSON payload)."""
    payload = {"threshold": args.threshold, "loss_threshold": args.loss_threshold, "alpha": args.alpha}
    code = EXIT_OK
    if args.base:
        base, new = mr.load_results(args.base), mr.load_results(args.new)
        payload.update(base=set_json(base), new=set_json(new))
        same_machine = base.machine_identity() == new.machine_identity()
        payload["same_machine"] = same_machine
        if same_machine:
            opts = Options(args.threshold, args.loss_threshold, args.alpha)
            comparison = compare_sets(base, new, opts)
            print_comparison(base, new, comparison, opts)
            payload.update(results=[r.to_json() for r in comparison.results],
                           only_in_base=comparison.only_in_base, only_in_new=comparison.only_in_new,
                           warnings=comparison.warnings,
                           regressions=[r.to_json() for r in comparison.by_verdict("regressed")],
                           improvements=[r.to_json() for r in comparison.by_verdict("improved")],
                           repeats_needed=repeats_needed(args.alpha))
            code = EXIT_REGRESSION if comparison.by_verdict("regressed") else EXIT_OK
        else:
            print(describe_set("BASE", base))
            print(describe_set("NEW", new))
            print(f"\nBASE and NEW ran on different machines ({base.machine_label()} vs {new.machine_label()}): "
                  "differences are generational, not regressions; no verdicts.\n")
            payload["generations"] = report_generations([base, new], args, "Generation table")
            comparison = compare_sets(base, new, Options())
            print_only_in(comparison)
            payload.update(only_in_base=comparison.only_in_base, only_in_new=comparison.only_in_new)
    if args.generations:
        sets = [mr.load_results(d) for d in args.generations]
        if args.base:
            print()
        payload["generations"] = report_generations(sets, args, "Generation table")
    payload["exit_code"] = code
    return code, payload


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.base) != bool(args.new):
        parser.error("give both BASE and NEW (or only --generations DIR...)")
    if not args.base and not args.generations:
        parser.error("nothing to do: give BASE NEW and/or --generations DIR...")
    try:
        code, payload = run(args)
        if args.json:
            write_json(args.json, payload)
    except mr.ResultsError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:                         # includes a closed stdout pipe: not a pass
        where = f"{e.filename}: " if e.filename else ""
        print(f"compare.py: error: {where}{e.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
