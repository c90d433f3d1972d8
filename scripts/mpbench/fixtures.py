"""Result sets for the scripts' tests and the fuzzer, made by the real runner on tiny CPU experiments.

Why: report.py, compare.py and the loader must be tested on what the runner
writes, not on a second runner written in Python. So every set starts as a
real run (tiny_experiment's MLP on the CPU, well under a second of training
per cell), made once per distinct experiment and runner binary (shared by
the test processes through a cache beside the runner) and copied for each
caller. What a CPU run cannot show (a GPU, an older runner's format, a planted
regression, a busy round) is a small named edit of that real output, in
mpbench/fixture_edits.py, never a re-computation of the runner's numbers.

The runner is $MPB_RUNNER_PATH or $MPB_RUNNER (CTest sets them), else
build/runner in the checkout; without one, RunnerMissing says to build it.
"""

import argparse
import atexit
import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import time

from mpbench import SOURCE_DIR
from mpbench import fixture_edits as edits
from mpbench.tiny_experiment import mlp_experiment_yaml, run_on_cpu, write_mlp_experiment

# The default experiment: a precision x fusion matrix (every precision family the CPU runs)
# and a dynamic-loss-scale include cell, fp32 without fusion as the baseline.
DEFAULT_MATRIX = {"precision": ["fp32", "tf32", "amp_bf16", "amp_fp16"], "fusion": ["off", "on"]}
DEFAULT_INCLUDE = [{"precision": "amp_fp16", "fusion": "on", "loss_scale": "dynamic"}]
DEFAULT_BASELINE = {"precision": "fp32", "fusion": "off"}
# Like the quickstart's BERT-tiny cell: another model than the baseline's (no speed-up).
BERT_INCLUDE = {"precision": "amp_bf16", "fusion": "on", "model.kind": "bert", "model.size": "tiny",
                "data.kind": "markov", "batch_size": "8"}
# BERT cells that differ only in activation checkpointing (the MLP keeps every activation).
CHECKPOINT_INCLUDE = [dict(BERT_INCLUDE, checkpointing=mode) for mode in ("off", "every_layer", "sqrt")]
DEFAULT_REPEATS, DEFAULT_STEPS = 3, 20
# The tiny MLP every set trains: small enough that a cell's repeat takes milliseconds.
TINY_MODEL = dict(batch_size=32, width=32, input_dim=16, eval_samples=32)

# The CPU's name in every fixture set: the real one varies between machines; tests look for this one.
CPU_NAME = "Fixture CPU (real runs, renamed)"

RUNNER_VARIABLES = ("MPB_RUNNER_PATH", "MPB_RUNNER")


class RunnerMissing(RuntimeError):
    """No built runner: the fixtures cannot be made (a failure, not a skip)."""


def runner_path(path=None):
    """The runner binary the fixtures run: `path`, else as the module's docstring says; RunnerMissing
    where that is no executable file."""
    if path is None:
        path = next((os.environ[v] for v in RUNNER_VARIABLES if os.environ.get(v)),
                    os.path.join(SOURCE_DIR, "build", "runner"))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise RunnerMissing(f"no runner binary at {path}: the result-set fixtures are made by the real runner; "
                            "build it (cmake --build build --target runner) or set MPB_RUNNER_PATH to one")
    return path


def cell_id(axes):
    """docs/CONFIG.md: axis assignments in order, "key=value" joined by ","; no axes is "base".
    Plain values only (a map value's canonical text is the runner's to write)."""
    return ",".join(f"{key}={value}" for key, value in axes.items()) or "base"


_pristine = {}          # cache key -> the result directory of that experiment's one run
_work = None            # this process's directory of runs, when there is no shared cache


def _work_dir():
    global _work
    if _work is None:
        _work = tempfile.mkdtemp(prefix="mpb-fixtures-")
        atexit.register(shutil.rmtree, _work, True)
    return _work


def _cache_dir(runner):
    """Where runs are shared between test processes: $MPB_FIXTURE_CACHE, else fixture-cache/ beside the
    runner (the build folder); None where that cannot be written (then each process runs its own).
    Why shared: the default set takes 3 s of CPU (most of it the runner's GEMM-ceiling probes), and some
    twenty test files use it; on two busy cores that is minutes."""
    root = os.environ.get("MPB_FIXTURE_CACHE") or os.path.join(os.path.dirname(runner), "fixture-cache")
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        return None
    return root if os.access(root, os.W_OK) else None


def _cache_key(runner, yaml_text, args, run):
    """The experiment, the runner's arguments, the run number and the runner binary itself (path, size,
    modification time): a rebuilt runner never hands out a set its predecessor wrote."""
    stat = os.stat(runner)
    text = "\n".join([yaml_text, *args, str(run), os.path.realpath(runner), str(stat.st_size),
                      str(stat.st_mtime_ns)])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _run_into(runner, where, experiment, settings, args):
    """Runs the experiment with its YAML in `where`; returns the result directory."""
    os.makedirs(where, exist_ok=True)
    yaml_path = write_mlp_experiment(where, experiment, **settings)
    started = time.monotonic()
    out = run_on_cpu(runner, yaml_path, os.path.join(where, "out"), args=args,
                     env=dict(os.environ, OMP_NUM_THREADS="1"))
    if os.environ.get("MPB_FIXTURE_TIMES"):
        print(f"fixture run of {experiment}: {time.monotonic() - started:.1f} s", file=sys.stderr)
    return out


def pristine_run(*, experiment="fixture", repeats=DEFAULT_REPEATS, steps=DEFAULT_STEPS, matrix=None,
                 include=None, baseline=None, numerics=True, order="interleaved", run=0, runner=None):
    """The result directory of one real run of this tiny experiment, made on its first request and
    shared after it (in this process, and between processes through _cache_dir()): callers copy it
    (result_set) and never write into it.
    run: another number is another run of the same experiment (its own run id and timings).
    runner: the binary (default: runner_path())."""
    runner = os.path.abspath(runner_path(runner))
    matrix = DEFAULT_MATRIX if matrix is None else matrix
    include = DEFAULT_INCLUDE if include is None else include
    baseline = DEFAULT_BASELINE if baseline is None else baseline
    settings = dict(steps=steps, warmup_steps=min(2, steps - 1), repeats=repeats,
                    numerics_every=5 if numerics else 0, matrix=matrix, include=include,
                    baseline=baseline, **TINY_MODEL)
    args = ("--order", order)
    key = _cache_key(runner, mlp_experiment_yaml(experiment, **settings), args, run)
    if key in _pristine:
        return _pristine[key]
    root = _cache_dir(runner)
    if root is None:
        _pristine[key] = _run_into(runner, os.path.join(_work_dir(), key), experiment, settings, args)
        return _pristine[key]
    where, done = os.path.join(root, key), os.path.join(root, key + ".done")
    with open(os.path.join(root, key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # a second process waits for the first's run
        if not os.path.exists(done):
            shutil.rmtree(where, ignore_errors=True)  # what a killed run left
            out = _run_into(runner, where, experiment, settings, args)
            with open(done, "w", encoding="utf-8") as f:
                f.write(out)
        with open(done, encoding="utf-8") as f:
            _pristine[key] = f.read()
    return _pristine[key]


def result_set(out_dir, *, machine="cpu", slow=None, legacy=False, busy_rounds=None, noisy_cells=None,
               steady=None, **experiment):
    """A copy of a real tiny run at out_dir, with the named edits applied; returns out_dir.

    experiment: pristine_run's keywords (experiment, repeats, steps, matrix, include, baseline,
    numerics, order, run, runner). The edits (mpbench/fixture_edits.py), in this order:
      every set: the machine reads as quiet and no cell as noisy (edits.quiet: the shared
          machine's load must not decide a test), the CPU named as fixtures.CPU_NAME;
      steady=(sd, seed): every repeat of a cell as its first (edits.steady_repeats), then each
          repeat's step times scaled by a factor of spread sd (edits.drift): a known
          repeat-to-repeat spread, for tests of the gate's statistics;
      slow={cell id: factor}: that cell's throughput times factor (edits.slow_down);
      busy_rounds={round: fraction}: that round busy (edits.plant_busy_round);
      noisy_cells={cell id: robust CV}: that cell flagged noisy (edits.plant_noisy_cell);
      machine="a100" | "h100": the manifest and cells name that GPU (edits.as_gpu);
      legacy=True: an older runner's format (edits.as_legacy)."""
    shutil.copytree(pristine_run(**experiment), out_dir)
    edits.quiet(out_dir)
    edits.name_cpu(out_dir, CPU_NAME)
    if steady:
        edits.steady_repeats(out_dir)
        edits.drift(out_dir, *steady)
    for cid, factor in (slow or {}).items():
        edits.slow_down(out_dir, cid, factor)
    for round_, fraction in (busy_rounds or {}).items():
        edits.plant_busy_round(out_dir, round_, fraction)
    for cid, robust_cv in (noisy_cells or {}).items():
        edits.plant_noisy_cell(out_dir, cid, robust_cv)
    if machine != "cpu":
        edits.as_gpu(out_dir, machine)
    if legacy:
        edits.as_legacy(out_dir)
    return out_dir


def _pair(text, key_type):
    """"KEY=NUMBER" -> (key_type(KEY), float(NUMBER)), split at the last "=" (cell ids hold "=" too)."""
    key, _, value = text.rpartition("=")
    try:
        return key_type(key), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KEY=NUMBER, got {text!r}") from None


def main(argv=None):
    """python3 -m mpbench.fixtures OUT [...]: a result set to try report.py and compare.py on (docs/REPORTS.md)."""
    parser = argparse.ArgumentParser(prog="python3 -m mpbench.fixtures",
                                     description="Write a tiny real run of the built runner, with the fixtures' "
                                                 "named edits, to OUT (docs/REPORTS.md)")
    parser.add_argument("out", help="the result directory to write (must not exist)")
    parser.add_argument("--runner", help="the runner binary (default: $MPB_RUNNER_PATH, $MPB_RUNNER, build/runner)")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    parser.add_argument("--bert", action="store_true", help="add a BERT-tiny cell (another model: no speed-up)")
    parser.add_argument("--sequential", action="store_true", help="the sequential run order")
    parser.add_argument("--machine", choices=["cpu", *edits.GPUS], default="cpu", help="name a GPU (as_gpu)")
    parser.add_argument("--steady", type=float, metavar="SD", help="repeats differing by SD (steady_repeats)")
    parser.add_argument("--slow", type=lambda t: _pair(t, str), action="append", default=[], metavar="CELL=FACTOR",
                        help="that cell's throughput times FACTOR (slow_down)")
    parser.add_argument("--busy-round", type=lambda t: _pair(t, int), action="append", default=[],
                        metavar="ROUND=FRACTION", help="round ROUND (0-based) busy (plant_busy_round)")
    parser.add_argument("--noisy", type=lambda t: _pair(t, str), action="append", default=[], metavar="CELL=CV",
                        help="that cell flagged noisy (plant_noisy_cell)")
    parser.add_argument("--legacy", action="store_true", help="an older runner's format (as_legacy)")
    args = parser.parse_args(argv)
    try:
        result_set(args.out, runner=args.runner, repeats=args.repeats,
                   include=DEFAULT_INCLUDE + [BERT_INCLUDE] if args.bert else None,
                   order="sequential" if args.sequential else "interleaved", machine=args.machine,
                   steady=(args.steady, 1) if args.steady else None, slow=dict(args.slow),
                   busy_rounds=dict(args.busy_round), noisy_cells=dict(args.noisy), legacy=args.legacy)
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        print(f"mpbench.fixtures: error: {e}", file=sys.stderr)
        return 2
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
