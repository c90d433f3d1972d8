#!/usr/bin/python3
"""`runner selftest` as CI and a user run it (issue 11; runner/commands/selftest.h).

--device cpu: exit 0, a table with one row per op and one per training check,
and --json with every op case of the table (small and BERT-shaped), each
passed and compared with a float64 reference, and the training checks: the
skip path and a step of the MLP and BERT-tiny in each precision and fusion.
--device cuda without a usable GPU: exit 1 and a one-line reason, no table
(with a GPU it must pass like the CPU). A bad option: exit 2. That a planted
bug fails it is tests/runner/commands/test_selftest.cpp.
"""

import json
import os
import subprocess
import tempfile

from e2e_helpers import RUNNER, report


def run(*args):
    p = subprocess.run([RUNNER, "selftest", *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def check_cpu(fails, tmp):
    path = os.path.join(tmp, "selftest.json")
    code, out, err = run("--device", "cpu", "--json", path)
    if code != 0:
        fails.append(f"selftest --device cpu exited {code}:\n{out}\n{err}")
        return
    for text in ("gemm ", "attention_forward", "layernorm_backward", "adamw_step", "training check",
                 "loss scaler skip path", "step bert-tiny amp_bf16 fused", ", 0 failed, on cpu"):
        if text not in out:
            fails.append(f"the table lacks {text!r}:\n{out}")
    with open(path) as f:
        j = json.load(f)
    if j["schema"] != "mpbench.selftest/1" or j["exit_code"] != 0 or j["failed"] != 0:
        fails.append(f"JSON header: {j['schema']}, exit_code {j['exit_code']}, failed {j['failed']}")
    sizes = {o["size"] for o in j["ops"]}
    if sizes != {"small", "bert"}:
        fails.append(f"op case sizes {sizes}, expected small and BERT-shaped ones")
    if len(j["ops"]) < 400:
        fails.append(f"only {len(j['ops'])} op cases ran")
    for o in j["ops"]:
        if o["status"] != "pass" or o["checked"] <= 0:
            fails.append(f"op case {o['case']}: {o['status']}, {o['checked']} elements checked")
    names = [t["name"] for t in j["training"]]
    for model in ("mlp", "bert-tiny"):
        for precision in ("fp32", "tf32", "amp_fp16", "amp_bf16"):
            for fusion in ("unfused", "fused"):
                if f"step {model} {precision} {fusion}" not in names:
                    fails.append(f"no training check 'step {model} {precision} {fusion}' in {names}")
    if j["device"]["kind"] != "cpu" or not j["device"]["tf32_rounding"]:
        fails.append(f"device facts: {j['device']}")


def check_cuda(fails):
    code, out, err = run("--device", "cuda", "--quick")
    if code == 0:
        return  # a usable GPU, and it passed
    lines = err.strip().splitlines()
    if code != 1 or len(lines) != 1 or not lines[0].startswith("error: selftest --device cuda: ") or "op " in out:
        fails.append(f"--device cuda without a GPU: exit {code} (expected 1), stderr {err!r}, stdout {out!r}")


def main():
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        check_cpu(fails, tmp)
    check_cuda(fails)
    code, _, err = run("--device", "tpu")
    if code != 2:
        fails.append(f"--device tpu exited {code}, expected 2: {err}")
    return report(fails)


if __name__ == "__main__":
    raise SystemExit(main())
