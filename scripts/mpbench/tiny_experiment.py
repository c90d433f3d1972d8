"""A tiny CPU MLP experiment written as YAML and run by a built runner.

Why a module: the fuzzer's real result set (mpbench/fuzz.py), the convergence
fixture (tests/scripts/convergence_fixture.py) and the Python end-to-end tests
(tests/e2e/) all start from the same small experiment, differing only in
their numbers and matrix; its text and the runner call are written here once.
"""

import os
import subprocess


def mlp_experiment_yaml(name, *, steps, warmup_steps, repeats, batch_size, width, input_dim, eval_samples,
                        matrix, baseline=None, numerics_every=0, include=(), extra=""):
    """The YAML text of a 2-hidden-layer MLP experiment (docs/CONFIG.md).

    `matrix` is one axis line ("fusion: [off, on]"), a list of them (none: one cell,
    "base"), or a {axis: [values]} dict; `baseline` is the flow mapping's contents
    ("fusion: off") or a {key: value} dict; `include` is a list of {key: value}
    cells; `extra` is further top-level YAML, whole lines ("seed: 7\\n"), appended as given."""
    if isinstance(matrix, dict):
        matrix = [f"{axis}: [{', '.join(yaml_scalar(v) for v in values)}]" for axis, values in matrix.items()]
    lines = [matrix] if isinstance(matrix, str) else list(matrix)
    text = (f"name: {name}\nsteps: {steps}\nwarmup_steps: {warmup_steps}\nrepeats: {repeats}\n"
            f"batch_size: {batch_size}\nnumerics_every: {numerics_every}\n"
            f"model: {{hidden_layers: 2, width: {width}}}\n"
            f"data: {{input_dim: {input_dim}, eval_samples: {eval_samples}}}\n")
    if lines:
        text += "matrix:\n" + "".join(f"  {line}\n" for line in lines)
    if include:
        text += "include:\n" + "".join(f"  - {{{flow_map(cell)}}}\n" for cell in include)
    if baseline:
        text += f"baseline: {{{baseline if isinstance(baseline, str) else flow_map(baseline)}}}\n"
    return text + extra


def yaml_scalar(value):
    """A value as a YAML flow value: a dict as a nested flow map ({mode: dynamic, init: 1024}: the
    runner reads a loss scale as a map, its cell id says "dynamic{init:1024}"), other text quoted
    where YAML would read its braces, commas or colons."""
    if isinstance(value, dict):
        return "{" + flow_map(value) + "}"
    text = str(value)
    return '"' + text.replace('"', '\\"') + '"' if any(ch in text for ch in '{}[],:#"') else text


def flow_map(settings):
    """{key: value} as the inside of a YAML flow mapping: "precision: fp32, model.kind: bert"."""
    return ", ".join(f"{key}: {yaml_scalar(value)}" for key, value in settings.items())


def write_mlp_experiment(directory, name, **kwargs):
    """Writes DIRECTORY/NAME.yaml (kwargs: mlp_experiment_yaml's); returns the file's path."""
    path = os.path.join(directory, name + ".yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(mlp_experiment_yaml(name, **kwargs))
    return path


def run_on_cpu(runner, yaml_path, out, *, args=(), env=None, timeout=300):
    """Runs `runner YAML --device cpu --out OUT --quiet [ARGS]`; returns the result directory
    OUT/<name> (the YAML file's stem, as write_mlp_experiment names it). A non-zero
    exit raises RuntimeError with the runner's output: a fixture that failed to
    build must stop the caller, not hand it an empty directory."""
    proc = subprocess.run([runner, yaml_path, "--device", "cpu", "--out", out, "--quiet", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{runner} {yaml_path}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return os.path.join(out, os.path.splitext(os.path.basename(yaml_path))[0])
