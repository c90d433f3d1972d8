#!/usr/bin/python3
"""The README's regression gate fails on a real slowdown and passes two clean runs.

Real runs, not edited files (issue 17): a two-cell experiment runs three
times on this machine: BASE and CLEAN as they are, SLOW with
--inject-step-delay-ms set to two faster-cell steps (a ~3x slowdown).
`compare.py BASE SLOW --strict` must exit 1 and name both (slowed) cells;
`compare.py BASE CLEAN --strict` must exit 0.

Why a 3x delay and --threshold 40%, not the README's 5%: on the shared cloud
VMs this runs on, the machine's speed drifts by up to ~40% between runs made
seconds apart, with no load visible inside the VM (docs/REPORTS.md, "How
fast the machine drifts"). No test inside one run can see that drift, so a
5% gate between two runs made at different times fails clean pairs there
(measured: 10 of 28 pairs). This test proves the mechanism both ways with a
margin that drift cannot cross; the rates at 5% are stated in REPORTS.md. The
test runs alone (RUN_SERIAL): a neighbouring test's load would be drift too.
"""

import json
import os
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, expect_regressed, report, SOURCE_DIR, write_mlp_experiment

COMPARE = os.path.join(SOURCE_DIR, "scripts", "compare.py")
CELLS = ("fusion=off", "fusion=on")
THRESHOLD = "40%"   # above the drift between runs on a shared VM (up to 1.37x measured; docstring)
DELAY_STEPS = 2.0   # planted delay in faster-cell steps: throughput -67%, well beyond the threshold
                    # (a 2x slowdown is only -50% in throughput: right at a 50% threshold)


def run_set(yaml_path, out, *extra):
    subprocess.run([RUNNER, yaml_path, "--device", "cpu", "--out", out, "--quiet", *extra], check=True)
    return os.path.join(out, "gate")


def median_step_ms(result_dir):
    steps = []
    for cell in CELLS:
        with open(os.path.join(result_dir, "cells", cell + ".json")) as f:
            steps.append(json.load(f)["summary"]["step_time_ms"]["median"])
    return min(steps)


def compare(base, new):
    proc = subprocess.run([sys.executable, COMPARE, base, new, "--strict", "--threshold", THRESHOLD],
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_gate_") as tmp:
        yaml_path = write_mlp_experiment(tmp, "gate", steps=60, warmup_steps=5, repeats=4, batch_size=256,
                                         width=512, input_dim=256, eval_samples=256, matrix="fusion: [off, on]")
        base = run_set(yaml_path, os.path.join(tmp, "base"))
        clean = run_set(yaml_path, os.path.join(tmp, "clean"))
        delay = DELAY_STEPS * median_step_ms(base)
        slow = run_set(yaml_path, os.path.join(tmp, "slow"), "--inject-step-delay-ms", f"{delay:.4f}")
        print(f"planted delay {delay:.3f} ms per step ({100 * DELAY_STEPS:g}% of the faster cell's median step)")

        code, out = compare(base, slow)
        expect_regressed(code, out, CELLS, fails, "compare BASE SLOW --strict")
        if "--inject-step-delay-ms" not in out:
            fails.append("compare.py did not warn that SLOW carries a planted delay")

        code, out = compare(base, clean)
        print("clean pair:", "; ".join(line for line in out.splitlines() if line.startswith("fusion=")))
        if code != 0:
            fails.append(f"two clean runs failed the gate (exit {code}): a false positive\n{out}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
