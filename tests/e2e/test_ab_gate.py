#!/usr/bin/python3
"""The A/B gate (scripts/ab_compare.py) catches a planted slowdown through real
runs, and passes the same build against itself.

Two runner "builds" run each cell alternately, ABBA, so that the machine's
drift between runs falls on both sides (docs/REPORTS.md, "A/B: two builds
alternately"). Here both are this build's runner; the slow side adds
--inject-step-delay-ms worth one step of the faster cell (throughput -50% or
less for it, less for the slower cell: DELAY_STEPS). It must fail --strict
(exit 1) naming both cells; the clean pair must pass (exit 0).

Why --threshold 10%, not 5%: the pair shares this 2-core VM with nothing, but
CI's other steps (and other tenants of the host) still jitter single runs of
a few hundred milliseconds; docs/REPORTS.md states the false-positive rate
measured at 5% and at 10%. The test runs alone (RUN_SERIAL).
"""

import json
import os
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, expect_regressed, report, SOURCE_DIR, write_mlp_experiment

AB = os.path.join(SOURCE_DIR, "scripts", "ab_compare.py")
CELLS = ("fusion=off", "fusion=on")
ROUNDS = "5"
THRESHOLD = "10%"
DELAY_STEPS = 1.0  # the planted delay, in faster-cell median steps


def ab(yaml_path, tmp, name, *new_args):
    out_json = os.path.join(tmp, name + ".json")
    cmd = [sys.executable, AB, yaml_path, "--base", RUNNER, "--new", RUNNER, "--device", "cpu", "--rounds", ROUNDS,
           "--threshold", THRESHOLD, "--strict", "--quiet", "--json", out_json]
    for a in new_args:
        cmd.append(f"--new-arg={a}")  # "=": the value starts with "--"
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(f"--- {name}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    with open(out_json) as f:
        return proc.returncode, proc.stdout + proc.stderr, json.load(f)


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_ab_") as tmp:
        yaml_path = write_mlp_experiment(tmp, "ab", steps=60, warmup_steps=5, repeats=1, batch_size=256,
                                         width=512, input_dim=256, eval_samples=256, matrix="fusion: [off, on]")
        code, out, clean = ab(yaml_path, tmp, "clean")
        if code != 0:
            fails.append(f"the same build against itself failed the A/B gate (exit {code}): a false positive")
        fastest = min(min(c["base_step_ms"]) for c in clean["cells"])
        delay = DELAY_STEPS * fastest
        code, out, slow = ab(yaml_path, tmp, "slow", "--inject-step-delay-ms", f"{delay:.4f}")
        expect_regressed(code, out, CELLS, fails, f"the A/B gate with a planted {delay:.3f} ms per step")
        if "TESTING ONLY" not in out:
            fails.append("ab_compare.py did not say that a side ran with a planted --inject option")
        if [len(c["new_step_ms"]) for c in slow["cells"]] != [int(ROUNDS)] * len(CELLS):
            fails.append("the JSON does not hold one sample per round and cell")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
