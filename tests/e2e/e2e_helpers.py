"""What the Python end-to-end tests share: the runner under test and a small
MLP experiment written to a YAML file (write_mlp_experiment, from
scripts/mpbench/tiny_experiment.py, which the fuzzer and the script tests'
convergence fixture use too).

CTest sets MPB_RUNNER (the built runner) and MPB_SOURCE_DIR; run by hand from
the repository root the defaults work after scripts/build.sh.
"""

import glob
import json
import os
import sys

RUNNER = os.environ.get("MPB_RUNNER", "build/runner")
SOURCE_DIR = os.environ.get("MPB_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if os.path.join(SOURCE_DIR, "scripts") not in sys.path:    # the tests' one entry point to scripts/mpbench
    sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))

from mpbench.tiny_experiment import write_mlp_experiment  # noqa: E402,F401  (re-exported to the tests)


def expect_regressed(code, out, cells, fails, what):
    """A gate's verdict on a planted slowdown: exit 1, and every slowed cell named
    "REGRESSED: <cell> throughput" in `out`. Failures are appended to `fails`."""
    if code != 1:
        fails.append(f"{what} exited {code}, expected 1:\n{out}")
    for cell in cells:
        if f"REGRESSED: {cell} throughput" not in out:
            fails.append(f"{what}: the slowed cell {cell} is not named as regressed:\n{out}")


def report(fails):
    """Prints each failure and returns the test's exit code (1 if any failed)."""
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


def cells_of(run_dir):
    """cell id -> cell JSON of every finished cell in a result directory (cells/*.json)."""
    out = {}
    for f in glob.glob(os.path.join(run_dir, "cells", "*.json")):
        with open(f) as fh:
            c = json.load(fh)
        out[c["cell_id"]] = c
    return out
