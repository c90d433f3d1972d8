"""What the Python end-to-end tests share: the runner under test and a small
MLP experiment written to a YAML file.

CTest sets MPB_RUNNER (the built runner) and MPB_SOURCE_DIR; run by hand from
the repository root the defaults work after scripts/build.sh.
"""

import glob
import json
import os

RUNNER = os.environ.get("MPB_RUNNER", "build/runner")
SOURCE_DIR = os.environ.get("MPB_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def write_mlp_experiment(directory, name, *, steps, warmup_steps, repeats, batch_size, width, input_dim,
                         eval_samples, matrix, baseline=None):
    """Writes DIRECTORY/NAME.yaml: a 2-hidden-layer MLP experiment without numerics
    sampling; `matrix` (and `baseline`) are the YAML flow mappings' contents, e.g.
    "fusion: [off, on]". Returns the file's path."""
    text = (f"name: {name}\nsteps: {steps}\nwarmup_steps: {warmup_steps}\nrepeats: {repeats}\n"
            f"batch_size: {batch_size}\nnumerics_every: 0\n"
            f"model: {{hidden_layers: 2, width: {width}}}\n"
            f"data: {{input_dim: {input_dim}, eval_samples: {eval_samples}}}\n"
            f"matrix:\n  {matrix}\n")
    if baseline:
        text += f"baseline: {{{baseline}}}\n"
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


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
