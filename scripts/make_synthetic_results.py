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

The fields of issue 8 (run order and rounds, speed-up intervals and verdicts,
step-time noise, machine load) are written like the runner writes them:
repeats run in interleaved rounds (`order`), the interval is runner/measure/stats.cpp's
Student t (paired over rounds when interleaved, Welch otherwise), computed by
mpbench.stats.speedup_interval, and `busy_rounds` / `noisy_cells` make a round look
busy or a cell noisy (with their own random draws, so the timing of
everything else is unchanged). `legacy=True` leaves all of them out, as an
older runner did. `BERT_INCLUDE` adds a BERT cell (another model than the
baseline's: no speed-up).

Usage: make_synthetic_results.py OUT [--machine cpu|a100|h100] [--slow CELL=FACTOR]...
       [--bert] [--sequential] [--busy-round ROUND=FRACTION]... [--noisy CELL=SD]... [--legacy]
"""

import argparse
import datetime
import json
import math
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpbench.results import (FP16_MAX_LOG2, FP16_MIN_SUBNORMAL_LOG2,  # noqa: E402
                             parse_map_setting, slugify)
from mpbench.results.vocabulary import snapshot as runner_vocabulary  # noqa: E402
from mpbench.stats import speedup_interval  # noqa: E402

# The runner's memory categories (its committed `runner describe --json`), not a restated list.
MEMORY_CATEGORIES = runner_vocabulary().memory_categories

# The precisions a machine profile gives a speed and a ceiling for, in this order.
PROFILE_PRECISIONS = ("fp32", "tf32", "amp_bf16", "amp_fp16")


def cuda_machine(gpu, compute_capability, memory_gib, base_samples_per_s, speeds, ceilings, versions):
    """A GPU's entry in MACHINES: every CUDA profile has the same fields, and no emulated op.
    speeds and ceilings: one per PROFILE_PRECISIONS; versions: (CUDA runtime, driver, cuBLAS)."""
    runtime, driver, cublas = versions
    return {
        "device": {"kind": "cuda", "name": "cuda:0",
                   "gpu": {"name": gpu, "compute_capability": compute_capability,
                           "memory_bytes": memory_gib * 2**30}},
        "base_samples_per_s": base_samples_per_s,
        "precision_speed": dict(zip(PROFILE_PRECISIONS, speeds)),
        "emulated": {},
        "ceiling_gflops": dict(zip(PROFILE_PRECISIONS, ceilings)),
        "libraries": {"cuda_runtime": runtime, "cuda_driver": driver, "cublas": cublas, "cudnn": None},
    }


# Per-machine identity (manifest "device") and speed profile.
MACHINES = {
    "cpu": {
        "device": {"kind": "cpu", "name": "AMD EPYC 7B13 (synthetic)", "gpu": None,
                   "cpu_kernels": {"isa": "avx2", "source": "cpuid", "runnable": ["scalar", "avx2"],
                                   "gemm": "onednn avx2"}},
        "base_samples_per_s": 20000.0,
        "precision_speed": {"fp32": 1.0, "tf32": 1.0, "amp_bf16": 1.45, "amp_fp16": 0.7},
        "emulated": {"tf32": "fp32 (no tf32 on CPU)", "amp_fp16": "fp32 compute, fp16 rounding"},
        "ceiling_gflops": {"fp32": 1200.0, "tf32": 1200.0, "amp_bf16": 2400.0, "amp_fp16": 1200.0},
        "libraries": {"cuda_runtime": None, "cuda_driver": None, "cublas": None, "cudnn": None},
    },
    "a100": cuda_machine("NVIDIA A100-SXM4-40GB", "8.0", 40, 400000.0,
                         speeds=(1.0, 2.6, 4.1, 4.2), ceilings=(19500.0, 156000.0, 312000.0, 312000.0),
                         versions=("12.2", "535.104", "12.2.5")),
    "h100": cuda_machine("NVIDIA H100 80GB HBM3", "9.0", 80, 900000.0,
                         speeds=(1.0, 3.0, 5.6, 5.8), ceilings=(67000.0, 494000.0, 989000.0, 989000.0),
                         versions=("12.4", "550.54", "12.4.5")),
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
# Like the quickstart's BERT-tiny cell: another model than the baseline's.
BERT_INCLUDE = {"precision": "amp_bf16", "fusion": "on", "model.kind": "bert", "model.size": "tiny",
                "data.kind": "markov", "batch_size": "32"}
# Per model kind: throughput relative to the MLP, and the loss curve's start and floor.
MODEL_PROFILES = {"mlp": {"speed": 1.0, "loss_start": None, "loss_floor": 0.0},
                  "bert": {"speed": 0.03, "loss_start": math.log(1024), "loss_floor": 4.55}}
# The runner's noise rule (summary.noise): flagged, never used to drop a step.
NOISY_ROBUST_CV, NOISY_P90_OVER_MEDIAN, OUTLIER_SHARE = 0.10, 1.25, 0.05
OUTLIER_RULE = "none: every post-warm-up, unprobed step is kept in the median"
BUSY_OTHER_CPU_FRACTION = 0.10

BASE_CONFIG = {
    "name": "synthetic", "device": "auto", "seed": 1, "steps": 60, "warmup_steps": 5,
    "repeats": 5, "eval_every": 0, "batch_size": 256,
    "precision": "fp32", "fusion": "off",
    # the resolved config holds loss_scale as a map, as the runner writes it
    "loss_scale": {"mode": "none", "value": 65536.0, "init": 65536.0, "growth_factor": 2.0,
                   "backoff_factor": 0.5, "growth_interval": 2000, "hysteresis": 1, "min": 0.0, "max": 0.0},
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
        if isinstance(old, dict):            # a map value replaces the whole map: "dynamic{init:1024}"
            node[leaf] = resolve_map(json.loads(json.dumps(BASE_CONFIG[leaf])) if leaf in BASE_CONFIG else {}, value)
        else:
            node[leaf] = type(old)(value) if isinstance(old, (int, float)) and not isinstance(old, bool) else value
    return config


def resolve_map(defaults, text):
    """A canonical map value ("dynamic", "static{value:1024}") applied to the map's defaults."""
    out = dict(defaults)
    parsed = parse_map_setting(text) or {"mode": str(text)}
    for key, value in parsed.items():
        old = defaults.get(key)
        out[key] = type(old)(float(value)) if isinstance(old, (int, float)) and not isinstance(old, bool) else value
    return out


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


def memory_triple(config, device_kind):
    """summary.memory as the runner writes it (runner/measure/memory_triple.h): on the CPU the RSS peak adds the
    binary and its libraries (~190 MB measured) to the tensors; on a GPU the cudaMalloc'd peak is the
    allocator's (no pool), and NVML's device-wide peak adds the CUDA context and cuBLASLt (~600 MB)."""
    total = memory_for(config)["total"]
    if device_kind == "cuda":
        return {"allocator_peak_bytes": total, "process_peak_bytes": total, "process_peak_source": "cudaMalloc",
                "process_peak_why": None, "device_used_peak_bytes": total + 600 * 2**20, "device_used_why": None}
    return {"allocator_peak_bytes": total, "process_peak_bytes": total + 190 * 2**20,
            "process_peak_source": "rss_high_water_mark", "process_peak_why": None,
            "device_used_peak_bytes": None,
            "device_used_why": "the CPU device's memory is the process's: process_peak_bytes is the figure"}


def model_profile(config):
    return MODEL_PROFILES.get(config["model"].get("kind"), MODEL_PROFILES["mlp"])


def loss_curve(config, axes, repeat_seed, steps):
    """Exponential decay to a precision-dependent floor with per-step noise."""
    rng = rng_for(repeat_seed, "loss", cell_id(axes))
    floor = {"fp32": 0.35, "tf32": 0.351, "amp_bf16": 0.356, "amp_fp16": 0.352}.get(config["precision"], 0.36)
    if config["precision"] == "amp_fp16" and config["loss_scale"]["mode"] == "none":
        floor += 0.04   # small gradients underflow without a loss scale
    model = model_profile(config)
    floor += model["loss_floor"]
    start = model["loss_start"] or math.log(config["data"]["classes"])
    x = np.arange(steps)
    clean = floor + (start - floor) * np.exp(-x / (steps / 5))
    return clean * (1 + 0.01 * rng.standard_normal(steps))


def loss_scale_series(config, steps):
    """(scale per step, skipped per step) for the configured loss-scale map."""
    ls = config["loss_scale"]
    if ls["mode"] == "none":
        return [1.0] * steps, [0] * steps
    if ls["mode"] == "static":
        return [float(ls["value"])] * steps, [0] * steps
    # dynamic: the first steps and the middle one overflow (skipped, scale backs off);
    # the scale grows after growth_interval clean steps
    scale, clean, scales, skipped = float(ls["init"]) * 16, 0, [], []
    for step in range(steps):
        overflow = step < 4 or step == steps // 2
        scales.append(scale)
        skipped.append(1 if overflow else 0)
        clean = 0 if overflow else clean + 1
        if overflow:
            scale *= float(ls["backoff_factor"])
        elif clean % int(ls["growth_interval"]) == 0:
            scale *= float(ls["growth_factor"])
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


def make_repeat(config, axes, r, base_ms, noise, noise_seed, numerics, extra_noise=0.0, busy=0.0):
    """One repeat's per-step series.

    extra_noise (relative sd, heavy-tailed) makes the cell noisy; busy (the other
    processes' CPU share in this repeat's round) slows random steps. Both draw from
    their own generators, so the ordinary timing draws stay the same.
    """
    steps, warmup = config["steps"], config["warmup_steps"]
    seed = config["seed"] + r
    timing = rng_for(noise_seed, "timing", cell_id(axes), r)
    run_factor = math.exp(noise * timing.standard_normal())          # repeat-to-repeat drift
    step_ms = base_ms * run_factor * np.exp(0.5 * noise * timing.standard_normal(steps))
    if extra_noise:
        jitter = rng_for(noise_seed, "noisy", cell_id(axes), r)
        step_ms *= 1 + extra_noise * np.abs(jitter.standard_t(2, steps))
    if busy:
        contention = rng_for(noise_seed, "busy", cell_id(axes), r)
        step_ms *= 1 + (contention.random(steps) < busy) * contention.uniform(0.5, 2.0, steps)
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
                  "accuracy": round(max(0.02, 0.95 - float(loss[-5:].mean()) * 0.2), 6)}],
        "peak_memory_bytes": memory_for(config),
    }
    if numerics:
        rng = rng_for(seed, "numerics", cell_id(axes))
        repeat["numerics"] = {"sample_every": 10, "cost_fraction": 0.01, "samples": [
            {"step": s, "grads": grad_histogram(rng, s, steps),
             "activations": {"underflow_fraction": 0.0, "overflow_fraction": 0.0}}
            for s in range(10, steps + 1, 10)]}
    return repeat


def timed_steps(config, repeats):
    """Per repeat, the post-warm-up step times (what the summary's statistics use)."""
    return [np.array(r["step_time_ms"][config["warmup_steps"]:]) for r in repeats]


def step_noise(timed):
    """summary.noise, by the runner's rule: measured and flagged, never used to drop a step."""
    steps = np.concatenate(timed)
    median = float(np.median(steps))
    cv = float(np.std(steps) / np.mean(steps))
    robust_cv = float(1.4826 * np.median(np.abs(steps - median)) / median)
    p90 = float(np.percentile(steps, 90)) / median
    outliers = int(np.sum(steps > 3 * median))
    reasons = []
    if robust_cv > NOISY_ROBUST_CV:
        reasons.append(f"step times vary by {100 * robust_cv:.0f}% (robust CV) > {100 * NOISY_ROBUST_CV:.0f}%")
    if p90 > NOISY_P90_OVER_MEDIAN:
        reasons.append(f"p90 step is {p90:.2f}x the median (> {NOISY_P90_OVER_MEDIAN:.2f}x)")
    if outliers > OUTLIER_SHARE * steps.size:
        reasons.append(f"{outliers} of {steps.size} steps took over 3x the median")
    return {"cv": cv, "robust_cv": robust_cv, "p90_over_median": p90, "outlier_steps": outliers,
            "samples": int(steps.size), "noisy": bool(reasons), "reasons": reasons, "outlier_rule": OUTLIER_RULE}


def verdict_of(interval):
    if interval["lo"] > 1.0:
        return "faster"
    if interval["hi"] < 1.0:
        return "slower"
    return "no measurable difference"


def summarize(config, repeats, flops, ceiling, baseline_sps):
    """The summary block, computed from the repeats exactly as RESULTS.md defines it."""
    batch = config["batch_size"]
    timed = timed_steps(config, repeats)
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
        # runner/measure/cost_estimate.h: 40% of the measured ceiling (this set's machines as the CPU basis).
        "estimated_time": {
            "seconds": flops * len(repeats[0]["step_time_ms"]) * len(repeats) / (0.4 * ceiling * 1e9) if ceiling else None,
            "flops_per_step": flops, "steps": len(repeats[0]["step_time_ms"]), "repeats": len(repeats),
            "assumed_mfu": 0.4, "rate_tflops": 0.4 * ceiling / 1000 if ceiling else None,
            "basis": "measured_ceiling" if ceiling else "none", "device": "synthetic",
            "source": "GEMM ceiling measured at start", "why": None if ceiling else "no ceiling"},
        "measured_time_s": float(sum(sum(r["step_time_ms"]) for r in repeats)) / 1000,
    }


def write_json(path, obj):
    """Atomic write like the runner's (tmp + rename)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".tmp", path)


def write_summary_csv(path, cells, axis_keys, legacy=False):
    """summary.csv; legacy leaves out the columns of issue 8 (speedup_lo ... noisy)."""
    new = [] if legacy else ["speedup_lo", "speedup_hi", "speedup_verdict"]
    columns = (["cell_id", "is_baseline"] + [f"axis.{k}" for k in axis_keys] +
               ["samples_per_s", "speedup"] + new + ["step_ms_median", "step_ms_p10", "step_ms_p90"] +
               ([] if legacy else ["step_cv", "noisy"]) + ["gflops", "ceiling_fraction"] +
               [f"mem_{k}" for k in MEMORY_CATEGORIES] +
               ["mem_total", "final_loss", "eval_loss", "eval_accuracy", "skipped_steps", "config_hash"])
    lines = [",".join(columns)]
    for c in cells:
        s = c["summary"]
        interval, noise = s.get("speedup_interval") or {}, s.get("noise") or {}
        row = [f'"{c["cell_id"]}"', str(c["is_baseline"]).lower()]
        row += [c["axes"].get(k, "") for k in axis_keys]
        row += [s["samples_per_s"], s["speedup"]]
        row += [] if legacy else [interval.get("lo"), interval.get("hi"), s.get("speedup_verdict")]
        row += [s["step_time_ms"]["median"], s["step_time_ms"]["p10"], s["step_time_ms"]["p90"]]
        row += [] if legacy else [noise.get("cv"), str(noise.get("noisy")).lower() if noise else None]
        row += [s["gflops"], s["ceiling_fraction"]]
        row += [s["peak_memory_bytes"][k] for k in (*MEMORY_CATEGORIES, "total")]
        row += [s["final_loss"], s["eval_loss"], s["eval_accuracy"], s["skipped_steps"], c["config_hash"]]
        lines.append(",".join("" if v is None else (f'"{v}"' if isinstance(v, str) and " " in v else str(v))
                              for v in row))
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


def run_plan(ids, repeats, mode, seed):
    """manifest.order.rounds: interleaved runs one repeat of every cell per round, even
    rounds in a seeded shuffle and odd ones in the reverse of the round before (as
    runner/experiment/run_plan.cpp); sequential runs every repeat of a cell in one round, cell by cell."""
    if mode == "sequential":
        return [[cid] * repeats for cid in ids]
    rng = np.random.default_rng([seed, zlib.crc32(b"order")])
    rounds = []
    for r in range(repeats):
        rounds.append(rounds[-1][::-1] if r % 2 else [ids[i] for i in rng.permutation(len(ids))])
    return rounds


def iso_after(start, seconds):
    """An ISO-8601 UTC time `seconds` after `start` (as written in the manifest)."""
    t = datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ") + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def load_window(rng, busy_fraction, round_=None):
    """A manifest noise window like the runner's LoadWindow.to_json()."""
    other = busy_fraction if busy_fraction else float(rng.uniform(0.005, 0.03))
    cores = 16
    window = {"loadavg": [round(1.0 + other * cores + x, 2) for x in (0.1, 0.05, 0.0)],
              "other_cpu_fraction": round(other, 4), "steal_fraction": 0.0, "seconds": 0.5,
              "busy": other > BUSY_OTHER_CPU_FRACTION}
    return window if round_ is None else dict({"round": round_}, **window)


def environment_fields(profile):
    """The manifest's build and environment record (issue 18) as the runner writes it."""
    return {
        "git": {"commit": "synthetic", "dirty": False, "source": "build", "why": None},
        "build": {"compiler": "GNU 12.2.0", "type": "Release", "cxx_flags": " -O3 -DNDEBUG",
                  "options": "MPB_WERROR=OFF MPB_CUDA=" + ("ON" if profile["device"]["kind"] == "cuda"
                                                                         else "AUTO"),
                  "why": None,
                  "compiled_with": {"optimized": True, "ndebug": True, "fast_math": False,
                                    "isa": ["avx2", "fma", "f16c", "avx512f", "avx512bf16"]}},
        "environment": {"overrides": {}, "checked": ["NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG", "CUBLAS_*",
                                                     "CUBLASLT_*", "CUDNN_*", "CUDA_LAUNCH_BLOCKING",
                                                     "ONEDNN_*", "OMP_NUM_THREADS"]},
    }


def make_result_set(out_dir, *, experiment="synthetic", machine="cpu", repeats=5, steps=60, seed=1,
                    noise_seed=100, noise=0.01, throughput_factor=None, numerics=True,
                    matrix=None, include=None, baseline=None, order="interleaved", busy_rounds=None,
                    noisy_cells=None, legacy=False):
    """Write a complete result directory to out_dir and return its path.

    numerics: True adds gradient histograms to amp cells; False omits them.
    throughput_factor: {cell_id: factor} applied to that cell's step times.
    order: "interleaved" | "sequential" (manifest.order, repeats' round/position/started).
    busy_rounds: {round index (0-based): other processes' CPU share}: that round is busy in
        manifest.noise (with the runner's warning) and its repeats get slow steps.
    noisy_cells: {cell_id: relative sd} of extra heavy-tailed step-time noise.
    legacy: write the format of an older runner (none of issue 8's fields).
    """
    profile = MACHINES[machine]
    matrix = DEFAULT_MATRIX if matrix is None else matrix
    include = DEFAULT_INCLUDE if include is None else include
    baseline = DEFAULT_BASELINE if baseline is None else baseline
    throughput_factor = throughput_factor or {}
    busy_rounds = {} if legacy else dict(busy_rounds or {})
    noisy_cells = noisy_cells or {}
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)

    all_axes = expand_cells(matrix, include)
    ids = [cell_id(a) for a in all_axes]
    plan = run_plan(ids, repeats, order, seed)
    where = {}                                   # (cell id, repeat) -> (round, position)
    for ri, round_ids in enumerate(plan):
        for pos, cid in enumerate(round_ids):
            where[(cid, sum(1 for k in where if k[0] == cid))] = (ri, pos)

    cells, baseline_sps, base_timed, base_config = [], None, None, None
    base_axes = next((a for a in all_axes if all(a.get(k) == v for k, v in baseline.items())), all_axes[0])
    for axes in [base_axes] + [a for a in all_axes if a is not base_axes]:   # baseline first: others need it
        config = resolve_config(axes, experiment, seed, repeats, steps)
        precision = config["precision"]
        speed = profile["precision_speed"].get(precision, 1.0)
        speed *= 1.15 if config["fusion"] == "on" else 1.0
        speed *= throughput_factor.get(cell_id(axes), 1.0)
        speed /= CHECKPOINT_COST[config["checkpointing"]][0]
        speed *= (1024 / config["model"]["width"]) ** 2
        speed *= model_profile(config)["speed"]
        base_ms = config["batch_size"] / (profile["base_samples_per_s"] * speed) * 1000
        with_numerics = numerics and precision.startswith("amp")
        reps = [make_repeat(config, axes, r, base_ms, noise, noise_seed, with_numerics,
                            extra_noise=noisy_cells.get(cell_id(axes), 0.0),
                            busy=busy_rounds.get(where[(cell_id(axes), r)][0], 0.0))
                for r in range(repeats)]
        flops = 6.0 * param_count(config) * config["batch_size"]
        emulated = profile["emulated"].get(precision)
        is_base = axes is base_axes
        same_model = is_base or config["model"]["kind"] == base_config["model"]["kind"]
        summary = summarize(config, reps, flops, profile["ceiling_gflops"].get(precision),
                            baseline_sps if same_model else None)
        timed = timed_steps(config, reps)
        if is_base:
            baseline_sps, base_timed, base_config = summary["samples_per_s"], timed, config
            summary["speedup"] = 1.0
        if not legacy:
            interval = None
            if not is_base and same_model:
                interval = speedup_interval(base_timed, base_config["batch_size"], timed, config["batch_size"],
                                            paired=order != "sequential")
            summary["speedup_interval"] = interval
            summary["speedup_verdict"] = ("baseline" if is_base else verdict_of(interval) if interval else None)
            summary["noise"] = step_noise(timed)
            summary["memory"] = memory_triple(config, profile["device"]["kind"])
            for rep in reps:
                rep["memory"] = summary["memory"]
        cells.append({
            "schema": "mpbench.cell/1", "experiment": experiment,
            "cell_id": cell_id(axes), "slug": slugify(cell_id(axes)), "axes": axes,
            "is_baseline": is_base, "config": config, "config_hash": canonical_hash(config),
            "device": {"kind": profile["device"]["kind"], "name": profile["device"]["name"],
                       "emulated": {"gemm": emulated or "native"}},
            "flops_per_step": flops, "repeats": reps, "summary": summary,
        })

    started = "2026-11-21T23:10:00Z"
    by_id = {c["cell_id"]: c for c in cells}
    elapsed = 2.0                                 # ceilings and the idle sample come first
    for ri, round_ids in enumerate(plan):
        for pos, cid in enumerate(round_ids):
            r = sum(1 for c in round_ids[:pos] if c == cid) if order == "sequential" else ri
            rep = by_id[cid]["repeats"][r]
            if not legacy:
                rep.update(order=order, round=ri, position=pos, started=iso_after(started, elapsed),
                           started_s=round(elapsed, 3))
            elapsed += sum(rep["step_time_ms"]) / 1000 + 0.05

    cells.sort(key=lambda c: ids.index(c["cell_id"]))
    # The run id the runner writes into the manifest and every cell (runner/results/run_identity.h): one per
    # generated set, so a cell copied between two sets is a stranger as between two runs.
    run_id = f"synthetic-{experiment}-{machine}-{seed}-{noise_seed}"
    for c in cells:
        if not legacy:
            c["run_id"] = run_id
        write_json(os.path.join(out_dir, "cells", c["slug"] + ".json"), c)
    axis_keys = list(dict.fromkeys(k for a in all_axes for k in a))
    write_summary_csv(os.path.join(out_dir, "summary.csv"), cells, axis_keys, legacy=legacy)
    manifest = {
        "schema": "mpbench.manifest/1", "experiment": experiment,
        **({} if legacy else {"run_id": run_id}),
        "config_path": f"experiments/{experiment}.yaml",
        "config_hash": canonical_hash({"matrix": matrix, "include": include, "seed": seed}),
        "started": started, "finished": iso_after(started, elapsed),
        "mpbench_version": "0.1.0", "git_commit": "synthetic",
        "machine": {"hostname": f"synthetic-{machine}", "cpu_model": "AMD EPYC 7B13", "cores": 16,
                    "cpu_flags": ["avx2", "avx512f", "avx512_bf16"], "memory_bytes": 128 * 2**30,
                    "os": "Debian GNU/Linux 12", "kernel": "6.1.0-synthetic"},
        "compiler": "GNU 12.2.0",
        "libraries": dict({"onednn": "3.0.0", "yaml-cpp": "0.7.0", "nlohmann_json": "3.11.2"},
                          **profile["libraries"]),
        "device": dict(profile["device"], ceiling_gflops=profile["ceiling_gflops"]),
        "cells": ids,
    }
    if not legacy:
        manifest.update(environment_fields(profile))
        manifest["machine"]["cpu_clocks"] = {
            "governor": "performance", "governors": {"performance": 16}, "mhz": 3500.0, "mhz_min": 3490.0,
            "mhz_max": 3510.0, "mhz_source": "cpufreq scaling_cur_freq", "why": None}
        manifest["cell_config_hashes"] = {c["cell_id"]: c["config_hash"] for c in cells}
        load = rng_for(noise_seed, "load")
        rounds = [load_window(load, busy_rounds.get(ri, 0.0), ri) for ri in range(len(plan))]
        when = [f"during round {ri + 1}" if order != "sequential" else f"while {plan[ri][0]} ran"
                for ri in range(len(plan))]
        warnings = [f"machine busy {when[ri]}: other processes used {100 * w['other_cpu_fraction']:.0f}% "
                    "of the CPU time" for ri, w in enumerate(rounds) if w["busy"]]
        manifest["order"] = {"mode": order, "seed": seed, "rounds": plan}
        manifest["noise"] = {"before": load_window(load, 0.0), "rounds": rounds,
                             "busy": any(w["busy"] for w in rounds), "warnings": warnings}
    write_json(os.path.join(out_dir, "manifest.json"), manifest)
    return out_dir


def _parse_factor(text):
    cell, _, factor = text.rpartition("=")
    try:
        return cell, float(factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CELL_ID=FACTOR, got {text!r}") from None


def _parse_round(text):
    round_, _, fraction = text.partition("=")
    try:
        return int(round_), float(fraction)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ROUND=FRACTION (0-based round), got {text!r}") from None


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
    parser.add_argument("--bert", action="store_true", help="add a BERT cell (another model than the baseline's)")
    parser.add_argument("--sequential", action="store_true", help="run order sequential (default interleaved)")
    parser.add_argument("--busy-round", type=_parse_round, action="append", default=[], metavar="ROUND=FRACTION",
                        help="make round ROUND (0-based) busy: other processes take FRACTION of the CPU")
    parser.add_argument("--noisy", type=_parse_factor, action="append", default=[], metavar="CELL=SD",
                        help="add heavy-tailed step-time noise of relative size SD to one cell")
    parser.add_argument("--legacy", action="store_true",
                        help="an older runner's format: no run order, speed-up intervals or noise fields")
    args = parser.parse_args(argv)
    make_result_set(args.out, experiment=args.experiment, machine=args.machine, repeats=args.repeats,
                    steps=args.steps, seed=args.seed, noise_seed=args.noise_seed, noise=args.noise,
                    throughput_factor=dict(args.slow), numerics=not args.no_numerics,
                    include=DEFAULT_INCLUDE + [BERT_INCLUDE] if args.bert else None,
                    order="sequential" if args.sequential else "interleaved",
                    busy_rounds=dict(args.busy_round), noisy_cells=dict(args.noisy), legacy=args.legacy)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
