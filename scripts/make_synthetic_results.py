#!/usr/bin/python3
"""Write a synthetic, valid mpbench result directory (docs/RESULTS.md).

Why: report.py and compare.py must be testable (and demo-able) without
building the C++ runner or owning a GPU. The numbers are plausible, not
measured: throughput follows a per-machine speed profile with seeded
multiplicative noise, losses decay exponentially, a dynamic loss scale backs
off and grows, and amp cells carry gradient-exponent histograms.

Two knobs make regression tests exact:
  * `seed` drives everything that is deterministic in a real run (losses,
    memory); `noise_seed` drives timing noise only, so a second run of the
    "same" benchmark is `noise_seed + 1` with identical losses;
  * `throughput_factor` scales one cell's throughput in every repeat without
    changing any random draw, so a 0.8 factor is a clean 20% regression.

Usage: make_synthetic_results.py OUT [--machine cpu|a100|h100] [--slow CELL=FACTOR]...
"""

import argparse
import json
import math
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpbench_results import FP16_MAX_LOG2, FP16_MIN_SUBNORMAL_LOG2, MEMORY_CATEGORIES, slugify  # noqa: E402

# Per-machine identity (manifest "device") and speed profile.
MACHINES = {
    "cpu": {
        "device": {"kind": "cpu", "name": "AMD EPYC 7B13 (synthetic)", "gpu": None},
        "base_samples_per_s": 20000.0,
        "precision_speed": {"fp32": 1.0, "tf32": 1.0, "amp_bf16": 1.45, "amp_fp16": 0.7},
        "emulated": {"tf32": "fp32 (no tf32 on CPU)", "amp_fp16": "fp32 compute, fp16 rounding"},
        "ceiling_gflops": {"fp32": 1200.0, "tf32": 1200.0, "amp_bf16": 2400.0, "amp_fp16": 1200.0},
        "libraries": {"cuda_runtime": None, "cuda_driver": None, "cublas": None, "cudnn": None},
    },
    "a100": {
        "device": {"kind": "cuda", "name": "cuda:0",
                   "gpu": {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0",
                           "memory_bytes": 40 * 2**30}},
        "base_samples_per_s": 400000.0,
        "precision_speed": {"fp32": 1.0, "tf32": 2.6, "amp_bf16": 4.1, "amp_fp16": 4.2},
        "emulated": {},
        "ceiling_gflops": {"fp32": 19500.0, "tf32": 156000.0, "amp_bf16": 312000.0, "amp_fp16": 312000.0},
        "libraries": {"cuda_runtime": "12.2", "cuda_driver": "535.104", "cublas": "12.2.5", "cudnn": None},
    },
    "h100": {
        "device": {"kind": "cuda", "name": "cuda:0",
                   "gpu": {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                           "memory_bytes": 80 * 2**30}},
        "base_samples_per_s": 900000.0,
        "precision_speed": {"fp32": 1.0, "tf32": 3.0, "amp_bf16": 5.6, "amp_fp16": 5.8},
        "emulated": {},
        "ceiling_gflops": {"fp32": 67000.0, "tf32": 494000.0, "amp_bf16": 989000.0, "amp_fp16": 989000.0},
        "libraries": {"cuda_runtime": "12.4", "cuda_driver": "550.54", "cublas": "12.4.5", "cudnn": None},
    },
}

# The default experiment exercises every plot: a precision x fusion matrix,
# a dynamic-loss-scale include cell and two checkpointing include cells.
DEFAULT_MATRIX = {"precision": ["fp32", "tf32", "amp_bf16", "amp_fp16"], "fusion": ["off", "on"]}
DEFAULT_INCLUDE = [
    {"precision": "amp_fp16", "fusion": "on", "loss_scale": "dynamic"},
    {"precision": "amp_fp16", "fusion": "on", "checkpointing": "every_layer"},
    {"precision": "amp_fp16", "fusion": "on", "checkpointing": "sqrt"},
]
DEFAULT_BASELINE = {"precision": "fp32", "fusion": "off"}

BASE_CONFIG = {
    "name": "synthetic", "device": "auto", "seed": 1, "steps": 60, "warmup_steps": 5,
    "repeats": 5, "eval_every": 0, "batch_size": 256,
    "precision": "fp32", "fusion": "off", "loss_scale": "none",
    "checkpointing": "off", "checkpoint_k": 2, "accumulation": 1,
    "model": {"kind": "mlp", "hidden_layers": 4, "width": 1024, "activation": "gelu", "init_scale": 1.0},
    "data": {"kind": "teacher", "input_dim": 256, "classes": 16, "teacher_hidden": 64, "eval_samples": 4096},
    "optimizer": {"kind": "adamw", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                  "weight_decay": 0.01, "momentum": 0.9, "grad_clip": 0},
}

CHECKPOINT_COST = {"off": (1.0, 1.0), "every_layer": (1.33, 0.25), "every_k": (1.2, 0.5), "sqrt": (1.15, 0.45)}


def expand_cells(matrix, include):
    """Matrix cross product in matrix order, then include cells (CONFIG.md semantics)."""
    cells = [{}]
    for key, values in matrix.items():
        cells = [dict(c, **{key: str(v)}) for c in cells for v in values]
    cells.extend({k: str(v) for k, v in extra.items()} for extra in include)
    return cells


def cell_id(axes):
    """CONFIG.md: axis assignments in order; the single cell of a matrix-less file is "base"."""
    return ",".join(f"{k}={v}" for k, v in axes.items()) or "base"


def resolve_config(axes, experiment, seed, repeats, steps):
    """Base config with the cell's axis values applied (dotted keys into nested maps)."""
    config = json.loads(json.dumps(BASE_CONFIG))
    config.update(name=experiment, seed=seed, repeats=repeats, steps=steps,
                  warmup_steps=min(5, steps - 1))
    for key, value in axes.items():
        node = config
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        old = node.get(leaf)
        node[leaf] = type(old)(value) if isinstance(old, (int, float)) and not isinstance(old, bool) else value
    return config


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def canonical_hash(obj):
    return fnv1a64(json.dumps(obj, sort_keys=True, separators=(",", ":")))


def rng_for(seed, *parts):
    """A generator seeded by `seed` and a stable hash of `parts` (not Python's hash())."""
    return np.random.default_rng([seed, zlib.crc32("/".join(map(str, parts)).encode())])


def param_count(config):
    m, d = config["model"], config["data"]
    w, layers = m["width"], m["hidden_layers"]
    return d["input_dim"] * w + (layers - 1) * w * w + w * d["classes"] + layers * w + d["classes"]


def memory_for(config):
    """Deterministic per-category peak memory for a config."""
    n = param_count(config)
    amp = config["precision"].startswith("amp")
    batch, width, layers = config["batch_size"], config["model"]["width"], config["model"]["hidden_layers"]
    _, act_factor = CHECKPOINT_COST[config["checkpointing"]]
    mem = {
        "params": n * 4 + (n * 2 if amp else 0),
        "grads": n * 4,
        "optimizer": n * 8,
        "activations": int(batch * width * layers * 2 * (2 if amp else 4) * act_factor),
        "workspace": (8 << 20) if config["fusion"] == "on" else (4 << 20),
    }
    mem["total"] = sum(mem[k] for k in MEMORY_CATEGORIES)
    return mem


def loss_curve(config, axes, repeat_seed, steps):
    """Exponential decay to a precision-dependent floor with per-step noise."""
    rng = rng_for(repeat_seed, "loss", cell_id(axes))
    floor = {"fp32": 0.35, "tf32": 0.351, "amp_bf16": 0.356, "amp_fp16": 0.352}.get(config["precision"], 0.36)
    if config["precision"] == "amp_fp16" and config["loss_scale"] == "none":
        floor += 0.04   # small gradients underflow without a loss scale
    x = np.arange(steps)
    clean = floor + (math.log(config["data"]["classes"]) - floor) * np.exp(-x / (steps / 5))
    return clean * (1 + 0.01 * rng.standard_normal(steps))


def loss_scale_series(config, steps):
    """(scale per step, skipped per step) for the configured loss-scale mode."""
    mode = config["loss_scale"]
    if mode == "none":
        return [1.0] * steps, [0] * steps
    if mode == "static":
        return [1024.0] * steps, [0] * steps
    scale, scales, skipped = 65536.0 * 16, [], []
    for step in range(steps):
        overflow = step < 4 or step == steps // 2
        scales.append(scale)
        skipped.append(1 if overflow else 0)
        scale = scale / 2 if overflow else (scale * 2 if step % 20 == 19 else scale)
    return scales, skipped


def grad_histogram(rng, step, steps):
    """log2|g| histogram: a wide bump drifting to smaller exponents as training converges."""
    lo, nbins, total = -40, 60, 200000
    centre, sd = -11.0 - 8.0 * step / steps, 4.0
    cdf = [0.5 * (1 + math.erf((x - centre) / (sd * math.sqrt(2)))) for x in range(lo, lo + nbins + 1)]
    probs = np.diff([0.0] + cdf[1:-1] + [1.0])        # outer bins absorb the tails
    counts = rng.multinomial(total, probs)
    under = float(counts[:FP16_MIN_SUBNORMAL_LOG2 - lo].sum() / total)
    over = float(counts[FP16_MAX_LOG2 - lo:].sum() / total)
    return {"underflow_fraction": under, "overflow_fraction": over,
            "log2_hist": {"lo": lo, "counts": counts.astype(int).tolist()}}


def make_repeat(config, axes, r, base_ms, noise, noise_seed, numerics):
    """One repeat's per-step series."""
    steps, warmup = config["steps"], config["warmup_steps"]
    seed = config["seed"] + r
    timing = rng_for(noise_seed, "timing", cell_id(axes), r)
    run_factor = math.exp(noise * timing.standard_normal())          # repeat-to-repeat drift
    step_ms = base_ms * run_factor * np.exp(0.5 * noise * timing.standard_normal(steps))
    step_ms[:warmup] *= np.linspace(3.0, 1.2, warmup) if warmup else 1
    loss = loss_curve(config, axes, seed, steps)
    scales, skipped = loss_scale_series(config, steps)
    repeat = {
        "repeat": r, "seed": seed,
        "step_time_ms": step_ms.round(6).tolist(),
        "loss": loss.round(6).tolist(),
        "wall_time_s": (np.cumsum(step_ms) / 1000).round(6).tolist(),
        "loss_scale": scales,
        "skipped": skipped,
        "grad_norm": (2.0 * np.exp(-np.arange(steps) / steps)).round(6).tolist(),
        "eval": [{"step": steps, "loss": round(float(loss[-5:].mean()) + 0.02, 6),
                  "accuracy": round(0.95 - float(loss[-5:].mean()) * 0.2, 6)}],
        "peak_memory_bytes": memory_for(config),
    }
    if numerics:
        rng = rng_for(seed, "numerics", cell_id(axes))
        repeat["numerics"] = {"sample_every": 10, "cost_fraction": 0.01, "samples": [
            {"step": s, "grads": grad_histogram(rng, s, steps),
             "activations": {"underflow_fraction": 0.0, "overflow_fraction": 0.0}}
            for s in range(10, steps + 1, 10)]}
    return repeat


def summarize(config, repeats, flops, ceiling, baseline_sps):
    """The summary block, computed from the repeats exactly as RESULTS.md defines it."""
    warmup, batch = config["warmup_steps"], config["batch_size"]
    timed = [np.array(r["step_time_ms"][warmup:]) for r in repeats]
    all_timed = np.concatenate(timed)
    median = float(np.median(all_timed))
    sps = batch / median * 1000
    gflops = flops / (median / 1000) / 1e9
    tail = max(1, len(repeats[0]["loss"]) // 10)
    return {
        "step_time_ms": {"median": median, "p10": float(np.percentile(all_timed, 10)),
                         "p90": float(np.percentile(all_timed, 90))},
        "samples_per_s": sps,
        "samples_per_s_repeats": [batch / float(np.median(t)) * 1000 for t in timed],
        "step_time_ms_repeats": [float(np.median(t)) for t in timed],
        "speedup": sps / baseline_sps if baseline_sps else None,
        "gflops": gflops,
        "ceiling_fraction": gflops / ceiling if ceiling else None,
        "peak_memory_bytes": memory_for(config),
        "final_loss": float(np.mean([np.mean(r["loss"][-tail:]) for r in repeats])),
        "eval_loss": float(np.mean([r["eval"][-1]["loss"] for r in repeats])),
        "eval_accuracy": float(np.mean([r["eval"][-1]["accuracy"] for r in repeats])),
        "skipped_steps": int(sum(sum(r["skipped"]) for r in repeats)),
    }


def write_json(path, obj):
    """Atomic write like the runner's (tmp + rename)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".tmp", path)


def write_summary_csv(path, cells, axis_keys):
    columns = (["cell_id", "is_baseline"] + [f"axis.{k}" for k in axis_keys] +
               ["samples_per_s", "speedup", "step_ms_median", "step_ms_p10", "step_ms_p90", "gflops",
                "ceiling_fraction"] + [f"mem_{k}" for k in MEMORY_CATEGORIES] +
               ["mem_total", "final_loss", "eval_loss", "eval_accuracy", "skipped_steps", "config_hash"])
    lines = [",".join(columns)]
    for c in cells:
        s = c["summary"]
        row = [f'"{c["cell_id"]}"', str(c["is_baseline"]).lower()]
        row += [c["axes"].get(k, "") for k in axis_keys]
        row += [s["samples_per_s"], s["speedup"], s["step_time_ms"]["median"], s["step_time_ms"]["p10"],
                s["step_time_ms"]["p90"], s["gflops"], s["ceiling_fraction"]]
        row += [s["peak_memory_bytes"][k] for k in (*MEMORY_CATEGORIES, "total")]
        row += [s["final_loss"], s["eval_loss"], s["eval_accuracy"], s["skipped_steps"], c["config_hash"]]
        lines.append(",".join("" if v is None else str(v) for v in row))
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def make_result_set(out_dir, *, experiment="synthetic", machine="cpu", repeats=5, steps=60, seed=1,
                    noise_seed=100, noise=0.01, throughput_factor=None, numerics=True,
                    matrix=None, include=None, baseline=None):
    """Write a complete result directory to out_dir and return its path.

    numerics: True adds gradient histograms to amp cells; False omits them.
    throughput_factor: {cell_id: factor} applied to that cell's step times.
    """
    profile = MACHINES[machine]
    matrix = DEFAULT_MATRIX if matrix is None else matrix
    include = DEFAULT_INCLUDE if include is None else include
    baseline = DEFAULT_BASELINE if baseline is None else baseline
    throughput_factor = throughput_factor or {}
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)

    cells, baseline_sps = [], None
    all_axes = expand_cells(matrix, include)
    base_axes = next((a for a in all_axes if all(a.get(k) == v for k, v in baseline.items())), all_axes[0])
    for axes in [base_axes] + [a for a in all_axes if a is not base_axes]:   # baseline first: others need it
        config = resolve_config(axes, experiment, seed, repeats, steps)
        precision = config["precision"]
        speed = profile["precision_speed"].get(precision, 1.0)
        speed *= 1.15 if config["fusion"] == "on" else 1.0
        speed *= throughput_factor.get(cell_id(axes), 1.0)
        speed /= CHECKPOINT_COST[config["checkpointing"]][0]
        speed *= (1024 / config["model"]["width"]) ** 2
        base_ms = config["batch_size"] / (profile["base_samples_per_s"] * speed) * 1000
        with_numerics = numerics and precision.startswith("amp")
        reps = [make_repeat(config, axes, r, base_ms, noise, noise_seed, with_numerics) for r in range(repeats)]
        flops = 6.0 * param_count(config) * config["batch_size"]
        emulated = profile["emulated"].get(precision)
        summary = summarize(config, reps, flops, profile["ceiling_gflops"].get(precision), baseline_sps)
        if axes is base_axes:
            baseline_sps = summary["samples_per_s"]
            summary["speedup"] = 1.0
        cells.append({
            "schema": "mpbench.cell/1", "experiment": experiment,
            "cell_id": cell_id(axes), "slug": slugify(cell_id(axes)), "axes": axes,
            "is_baseline": axes is base_axes, "config": config, "config_hash": canonical_hash(config),
            "device": {"kind": profile["device"]["kind"], "name": profile["device"]["name"],
                       "emulated": {"gemm": emulated or "native"}},
            "flops_per_step": flops, "repeats": reps, "summary": summary,
        })

    order = [cell_id(a) for a in all_axes]
    cells.sort(key=lambda c: order.index(c["cell_id"]))
    for c in cells:
        write_json(os.path.join(out_dir, "cells", c["slug"] + ".json"), c)
    axis_keys = list(dict.fromkeys(k for a in all_axes for k in a))
    write_summary_csv(os.path.join(out_dir, "summary.csv"), cells, axis_keys)
    write_json(os.path.join(out_dir, "manifest.json"), {
        "schema": "mpbench.manifest/1", "experiment": experiment,
        "config_path": f"experiments/{experiment}.yaml",
        "config_hash": canonical_hash({"matrix": matrix, "include": include, "seed": seed}),
        "started": "2026-11-21T23:10:00Z", "finished": "2026-11-21T23:14:07Z",
        "mpbench_version": "0.1.0", "git_commit": "synthetic",
        "machine": {"hostname": f"synthetic-{machine}", "cpu_model": "AMD EPYC 7B13", "cores": 16,
                    "cpu_flags": ["avx2", "avx512f", "avx512_bf16"], "memory_bytes": 128 * 2**30,
                    "os": "Debian GNU/Linux 12", "kernel": "6.1.0-synthetic"},
        "compiler": "GNU 12.2.0",
        "libraries": dict({"onednn": "3.0.0", "yaml-cpp": "0.7.0", "nlohmann_json": "3.11.2"},
                          **profile["libraries"]),
        "device": dict(profile["device"], ceiling_gflops=profile["ceiling_gflops"]),
        "cells": order,
    })
    return out_dir


def _parse_factor(text):
    cell, _, factor = text.rpartition("=")
    try:
        return cell, float(factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CELL_ID=FACTOR, got {text!r}") from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="directory to write (manifest.json, cells/, summary.csv)")
    parser.add_argument("--machine", choices=sorted(MACHINES), default="cpu")
    parser.add_argument("--experiment", default="synthetic")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1, help="seed of deterministic quantities (losses)")
    parser.add_argument("--noise-seed", type=int, default=100, help="seed of timing noise")
    parser.add_argument("--noise", type=float, default=0.01, help="relative timing noise (sd)")
    parser.add_argument("--slow", type=_parse_factor, action="append", default=[], metavar="CELL=FACTOR",
                        help="multiply one cell's throughput by FACTOR (e.g. 0.8)")
    parser.add_argument("--no-numerics", action="store_true", help="omit gradient histograms")
    args = parser.parse_args(argv)
    make_result_set(args.out, experiment=args.experiment, machine=args.machine, repeats=args.repeats,
                    steps=args.steps, seed=args.seed, noise_seed=args.noise_seed, noise=args.noise,
                    throughput_factor=dict(args.slow), numerics=not args.no_numerics)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
