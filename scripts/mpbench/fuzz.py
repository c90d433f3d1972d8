#!/usr/bin/python3
"""Fuzz the results loader: damaged cell files must give exit 2, never a traceback or exit 1.

Usage: fuzz_results.py [--seconds S] [--seed N] [--runner PATH] [--set DIR]... [--keep DIR]

Each input is a copy of a pristine result set (the runner's: --runner PATH,
default as mpbench.fixtures finds it, makes the fixtures' default set and two
edited copies of it, an older runner's format and a GPU's identity run in
sequential order, and REAL_EXPERIMENT, fp32/bf16/fp16 with and without loss
scaling and numerics histograms; every --set DIR) with one to
three mutations of its cell files (a cell JSON, or now and then the manifest):
a value replaced by another type, NaN, inf, 1e308, a negative or a huge number;
a key or list item deleted; an object turned into a list and back; the text cut
short; a number's text replaced by NaN/Infinity/1e999; now and then the file
replaced by a special entry (a FIFO, a directory, a symlink loop, a dangling
symlink, a symlink to /dev/zero, a 2 GiB sparse file: issue 43 items 5, 6 and
14), which the loader must refuse unread. Then, in this process
(no interpreter start per input):
  compare.py M M                   exit 0 or 2 (identical sets never regress)
  compare.py P M, --generations P M  any exit code, but no traceback
  report.py M (every --report-every-th input: plots take seconds)   exit 0 or 2
A traceback or a forbidden exit code is a finding: the input is kept under
--keep (default tests/fuzz/findings/results-N/, not committed), the command and
traceback are printed, and the script exits 1 at the end. Deterministic for a
given --seed and set of pristine sets, so a finding reproduces.
docs/TESTING.md says how fast it runs and how long CI gives it.
"""

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import stat
import sys
import tempfile
import time
import traceback
import warnings

os.environ.setdefault("MPLBACKEND", "Agg")
from mpbench.compare import gate as compare  # noqa: E402
from mpbench import SOURCE_DIR, fixtures  # noqa: E402
from mpbench.report import build as report  # noqa: E402
from mpbench.tiny_experiment import run_on_cpu, write_mlp_experiment  # noqa: E402

STRANGE_VALUES = (None, True, False, 0, -1, -1.5, 1e308, -1e308, 2 ** 70, float("nan"), float("inf"),
                  float("-inf"), "", "x", "1.5", [], [1, None], {}, {"a": 1})


def _pick(rng, data):
    """(container path, key) of a value found by a random walk down from the top, stopping at each
    level with probability 1/3: every field of summary is as likely as one item of a 200-step list."""
    path, node = (), data
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = rng.choice(keys)
        child = node[key]
        if not isinstance(child, (dict, list)) or not child or rng.random() < 1 / 3:
            return path, key
        path, node = path + (key,), child


def _container(data, path):
    for p in path:
        data = data[p]
    return data


def mutate_value(rng, data):
    """Replace, delete or reshape one value somewhere in `data` (in place); returns a description."""
    if not isinstance(data, (dict, list)) or not data:
        return "nothing to mutate"
    path, key = _pick(rng, data)
    parent = _container(data, path)
    where = ".".join(map(str, path + (key,)))
    old = parent[key]
    action = rng.random()
    if action < 0.15:
        del parent[key]
        return f"deleted {where}"
    if action < 0.30 and isinstance(old, dict):
        parent[key] = list(old.values())
        return f"{where}: object -> list"
    if action < 0.30 and isinstance(old, list):
        parent[key] = {str(i): v for i, v in enumerate(old)}
        return f"{where}: list -> object"
    if action < 0.40 and isinstance(old, (int, float)) and not isinstance(old, bool):
        parent[key] = str(old)
        return f"{where}: number -> string"
    if action < 0.50 and isinstance(old, (int, float)) and not isinstance(old, bool):
        parent[key] = -old if old else -1
        return f"{where}: negated"
    new = rng.choice(STRANGE_VALUES)
    parent[key] = new
    return f"{where} = {new!r}"


def mutate_text(rng, text):
    """A mutation of the file's text that json.dump cannot make: a cut, or a non-JSON number."""
    if rng.random() < 0.5:
        cut = rng.randrange(len(text)) if text else 0
        return text[:cut], f"cut at byte {cut}"
    numbers = list(re.finditer(r"(?<![\w.])-?\d+(\.\d+)?([eE][-+]?\d+)?", text))
    if not numbers:
        return text, "no number to replace"
    m = rng.choice(numbers)
    new = rng.choice(("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 400))
    return text[:m.start()] + new + text[m.end():], f"number at byte {m.start()} -> {new[:12]}"


SPECIAL_ENTRIES = ("FIFO", "directory", "symlink loop", "dangling symlink", "symlink to /dev/zero",
                   "2 GiB sparse file")


def make_special(rng, path):
    """Replace the file at `path` by a special entry; returns what it became."""
    kind = rng.choice(SPECIAL_ENTRIES)
    os.unlink(path)
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "symlink loop":
        os.symlink(os.path.basename(path), path)
    elif kind == "dangling symlink":
        os.symlink(os.path.basename(path) + ".missing", path)
    elif kind == "symlink to /dev/zero":
        os.symlink("/dev/zero", path)
    else:
        with open(path, "wb") as f:
            f.truncate(2 << 30)               # sparse: no disk used
    return f"replaced by a {kind}"


def mutate_set(rng, result_dir):
    """1 to 3 mutations of the set's cell files (the manifest one time in eight; a special entry one
    time in sixteen); returns descriptions."""
    cells_dir = os.path.join(result_dir, "cells")
    files = sorted(os.path.join(cells_dir, f) for f in os.listdir(cells_dir) if f.endswith(".json"))
    done, special = [], set()
    for _ in range(rng.randint(1, 3)):
        path = os.path.join(result_dir, "manifest.json") if rng.random() < 0.125 else rng.choice(files)
        if path in special:
            continue                           # never opened here: a FIFO would block the fuzzer itself
        if rng.random() < 1 / 16:
            special.add(path)
            done.append(f"{os.path.relpath(path, result_dir)}: {make_special(rng, path)}")
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if rng.random() < 0.2:
            text, what = mutate_text(rng, text)
        else:
            try:
                data = json.loads(text)
            except ValueError:
                continue                       # cut by an earlier mutation
            what = mutate_value(rng, data)
            text = json.dumps(data)            # writes NaN/Infinity as Python's json does
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        done.append(f"{os.path.relpath(path, result_dir)}: {what}")
    return done


def run_in_process(main, argv):
    """(exit code, traceback text or None, stderr) of main(argv) with its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            code = main(argv)
        except SystemExit as e:                # argparse
            code = e.code if isinstance(e.code, int) else 2
        except Exception:                      # noqa: BLE001: any exception is the finding
            return 1, traceback.format_exc(), err.getvalue()
    return code or 0, None, err.getvalue()


def check_input(pristine, mutant, report_dir, with_report):
    """The commands above on one mutant; returns [problem] (empty: fine) and the command count."""
    runs = [("compare.py M M", compare.main, [mutant, mutant], (0, 2)),
            ("compare.py P M", compare.main, [pristine, mutant], (0, 1, 2)),
            ("compare.py --generations P M", compare.main, ["--generations", pristine, mutant], (0, 2))]
    if with_report:
        runs.append(("report.py M", report.main, [mutant, "--out", report_dir], (0, 2)))
    problems = []
    for name, main, argv, allowed in runs:
        code, tb, err = run_in_process(main, argv)
        if tb or code not in allowed:
            problems.append(f"{name}: exit {code}\n{tb or err}")
    return problems, len(runs)


# What --runner runs for a real set: small, every precision family, numerics sampled.
REAL_EXPERIMENT = dict(steps=12, warmup_steps=1, repeats=2, batch_size=32, numerics_every=2, width=32, input_dim=16,
                       eval_samples=32, matrix=["precision: [fp32, amp_bf16, amp_fp16]", "loss_scale: [none, dynamic]"])


def real_set(work, runner):
    """REAL_EXPERIMENT run by `runner` on the CPU (a few seconds); returns its result directory."""
    path = write_mlp_experiment(work, "fuzzreal", **REAL_EXPERIMENT)
    return run_on_cpu(runner, path, os.path.join(work, "real"), env=dict(os.environ, OMP_NUM_THREADS="1"))


def pristine_sets(work, extra, runner):
    """The runner's sets of several shapes (the fixtures' default, an older format, a GPU's identity in
    sequential order, REAL_EXPERIMENT), then those given with --set."""
    sets = [fixtures.result_set(os.path.join(work, "pristine", "mlp"), runner=runner),
            fixtures.result_set(os.path.join(work, "pristine", "legacy"), legacy=True, repeats=2, runner=runner),
            fixtures.result_set(os.path.join(work, "pristine", "gpu"), machine="h100", repeats=3,
                                order="sequential", runner=runner),
            real_set(work, runner)]
    return sets + [os.path.abspath(d) for d in extra]


def keep_copy(mutant, keep, what):
    """A finding's input copied for the record: links as links; special entries and huge files
    left out (a FIFO would block the copy, a sparse 2 GiB file fill the disk), what.txt says which."""
    def left_out(directory, names):
        skip = []
        for name in names:
            st = os.lstat(os.path.join(directory, name))
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)) \
                    or (stat.S_ISREG(st.st_mode) and st.st_size > 256 << 20):
                skip.append(name)
        return skip
    shutil.rmtree(keep, ignore_errors=True)
    shutil.copytree(mutant, keep, symlinks=True, ignore=left_out)
    with open(os.path.join(keep, "what.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(what) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="how long to fuzz (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="the mutation seed (default 1)")
    parser.add_argument("--runner", metavar="PATH",
                        help="the built runner that makes the pristine sets (default: $MPB_RUNNER_PATH, "
                             "$MPB_RUNNER, else build/runner)")
    parser.add_argument("--set", action="append", default=[], metavar="DIR",
                        help="a real result set to mutate as well (repeatable)")
    parser.add_argument("--report-every", type=int, default=8, metavar="K",
                        help="run report.py on every K-th input (default 8; it plots, so takes seconds)")
    parser.add_argument("--keep", default=os.path.join(SOURCE_DIR, "tests", "fuzz", "findings"),
                        help="where findings are copied (default tests/fuzz/findings)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.report_every < 1:
        parser.error("--seconds must be > 0 and --report-every >= 1")
    for d in args.set:
        if not os.path.isfile(os.path.join(d, "manifest.json")):
            parser.error(f"--set {d}: not a result directory (no manifest.json)")
    rng = random.Random(args.seed)
    findings, inputs, commands = 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="mpb-fuzz-results-") as work:
        try:
            sets = pristine_sets(work, args.set, fixtures.runner_path(args.runner))
        except (OSError, RuntimeError) as e:     # fixtures.RunnerMissing included: says to build the runner
            print(f"fuzz_results: error: {e}", file=sys.stderr)
            return 2
        start = time.monotonic()
        while time.monotonic() - start < args.seconds:
            pristine = rng.choice(sets)
            mutant = os.path.join(work, "mutant", os.path.basename(pristine))
            shutil.rmtree(os.path.join(work, "mutant"), ignore_errors=True)
            shutil.copytree(pristine, mutant)
            what = mutate_set(rng, mutant)
            problems, n = check_input(pristine, mutant, os.path.join(work, "report"),
                                      inputs % args.report_every == 0)
            inputs, commands = inputs + 1, commands + n
            if problems:
                findings += 1
                keep = os.path.join(args.keep, f"results-{findings}")
                keep_copy(mutant, keep, what)
                print(f"FINDING {findings} (input {inputs}, kept in {keep}):\n  " + "\n  ".join(what))
                for p in problems:
                    print("  " + p.replace("\n", "\n  "))
        elapsed = time.monotonic() - start
    print(f"fuzz_results: {inputs} inputs ({inputs / elapsed:.1f}/s) from {len(sets)} pristine sets, {commands} "
          f"script runs in {elapsed:.0f} s, {findings} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
