"""Named edits of a real result set, for what a tiny CPU run cannot show (mpbench/fixtures.py).

Each edit changes the fields it names and nothing else, in the cell files,
the manifest and summary.csv alike, so the set stays one consistent set. None
recomputes what the runner computes: a slowed cell's numbers are the runner's,
scaled; a planted busy round or noisy cell is the flag and the text the runner
writes, set by hand. docs/TESTING.md lists them.
"""

import csv
import glob
import json
import os
import zlib

import numpy as np

# (name, compute capability, memory GiB, CUDA runtime, driver, cuBLAS) of the GPUs a set can name.
GPUS = {"a100": ("NVIDIA A100-SXM4-40GB", "8.0", 40, "12.2", "535.104", "12.2.5"),
        "h100": ("NVIDIA H100 80GB HBM3", "9.0", 80, "12.4", "550.54", "12.4.5")}
# The CSV columns and summary fields a time scale changes (samples/s-like ones the other way).
TIME_COLUMNS = ("step_ms_median", "step_ms_p10", "step_ms_p90")
RATE_COLUMNS = ("samples_per_s", "speedup", "speedup_lo", "speedup_hi", "gflops", "ceiling_fraction")


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _save(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)


def _cell_files(result_dir):
    return sorted(glob.glob(os.path.join(result_dir, "cells", "*.json")))


def _edit_cells(result_dir, edit, only=None):
    """edit(cell) on every cell (or the one whose id is `only`); returns the edited cells."""
    edited = []
    for path in _cell_files(result_dir):
        cell = _load(path)
        if only is None or cell.get("cell_id") == only:
            edit(cell)
            _save(path, cell)
            edited.append(cell)
    if only is not None and not edited:
        raise KeyError(f"{result_dir}: no cell {only!r}")
    return edited


def _edit_manifest(result_dir, edit):
    path = os.path.join(result_dir, "manifest.json")
    manifest = _load(path)
    edit(manifest)
    _save(path, manifest)


def _edit_csv(result_dir, edit_row, drop_columns=(), drop_prefixes=()):
    """edit_row(row dict) on every row of summary.csv, less drop_columns and columns starting with a
    drop_prefixes entry."""
    path = os.path.join(result_dir, "summary.csv")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    columns = [c for c in (rows[0].keys() if rows else [])
               if c not in drop_columns and not c.startswith(tuple(drop_prefixes))]
    for row in rows:
        edit_row(row)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _scaled(value, factor):
    return value * factor if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def quiet(result_dir):
    """The run reads as on a quiet machine: every load window not busy, no busy warning, no cell
    flagged noisy. The tests share two busy cores; what they check must not depend on that load."""
    def windows(manifest):
        noise = manifest.get("noise") or {}
        for window in [noise.get("before")] + list(noise.get("rounds") or []):
            if isinstance(window, dict):
                window.update(busy=False, other_cpu_fraction=0.01, steal_fraction=0.0)
        noise.update(busy=False, warnings=[w for w in noise.get("warnings", []) if "machine busy" not in w])

    def steady(cell):
        noise = cell["summary"].get("noise")
        if isinstance(noise, dict):
            noise.update(noisy=False, reasons=[])
    _edit_manifest(result_dir, windows)
    _edit_cells(result_dir, steady)
    _edit_csv(result_dir, lambda row: row.update(noisy="false") if "noisy" in row else None)


def name_cpu(result_dir, name):
    """The CPU device's name, as the manifest and every cell give it: the same on every machine."""
    def manifest_edit(manifest):
        if manifest["device"].get("kind") == "cpu":
            manifest["device"]["name"] = name

    _edit_manifest(result_dir, manifest_edit)
    _edit_cells(result_dir, lambda c: c["device"].update(name=name) if c["device"].get("kind") == "cpu" else None)
    _edit_csv(result_dir, lambda row: row.update(device_name=name) if row.get("device") == "cpu" else None)


def slow_down(result_dir, cell_id, factor):
    """A planted change of one cell's speed: its throughput times `factor` (0.8: 20% slower) in every
    repeat and every step, so each time field is divided by it and each rate multiplied; the speed-up
    interval (on log ratios of step times) moves with it, and the verdict follows the interval.
    Not the baseline's: every other cell's speed-up would change too."""
    def scale(cell):
        if cell.get("is_baseline") and len(_cell_files(result_dir)) > 1:
            raise ValueError(f"slow_down: {cell_id} is the baseline; slow another cell")
        s = cell["summary"]
        for rep in cell["repeats"]:
            for key in ("step_time_ms", "wall_time_s"):
                rep[key] = [_scaled(v, 1 / factor) for v in rep.get(key) or []]
        s["step_time_ms"] = {k: _scaled(v, 1 / factor) for k, v in s["step_time_ms"].items()}
        s["step_time_ms_repeats"] = [_scaled(v, 1 / factor) for v in s["step_time_ms_repeats"]]
        s["samples_per_s_repeats"] = [_scaled(v, factor) for v in s["samples_per_s_repeats"]]
        for key in ("samples_per_s", "gflops", "ceiling_fraction"):
            s[key] = _scaled(s.get(key), factor)
        if not cell.get("is_baseline"):
            s["speedup"] = _scaled(s.get("speedup"), factor)
            interval = s.get("speedup_interval")
            if isinstance(interval, dict):
                interval.update(lo=interval["lo"] * factor, hi=interval["hi"] * factor)
                s["speedup_verdict"] = verdict(interval)

    cell = _edit_cells(result_dir, scale, only=cell_id)[0]

    def row_edit(row):
        if row["cell_id"] != cell_id:
            return
        for column in TIME_COLUMNS:
            row[column] = repr(float(row[column]) / factor) if row.get(column) else row.get(column)
        for column in RATE_COLUMNS:
            if row.get(column) and not (column.startswith("speedup") and cell.get("is_baseline")):
                row[column] = repr(float(row[column]) * factor)
        if "speedup_verdict" in row:
            row["speedup_verdict"] = cell["summary"].get("speedup_verdict") or ""
    _edit_csv(result_dir, row_edit)


def verdict(interval):
    """runner/measure/stats.cpp's reading of a speed-up interval."""
    if interval["lo"] > 1.0:
        return "faster"
    if interval["hi"] < 1.0:
        return "slower"
    return "no measurable difference"


def steady_repeats(result_dir):
    """Every repeat of a cell takes the step times of its first (wall times, per-repeat medians and
    rates alike), the pooled figures staying the run's: the repeat-to-repeat spread becomes zero, for
    drift() to give one of a known size. The gate's statistics are tested against that spread; two
    busy shared cores give a real one anywhere from 2% to 30%."""
    def copy_first(cell):
        repeats, s = cell["repeats"], cell["summary"]
        for rep in repeats[1:]:
            for key in ("step_time_ms", "wall_time_s"):
                if key in repeats[0]:
                    rep[key] = list(repeats[0][key])
        for key in ("step_time_ms_repeats", "samples_per_s_repeats"):
            s[key] = [s[key][0]] * len(s[key])
    _edit_cells(result_dir, copy_first)


def drift(result_dir, sd, seed):
    """Another run's timing noise on the same run: repeat i of every cell runs slower or faster by one
    factor exp(sd * z_i) (a machine whose speed drifts between rounds); its per-repeat figures scale by
    it and the pooled median by the factors' geometric mean. Losses and everything else stay."""
    def scale(cell):
        repeats = cell["repeats"]
        rng = np.random.default_rng([seed, zlib.crc32(cell["cell_id"].encode())])
        factors = np.exp(sd * rng.standard_normal(len(repeats)))
        s = cell["summary"]
        for rep, f in zip(repeats, factors):
            for key in ("step_time_ms", "wall_time_s"):
                rep[key] = [_scaled(v, f) for v in rep.get(key) or []]
        s["step_time_ms_repeats"] = [_scaled(v, f) for v, f in zip(s["step_time_ms_repeats"], factors)]
        s["samples_per_s_repeats"] = [_scaled(v, 1 / f) for v, f in zip(s["samples_per_s_repeats"], factors)]
        mean = float(np.exp(np.mean(np.log(factors))))
        s["step_time_ms"] = {k: _scaled(v, mean) for k, v in s["step_time_ms"].items()}
        s["samples_per_s"] = _scaled(s["samples_per_s"], 1 / mean)
    _edit_cells(result_dir, scale)


def plant_busy_round(result_dir, round_, fraction):
    """Round `round_` (0-based) ran on a busy machine: its load window says so, with the runner's warning
    (runner/machine/load.h's words). Step times are the run's own."""
    def edit(manifest):
        noise = manifest["noise"]
        window = noise["rounds"][round_]
        window.update(busy=True, other_cpu_fraction=fraction)
        order = manifest.get("order") or {}
        when = (f"while {order['rounds'][round_][0]} ran" if order.get("mode") == "sequential"
                else f"during round {round_ + 1}")
        load = window.get("loadavg") or [0.0]
        noise["warnings"].append(f"machine busy {when}: other processes used {100 * fraction:.0f}% of the CPU "
                                 f"time (load average {load[0]:.2f})")
        noise["busy"] = True
    _edit_manifest(result_dir, edit)


def plant_noisy_cell(result_dir, cell_id, robust_cv):
    """One cell flagged noisy with the runner's reason text (summary.noise; the steps are the run's own)."""
    def edit(cell):
        noise = cell["summary"]["noise"]
        noise.update(robust_cv=robust_cv, noisy=True,
                     reasons=[f"step times vary by {100 * robust_cv:.0f}% (robust CV) > 10%"])
    _edit_cells(result_dir, edit, only=cell_id)
    _edit_csv(result_dir, lambda row: row.update(noisy="true") if row["cell_id"] == cell_id else None)


def as_gpu(result_dir, machine):
    """The set as if run on GPU `machine` (GPUS): the manifest's device and CUDA versions and every
    cell's device (and summary.csv's device columns) that GPU, named as the runner names it (the CUDA
    device's name); the memory's device-used peak (NVML's, on a GPU) is the process peak.
    The timings stay the CPU's: a test of the GPU path reads identities and fields, not speeds."""
    name, capability, memory_gib, runtime, driver, cublas = GPUS[machine]

    def manifest_edit(manifest):
        manifest["device"] = {"kind": "cuda", "name": name, "cpu_kernels": None, "clock_lock": None,
                              "gpu": {"name": name, "compute_capability": capability,
                                      "memory_bytes": memory_gib * 2**30},
                              "ceiling_gflops": manifest["device"].get("ceiling_gflops")}
        manifest["libraries"].update(cuda_runtime=runtime, cuda_driver=driver, cublas=cublas)
        manifest["machine"]["hostname"] = f"fixture-{machine}"

    def cell_edit(cell):
        cell["device"] = {"kind": "cuda", "name": name, "emulated": {"gemm": "native"}}
        for memory in [cell["summary"].get("memory")] + [r.get("memory") for r in cell["repeats"]]:
            if isinstance(memory, dict):
                memory.update(device_used_peak_bytes=memory.get("process_peak_bytes"), device_used_why=None,
                              process_peak_source="cudaMalloc")
    _edit_manifest(result_dir, manifest_edit)
    _edit_cells(result_dir, cell_edit)
    _edit_csv(result_dir, lambda row: row.update(device="cuda", device_name=name))


# What an older runner (before run orders, speed-up intervals, noise, the environment record, run ids,
# the memory triple, convergence verdicts and summary.csv's machine columns) did not write.
LEGACY_MANIFEST_KEYS = ("run_id", "order", "noise", "git", "build", "environment", "cell_config_hashes", "vocabulary")
LEGACY_CELL_KEYS = ("run_id", "convergence_settings")
LEGACY_SUMMARY_KEYS = ("speedup_interval", "speedup_verdict", "noise", "memory", "convergence")
LEGACY_REPEAT_KEYS = ("order", "round", "position", "started", "started_s", "memory")
LEGACY_CSV_COLUMNS = ("speedup_lo", "speedup_hi", "speedup_verdict", "step_cv", "noisy", "device", "device_name",
                      "run_id", "commit")
LEGACY_CSV_PREFIXES = ("convergence_", "ttt_", "diverged_seeds", "nan_steps")


def as_legacy(result_dir):
    """An older runner's format: the fields it did not write (LEGACY_*) deleted, the rest as run."""
    def manifest_edit(manifest):
        for key in LEGACY_MANIFEST_KEYS:
            manifest.pop(key, None)
        manifest["machine"].pop("cpu_clocks", None)

    def cell_edit(cell):
        for key in LEGACY_CELL_KEYS:
            cell.pop(key, None)
        for key in LEGACY_SUMMARY_KEYS:
            cell["summary"].pop(key, None)
        for rep in cell["repeats"]:
            for key in LEGACY_REPEAT_KEYS:
                rep.pop(key, None)
    _edit_manifest(result_dir, manifest_edit)
    _edit_cells(result_dir, cell_edit)
    _edit_csv(result_dir, lambda row: None, drop_columns=LEGACY_CSV_COLUMNS, drop_prefixes=LEGACY_CSV_PREFIXES)


def replicate_cells(result_dir, total):
    """Grow the set to `total` cells by copying its non-baseline cells under a new axis
    "replica=N" (one of the runner's own files each, only the id, slug and axes changed), listed
    in the manifest's run order and config hashes like the runner's: a large set for the report's
    scaling tests (issue 43 item 4) that costs seconds to make rather than hours to run."""
    manifest_path = os.path.join(result_dir, "manifest.json")
    manifest = _load(manifest_path)
    sources = [_load(p) for p in _cell_files(result_dir)]
    sources = [c for c in sources if not c.get("is_baseline")]
    hashes = manifest.setdefault("cell_config_hashes", {})
    n = len(manifest.get("cells") or [])
    for i in range(max(0, total - n)):
        cell = dict(sources[i % len(sources)])
        cell["axes"] = dict(cell["axes"], replica=str(i))
        cell["cell_id"] = f"{cell['cell_id']},replica={i}"
        cell["slug"] = cell["cell_id"].replace(",", "__")
        _save(os.path.join(result_dir, "cells", cell["slug"] + ".json"), cell)
        manifest["cells"].append(cell["cell_id"])
        hashes[cell["cell_id"]] = cell.get("config_hash")
    _save(manifest_path, manifest)
