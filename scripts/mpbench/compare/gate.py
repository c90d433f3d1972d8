#!/usr/bin/python3
"""Compare two mpbench result sets, or line up several machines side by side.

    compare.py BASE NEW [--threshold 5%] [--loss-threshold 2%] [--alpha 0.05]
               [--strict] [--allow-missing] [--json OUT]
    compare.py --generations DIR [DIR...] [--json OUT] [--plot PNG]

BASE vs NEW (same machine): per cell (matched by cell_id) and metric, the ratio
NEW/BASE and a verdict. Timing metrics are noisy: a change is judged only when
it is beyond --threshold, and then by a two-sided Student t test over the
cell's per-repeat medians (log scale) against the repeat-to-repeat spread
pooled over every cell of both sets (docs/REPORTS.md: a repeat drifts as a
whole, so repeats, not steps, are the independent samples), Holm-adjusted over
cells so that --alpha bounds the chance a clean run fails at all -- significant:
regressed (or improved); not significant: same; no spread to test against
(one repeat per cell everywhere): suspect. A Mann-Whitney U test over
step-block medians (10 consecutive blocks per repeat) is reported beside it;
it sees changes within a run but is blind to run-to-run drift.
Peak memory and losses are deterministic for a fixed seed, so they are compared
against their threshold directly. The convergence verdict (summary.convergence) regresses when it
goes from equivalent (or better) to worse; other changes are reported, not gated (compare/convergence.py).

When BASE and NEW come from different machines (manifest device kind/name/GPU)
nothing is a regression: the output is a generation table instead. The same
holds when either set was merged (runner merge) from shards that ran on
different machines (manifest.merged.mixed_machines; docs/SCALE.md).

Either way the output names every environment field that differs between the
two manifests (machine, CPU governor, libraries, compiler and build flags, git
commit and dirty flag, environment overrides; JSON "environment_differences"),
so a change can be read next to what else changed.

Exit status: 0 nothing regressed; 1 something regressed, a cell of BASE is
missing from NEW (unless --allow-missing), no cell is in both sets, or (with
--strict) a change is suspect; 2 usage error or unreadable input (the message
names the file).
"""

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from mpbench import output as mo
from mpbench import results as mr
from mpbench.compare.convergence import METRIC as CONVERGENCE, convergence_results
from mpbench.compare.generations import ratio_of, report_generations
from mpbench.results import environment_differences, environment_text, format_table
from mpbench.stats import BLOCKS_PER_REPEAT, block_medians, pooled_log_sd, pooled_t_test, u_test  # noqa: F401

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

    def block_values(self, cell):
        """The metric over step blocks: BLOCKS_PER_REPEAT consecutive-step medians per repeat."""
        ms = block_medians(cell.timed_steps())
        if self.name == "throughput":
            return cell.batch_size() / (ms / 1000.0) if ms.size else ms
        return ms

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
    strict: bool = False
    allow_missing: bool = False


@dataclass
class Result:
    """The comparison of one metric of one cell."""
    cell_id: str
    metric: str
    base: float
    new: float
    ratio: float
    verdict: str                     # improved | regressed | suspect | same | n/a
    p_value: float = None            # the deciding test: t over repeats with the pooled spread, Holm-adjusted
    n_base: int = None               # repeats per side
    n_new: int = None
    df: int = None                   # degrees of freedom of the pooled spread
    underpowered: bool = False       # no pooled spread: the change cannot be tested
    note: str = ""
    p_blocks: float = None           # U over step-block medians (reported, not deciding)
    n_blocks_base: int = None
    n_blocks_new: int = None
    p_raw: float = None              # p_value before the Holm adjustment over cells
    text: str = ""                   # shown instead of a change (the convergence verdict's transition)

    def to_json(self):
        return {k: clean(v) for k, v in self.__dict__.items()}


@dataclass
class Comparison:
    results: list = field(default_factory=list)
    only_in_base: list = field(default_factory=list)
    only_in_new: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    spreads: dict = field(default_factory=dict)   # metric -> (pooled log sd, df) of repeats

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

def direction(ratio, threshold, higher_is_better):
    """'worse' / 'better' / None depending on whether ratio moved beyond threshold."""
    if not math.isfinite(ratio):
        return None
    if ratio < 1 - threshold:
        return "better" if not higher_is_better else "worse"
    if ratio > 1 + threshold:
        return "better" if higher_is_better else "worse"
    return None


# -------------------------------------------------------------- comparing ---

def compare_noisy(metric, cid, base_cell, new_cell, spread):
    """Repeated timing measurements: the change, and the raw p of the t test over
    repeats against `spread` = (pooled log sd, degrees of freedom). judge_noisy
    gives the verdict once every cell's p is known."""
    b_rep, n_rep = metric.values(base_cell), metric.values(new_cell)
    b_blk, n_blk = metric.block_values(base_cell), metric.block_values(new_cell)
    base_v, new_v = metric.scalar(base_cell), metric.scalar(new_cell)
    sd, df = spread
    p = pooled_t_test(b_rep, n_rep, sd, df)
    return Result(cid, metric.name, base_v, new_v, ratio_of(new_v, base_v), "same", p, int(b_rep.size),
                  int(n_rep.size), df, not math.isfinite(p), "", u_test(b_blk, n_blk), int(b_blk.size),
                  int(n_blk.size), p_raw=p)


def holm_adjust(p_values):
    """Holm's step-down adjustment: the gate's alpha bounds the chance that a clean
    run fails it anywhere, not per cell (a 20-cell matrix at 5% per cell would fail
    a clean run two times in three). NaN stays NaN."""
    finite = sorted((p, i) for i, p in enumerate(p_values) if math.isfinite(p))
    adjusted, running = list(p_values), 0.0
    for rank, (p, i) in enumerate(finite):
        running = max(running, min(1.0, (len(finite) - rank) * p))
        adjusted[i] = running
    return adjusted


def judge_noisy(results, metric, opts):
    """Verdicts for one timing metric over all cells: judged only beyond the
    threshold, then by the Holm-adjusted p of the t test."""
    mine = [r for r in results if r.metric == metric.name]
    for r, p in zip(mine, holm_adjust([r.p_raw for r in mine])):
        r.p_value = p
        moved = direction(r.ratio, opts.threshold, metric.higher_is_better)
        if not math.isfinite(r.ratio):
            r.verdict, r.note = "n/a", "not recorded"
        elif moved and r.underpowered:
            # Beyond the threshold, but the data cannot tell noise from a change.
            r.verdict = "suspect" if moved == "worse" else "same"
            r.note = "beyond threshold, too few repeats to test"
        elif moved and p < opts.alpha:
            r.verdict = "regressed" if moved == "worse" else "improved"
        elif moved:
            r.note = "beyond threshold but not significant"


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


def repeat_spreads(pairs):
    """Per timing metric: the repeat-to-repeat spread (pooled log sd, degrees of
    freedom) over every matched cell of both sets. One machine and run, one spread."""
    return {m.name: pooled_log_sd([m.values(cell) for pair in pairs for cell in pair])
            for m in METRICS if m.noisy}


def compare_cells(base_cell, new_cell, opts, spreads):
    cid = base_cell.cell_id
    return [compare_noisy(m, cid, base_cell, new_cell, spreads[m.name]) if m.noisy
            else compare_deterministic(m, cid, base_cell, new_cell, opts) for m in METRICS
            ] + convergence_results(base_cell, new_cell, Result)


def power_warning(results):
    """A warning when no cell has two repeats on either side: no spread, nothing testable."""
    if not any(r.underpowered and r.n_base for r in results):
        return None
    return ("no cell has two or more repeats in either set, so the repeat-to-repeat spread is unknown and timing "
            "changes cannot be tested (verdict: suspect); record repeats >= 3 (repeats: in the experiment YAML)")


def compare_sets(base, new, opts):
    """Match cells by cell_id and compare every metric of every common cell."""
    comparison = Comparison()
    for role, rs in (("BASE", base), ("NEW", new)):
        delay = (rs.manifest.get("testing") or {}).get("inject_step_delay_ms")
        if delay:
            comparison.warnings.append(f"{role} was made with --inject-step-delay-ms {delay:g} (a planted slowdown "
                                       "for testing the gate): its timings are not measurements")
        noise = rs.noise()
        if noise and noise.busy:
            comparison.warnings.append(f"{role} ran on a busy machine (manifest noise: "
                                       f"{'; '.join(noise.warnings) or 'busy rounds'}): a timing change may be "
                                       "that load, not the code; rerun on a quiet machine before trusting it")
    base_ids, new_ids = base.by_id, new.by_id
    comparison.only_in_base = [c.cell_id for c in base.cells if c.cell_id not in new_ids]
    comparison.only_in_new = [c.cell_id for c in new.cells if c.cell_id not in base_ids]
    pairs = [(cell, new_ids[cell.cell_id]) for cell in base.cells if cell.cell_id in new_ids]
    spreads = repeat_spreads(pairs)
    comparison.spreads = spreads
    for cell, other in pairs:
        for role, c in (("BASE", cell), ("NEW", other)):
            if c.summary.get("throttled") is True:  # GPU telemetry (NVML); the samples are all in the cell
                reasons = ", ".join(c.summary.get("throttle_reasons") or []) or "reason not given"
                comparison.warnings.append(f"{c.cell_id}: the GPU throttled its clocks in {role} ({reasons}): "
                                           "a timing change may be power or heat, not the code")
        if cell.config_hash and other.config_hash and cell.config_hash != other.config_hash:
            comparison.warnings.append(f"{cell.cell_id}: configuration differs (config_hash "
                                       f"{cell.config_hash} vs {other.config_hash}); comparing anyway")
        comparison.results.extend(compare_cells(cell, other, opts, spreads))
    for m in METRICS:
        if m.noisy:
            judge_noisy(comparison.results, m, opts)
    warning = power_warning(comparison.results)
    if warning:
        comparison.warnings.insert(0, warning)
    for r in comparison.results:
        if r.verdict != "n/a" and r.metric in ("throughput", "step_time") and r.n_blocks_base == 0:
            comparison.warnings.append("BASE or NEW records no per-step times for some cells (an old or synthetic "
                                       "result set): the step-block test was not possible")
            break
    return comparison


def failures(comparison, opts):
    """Why the gate fails (empty: it passes)."""
    why = [f"REGRESSED: {r.cell_id} {r.metric} {change_text(r)}" for r in comparison.by_verdict("regressed")]
    if opts.strict:
        why += [f"SUSPECT: {r.cell_id} {r.metric} {change_text(r)} ({r.note}; --strict)"
                for r in comparison.by_verdict("suspect")]
    if comparison.only_in_base and not opts.allow_missing:
        why.append(f"MISSING: {len(comparison.only_in_base)} cell(s) of BASE are not in NEW (an interrupted "
                   f"or filtered run?): {', '.join(comparison.only_in_base)}; --allow-missing to accept")
    if not comparison.results:
        why.append("NOTHING COMPARED: no cell is present in both sets")
    return why


# ---------------------------------------------------------------- output ---

def value_text(metric_name, value):
    if metric_name == "peak_memory":
        return mr.format_bytes(value)
    return mr.format_number(value, 4 if "loss" in metric_name else 3)


def percent_change_text(ratio):
    """"+20.0%" for new/base = 1.2; a change of 10,000% or more in exponent form ("+3.0e+305%"), so a
    hand-edited 1e308 cannot print a 300-digit number (issue 33 defect 7)."""
    percent = 100 * (ratio - 1)
    return f"{percent:+.1f}%" if abs(percent) < 1e4 else f"{percent:+.1e}%"


def change_text(r):
    """Change as text: "-20.0% p=0.001 (blk 1e-06)" for noisy metrics (p of the t test over
    repeats, then of the U test over step blocks), "+0.0%" for deterministic ones; "p=?" = untestable."""
    if r.text:
        return r.text
    text = percent_change_text(r.ratio) if mr.finite(r.ratio) else (r.note or "—")
    if r.p_value is not None:
        text += f" p={r.p_value:.3g}" if mr.finite(r.p_value) else " p=?"
    if r.p_blocks is not None and mr.finite(r.p_blocks):
        text += f" (blk {r.p_blocks:.2g})"
    return text


def verdict_text(results):
    """One cell's overall verdict: which metrics regressed / improved, and any caveats
    (a change beyond the threshold that the U test could not confirm)."""
    parts = []
    for verdict, label in (("regressed", "REGRESSED"), ("suspect", "SUSPECT"), ("improved", "improved")):
        names = [r.metric for r in results if r.verdict == verdict]
        if names:
            parts.append(label + ": " + ", ".join(names))
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
    columns = [m.name for m in METRICS] + [CONVERGENCE]
    rows = []
    for cid, results in by_cell.items():
        changes = {r.metric: change_text(r) for r in results}
        rows.append([cid] + [changes.get(name, "—") for name in columns] + [verdict_text(results)])
    return format_table([["cell"] + columns + ["verdict"]], rows, align="l" + "r" * len(columns) + "l")


def details_table_text(results):
    """Absolute values for the metrics that changed verdict, so a reader sees the size of the change."""
    rows = [[r.cell_id, r.metric, value_text(r.metric, r.base), value_text(r.metric, r.new), change_text(r),
             r.verdict] for r in results]
    return format_table([["cell", "metric", "base", "new", "change", "verdict"]], rows, align="llrrrl")


def describe_set(role, rs):
    m = rs.manifest
    return (f"{role:<4} {rs.path}  [{rs.experiment}; {rs.machine_label()}; "
            f"git {m.get('git_commit') or '?'}; {len(rs.cells)} cells]")


def spread_text(spreads):
    sd, df = spreads.get("step_time", (math.nan, 0))
    return f": {100 * sd:.1f}% with {df} degrees of freedom" if df else ": none, one repeat per cell"


def print_only_in(comparison):
    for role, ids in (("BASE", comparison.only_in_base), ("NEW", comparison.only_in_new)):
        if ids:
            print(f"\nOnly in {role} ({len(ids)}): " + ", ".join(ids))


def print_comparison(base, new, comparison, opts, environment=()):
    print(describe_set("BASE", base))
    print(describe_set("NEW", new))
    print(environment_text(environment) + "\n")
    print(f"threshold {100 * opts.threshold:g}% (throughput, step time, peak memory), "
          f"loss threshold {100 * opts.loss_threshold:g}%, alpha {opts.alpha:g}"
          f"{', strict' if opts.strict else ''}{', missing cells allowed' if opts.allow_missing else ''}\n")
    for w in comparison.warnings:
        print(f"warning: {w}")
    if comparison.warnings:
        print()
    if comparison.results:
        print("Change NEW vs BASE (p: two-sided t over per-repeat medians against the repeat-to-repeat "
              f"spread pooled over all cells{spread_text(comparison.spreads)}, Holm-adjusted over cells; blk: Mann-Whitney U over "
              f"step-block medians, {BLOCKS_PER_REPEAT} per repeat, blind to run-to-run drift)")
        print(comparison_table_text(comparison))
    else:
        print("No cell is present in both sets.")
    print_only_in(comparison)
    judged = [r for r in comparison.results if r.verdict in ("regressed", "suspect", "improved")]
    if judged:
        print("\n" + details_table_text(judged))
    print(f"\n{len(comparison.by_verdict('regressed'))} regressed, {len(comparison.by_verdict('suspect'))} suspect, "
          f"{len(comparison.by_verdict('improved'))} improved, {len(comparison.by_verdict('same'))} same "
          f"(of {len(comparison.results)} cell metrics)")
    for line in failures(comparison, opts):
        print(line)


def write_json(path, payload):
    """By mpbench.output's rule: a regular file atomically, a device, FIFO or
    /dev/stdout in place; the path was checked before the comparison ran."""
    mo.write_output(path, json.dumps(clean(payload), indent=1, allow_nan=False))


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
        value = None
    if value is None or not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"alpha must be a number in (0, 1), got {text!r}")
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
                   help="level for the Holm-adjusted p of the t test over repeat medians (Mann-Whitney U: shown only)")
    p.add_argument("--strict", action="store_true",
                   help="also fail (exit 1) on a change beyond the threshold that too few samples can test (suspect)")
    p.add_argument("--allow-missing", action="store_true",
                   help="do not fail when cells of BASE are missing from NEW (they are still listed)")
    p.add_argument("--json", metavar="OUT", help="write everything machine-readable to OUT (a file is replaced atomically; -, "
                   "a device, a FIFO or /dev/stdout is written in place; a directory is refused)")
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


def run(args):
    """Everything after argument parsing; returns (exit code, JSON payload)."""
    payload = {"threshold": args.threshold, "loss_threshold": args.loss_threshold, "alpha": args.alpha}
    code = EXIT_OK
    if args.base:
        base, new = mr.load_results(args.base), mr.load_results(args.new)
        payload.update(base=set_json(base), new=set_json(new))
        # A merged set whose shards ran on different machines is a generation
        # comparison in itself, even against a set of the same mixture.
        mixed = [rs.path for rs in (base, new) if rs.mixed_machines()]
        same_machine = base.machine_identity() == new.machine_identity() and not mixed
        payload["same_machine"] = same_machine
        environment = environment_differences(base.manifest, new.manifest)
        payload["environment_differences"] = environment
        if same_machine:
            opts = Options(args.threshold, args.loss_threshold, args.alpha, args.strict, args.allow_missing)
            comparison = compare_sets(base, new, opts)
            print_comparison(base, new, comparison, opts, environment)
            why = failures(comparison, opts)
            payload.update(results=[r.to_json() for r in comparison.results],
                           only_in_base=comparison.only_in_base, only_in_new=comparison.only_in_new,
                           warnings=comparison.warnings,
                           regressions=[r.to_json() for r in comparison.by_verdict("regressed")],
                           suspects=[r.to_json() for r in comparison.by_verdict("suspect")],
                           improvements=[r.to_json() for r in comparison.by_verdict("improved")],
                           failures=why, strict=args.strict, allow_missing=args.allow_missing,
                           blocks_per_repeat=BLOCKS_PER_REPEAT,
                           repeat_spread={k: {"log_sd": sd, "df": df} for k, (sd, df) in comparison.spreads.items()})
            code = EXIT_REGRESSION if why else EXIT_OK
        else:
            print(describe_set("BASE", base))
            print(describe_set("NEW", new))
            print(environment_text(environment))
            if mixed:
                print(f"\n{' and '.join(mixed)}: merged from shards that ran on different machines "
                      "(manifest.merged.mixed_machines): differences are generational, not regressions; "
                      "no verdicts.\n")
            else:
                print(f"\nBASE and NEW ran on different machines ({base.machine_label()} vs {new.machine_label()}): "
                      "differences are generational, not regressions; no verdicts.\n")
            payload["generations"] = report_generations([base, new], plot_path(args), "Generation table")
            comparison = compare_sets(base, new, Options())
            print_only_in(comparison)
            payload.update(only_in_base=comparison.only_in_base, only_in_new=comparison.only_in_new)
    if args.generations:
        sets = [mr.load_results(d) for d in args.generations]
        if args.base:
            print()
        payload["generations"] = report_generations(sets, plot_path(args), "Generation table")
    payload["exit_code"] = code
    return code, payload


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.base) != bool(args.new):
        parser.error("give both BASE and NEW (or only --generations DIR...)")
    if not args.base and not args.generations:
        parser.error("nothing to do: give BASE NEW and/or --generations DIR...")
    # Output paths before any work: a directory or a missing parent exits 2 now.
    mo.exit_if_unwritable("--json", args.json)
    mo.exit_if_unwritable("--plot", plot_path(args) if args.generations else None)
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
