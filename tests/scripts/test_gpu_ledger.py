#!/usr/bin/python3
"""bin/gpu-session's plan, scripts/gpu_ledger.py and scripts/gpu_session_summary.py, on the CPU.

- every phase of `gpu-session --plan` lists no more time in the steps it always runs than
  its budget, in the order first, lease, sanitize, smoke, profile, headline, each step
  naming the source groups it runs;
- `gpu_ledger.py next` on planted ledgers: first until a bring-up passed, then the lease,
  whose steps passed at the current hashes of the groups they run are reused: a test-only
  change re-runs only the gate, a host change only what runs the runner, a device (.cu)
  change everything; a failed step re-runs; records from before the rule reuse nothing;
- a summary made from planted logs prints the cell's figures and PyTorch's ratio (naming
  its anchor) and carries the commit and the sources, and `add` appends it once;
- the source groups' hashes follow the include graph: a header a .cu includes moves
  `device`, a test moves `gpu_tests` only, the runner `host` only.
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

from script_test_helpers import SOURCE_DIR, TempDirTest, run_script

SESSION = os.path.join(SOURCE_DIR, "scripts", "bundle", "gpu-session")
ORDER = ["first", "lease", "sanitize", "smoke", "profile", "headline"]
H = "0123456789abcdef"
SOURCES = {"device": "d" * 16, "gpu_tests": "t" * 16, "host": "h" * 16, "torch": "p" * 16}


def sources_arg(**changed):
    return ",".join(f"{g}={changed.get(g, h)}" for g, h in SOURCES.items())


def plan_text():
    p = subprocess.run(["bash", SESSION, "--plan"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def plan_steps(when=("always",)):
    """{phase: [(step, seconds)]} of the steps run WHEN, and {phase: budget}, from --plan;
    plan_steps(None) lists every step with its inputs and when: (step, seconds, inputs, when)."""
    steps, budgets = {}, {}
    for line in plan_text().splitlines():
        if line.startswith("#"):
            continue
        parts = line.split("\t")
        if parts[1] == "budget":
            budgets[parts[0]] = int(parts[2])
            steps.setdefault(parts[0], [])
        elif when is None:
            steps[parts[0]].append((parts[1], int(parts[2]), parts[3], parts[4]))
        elif parts[4] in when:
            steps[parts[0]].append((parts[1], int(parts[2])))
    return steps, budgets


def record(phase, codes, cuda=H, date="2026-11-27T00:00:00Z", sources=None):
    """A ledger line: every step of PHASE ok unless CODES says otherwise; SOURCES the
    bundle's group hashes (None: a record from before the per-step rule)."""
    steps, _ = plan_steps(("always", "if-time"))
    r = {"schema": "mpbench.gpu_lease/1", "date": date, "phase": phase, "commit": "c0ffee",
         "cuda_sources": cuda, "gpu": "NVIDIA H100 80GB HBM3",
         "steps": [{"name": s, "code": codes.get(s, "ok"), "status": codes.get(s, "ok"), "secs": "1"}
                   for s, _ in steps[phase]]}
    if sources is not None:
        r["sources"] = sources
    return r


class Plan(unittest.TestCase):
    def test_every_phase_fits_its_budget(self):
        steps, budgets = plan_steps()
        self.assertEqual(list(budgets), ORDER)
        for phase in ORDER:
            total = sum(s for _, s in steps[phase])  # the steps it always runs; if-time ones wait for time left
            self.assertLessEqual(total, budgets[phase], f"{phase}: steps list {total} s, budget {budgets[phase]} s")
            self.assertGreater(len(steps[phase]), 0, phase)
        # first runs inside a 540-s call (the device tool's timeout_s): 90 s for unpacking and packing
        self.assertLessEqual(budgets["first"], 450)

    def test_first_has_the_issue_s_steps_in_order(self):
        names = [s for s, _ in plan_steps()[0]["first"]]
        for earlier, later in [("mpbench-env", "gpu-never-run"), ("gpu-never-run", "test_ops_cuda"),
                               ("test_ops_cuda", "bert-cell"), ("bert-cell", "memcheck-small"),
                               ("memcheck-small", "torch-cell")]:
            self.assertLess(names.index(earlier), names.index(later), names)
        self.assertNotIn("selftest", names)  # the op-check table once: test_ops_cuda runs it

    def test_every_step_names_known_source_groups(self):
        for phase, steps in plan_steps(None)[0].items():
            for name, _, inputs, when in steps:
                groups = [g for g in inputs.split(",") if g != "-"]
                self.assertTrue(set(groups) <= set(SOURCES), (phase, name, inputs))
                self.assertIn(when, ("always", "if-time"), (phase, name))
        lease = {n: (i, w) for n, _, i, w in plan_steps(None)[0]["lease"]}
        self.assertEqual(lease["gate-test_ops_cuda"], ("device,gpu_tests", "always"))
        self.assertEqual(lease["anchor"], ("device,host,torch", "always"))
        names = list(lease)
        for earlier, later in [("gate-test_gpu", "anchor"), ("anchor", "timeline-fused"),
                               ("timeline-csv", "fp8-cells"), ("fp8-cells", "memcheck-ops")]:
            self.assertLess(names.index(earlier), names.index(later), names)
        self.assertEqual(lease["gpu_smoke"][1], "if-time")

    def test_ncu_never_locks_clocks(self):
        with open(SESSION) as f:
            text = f.read()
        calls = [ln for ln in text.splitlines() if "step ncu-layer0" in ln or 'step "timeline-' in ln]
        self.assertEqual(len(calls), 2, calls)
        self.assertTrue(calls and all("--clock-control none" in ln for ln in calls), calls)
        with open(os.path.join(SOURCE_DIR, "docs", "GPU.md")) as f:
            profiling = [ln for ln in f if ln.startswith("ncu ") and "--import" not in ln]
        self.assertTrue(profiling and all("--clock-control none" in ln for ln in profiling), profiling)

    def test_help_says_which_phase_per_lease(self):
        p = subprocess.run(["bash", SESSION, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0)
        for lease in ("first lease", "second lease", "third lease"):
            self.assertIn(lease, p.stdout)


class Next(TempDirTest):
    def pick(self, records, **changed):
        ledger = os.path.join(self.tmp, "ledger.jsonl")
        with open(ledger, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
        plan = os.path.join(self.tmp, "plan.tsv")
        with open(plan, "w") as f:
            f.write(plan_text())
        p = run_script("gpu_ledger.py", "next", "--ledger", ledger, "--sources", sources_arg(**changed), "--plan", plan)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = dict(ln.split(": ", 1) for ln in p.stdout.splitlines() if ": " in ln)
        reused = {r.split("=")[0] for r in lines.get("reuse", "").split(",") if r}
        return lines["phase"], reused, p.stdout

    def lease_steps(self):
        return {s for s, *_ in plan_steps(None)[0]["lease"]}

    def test_empty_ledger_runs_first(self):
        self.assertEqual(self.pick([])[0], "first")

    def test_a_failed_bring_up_runs_first_again(self):
        phase, _, out = self.pick([record("first", {"test_ops_cuda": "failed"}, sources=SOURCES)])
        self.assertEqual(phase, "first")

    def test_after_a_passed_first_the_lease_runs_everything(self):
        phase, reused, _ = self.pick([record("first", {"torch-cell": "optional"}, sources=SOURCES)])
        self.assertEqual((phase, reused), ("lease", set()))

    def test_a_passed_lease_at_the_same_sources_is_all_reused(self):
        done = [record("first", {}, sources=SOURCES), record("lease", {}, sources=SOURCES)]
        phase, reused, out = self.pick(done)
        self.assertEqual((phase, reused), ("lease", self.lease_steps()))
        self.assertIn("every step has passed", out)

    def test_a_test_only_change_reruns_only_the_gate(self):
        done = [record("first", {}, sources=SOURCES), record("lease", {}, sources=SOURCES)]
        _, reused, out = self.pick(done, gpu_tests="e" * 16)
        rerun = self.lease_steps() - reused
        self.assertEqual(rerun, {"gate-test_gpu", "gate-test_ops_cuda", "memcheck-ops", "racecheck"})
        self.assertIn("gate-test_ops_cuda (never ran at these sources)", out)

    def test_a_host_change_reruns_what_runs_the_runner(self):
        done = [record("first", {}, sources=SOURCES), record("lease", {}, sources=SOURCES)]
        _, reused, _ = self.pick(done, host="e" * 16)
        self.assertIn("gate-test_ops_cuda", reused)
        self.assertFalse({"anchor", "timeline-fused", "fp8-cells", "gpu_smoke"} & reused)

    def test_a_device_change_reruns_every_step(self):
        done = [record("first", {}, sources=SOURCES), record("lease", {}, sources=SOURCES)]
        phase, reused, _ = self.pick(done, device="e" * 16)
        self.assertEqual((phase, reused), ("lease", set()))  # the bring-up stays passed: the slim gate re-checks

    def test_a_failed_or_deferred_step_runs_again_and_the_latest_run_counts(self):
        early = record("lease", {"anchor": "failed", "gpu_smoke": "deferred"}, sources=SOURCES,
                       date="2026-11-28T00:00:00Z")
        _, reused, out = self.pick([record("first", {}, sources=SOURCES), early])
        self.assertFalse({"anchor", "gpu_smoke"} & reused)
        self.assertIn("anchor (failed)", out)
        late = record("lease", {"gpu_smoke": "deferred"}, sources=SOURCES, date="2026-11-29T00:00:00Z")
        self.assertIn("anchor", self.pick([record("first", {}, sources=SOURCES), early, late])[1])
        self.assertNotIn("anchor", self.pick([record("first", {}, sources=SOURCES), late, early])[1])

    def test_a_reused_step_is_not_a_run(self):
        ok = record("lease", {}, sources=SOURCES, date="2026-11-28T00:00:00Z")
        reused = record("lease", {"anchor": "reused"}, sources=SOURCES, date="2026-11-29T00:00:00Z")
        self.assertIn("anchor", self.pick([record("first", {}, sources=SOURCES), ok, reused])[1])
        only_reused = [record("first", {}, sources=SOURCES), reused]
        only_reused[1]["steps"] = [s for s in only_reused[1]["steps"] if s["name"] == "anchor"]
        self.assertNotIn("anchor", self.pick(only_reused)[1])

    def test_records_from_before_the_rule_reuse_nothing(self):
        phase, reused, _ = self.pick([record("first", {}), record("lease", {})])
        self.assertEqual((phase, reused), ("lease", set()))

    def test_bad_sources_are_refused(self):
        ledger = os.path.join(self.tmp, "ledger.jsonl")
        open(ledger, "w").close()
        p = run_script("gpu_ledger.py", "next", "--ledger", ledger, "--sources", "device=abc", "--plan", "/dev/null")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no hash for gpu_tests, host, torch", p.stderr)

    def test_a_bad_ledger_line_is_named(self):
        ledger = os.path.join(self.tmp, "ledger.jsonl")
        with open(ledger, "w") as f:
            f.write(json.dumps(record("first", {})) + "\n{not json\n")
        plan = os.path.join(self.tmp, "plan.tsv")
        with open(plan, "w") as f:
            f.write(plan_text())
        p = run_script("gpu_ledger.py", "next", "--ledger", ledger, "--sources", sources_arg(), "--plan", plan)
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{ledger}:2:", p.stderr)


class SummaryAndAdd(TempDirTest):
    def planted_logs(self):
        """A first phase's log folder as gpu-session leaves it on an H100 (figures made up)."""
        logs = os.path.join(self.tmp, "first")
        cells = os.path.join(logs, "results", "gpu_first_cell", "cells")
        os.makedirs(cells)
        steps = [s for s, _ in plan_steps()[0]["first"]]
        with open(os.path.join(logs, "steps.tsv"), "w") as f:
            for s in steps:
                code, status = ("failed", "FAILED (exit 1)") if s == "test_ops_cuda" else ("ok", "ok")
                f.write(f"{s}\t{code}\t{status}\t3\tfirst/{s}.txt\n")
        texts = {
            "nvidia-smi": "== nvidia-smi\nname, driver_version, clocks.current.sm [MHz], clocks.max.sm [MHz], "
                          "memory.total [MiB]\nNVIDIA H100 80GB HBM3, 580.159.04, 1980 MHz, 1980 MHz, 81559 MiB\n",
            "torch-env": "== torch-env\ntorch 2.11.0+cu130 cuda 13.0 cudnn 91900\ngpu NVIDIA H100 80GB HBM3\n",
            "test_ops_cuda": "[==========] 412 tests from 3 test suites ran. (9000 ms total)\n[  PASSED  ] 410 tests.\n"
                             "[  FAILED  ] 2 tests, listed below:\n[  FAILED  ] CudaOps/Case.gemm_fp8_odd\n"
                             "[  FAILED  ] CudaOps/Case.attention_packed\n"
                             "mpbench: x.cu:12: kernel gelu_fwd failed while executing (MPB_CUDA_DEBUG_SYNC): boom\n",
            "memcheck-small": "========= ERROR SUMMARY: 0 errors\n",
            "torch-cell": "torch                amp_bf16       200000 tokens/s\n"
                          "libraries: torch 2.11.0, CUDA 13.0, cuDNN 9.10.2; mapped: /opt/torch/libcudnn.so.9\n",
        }
        for name, text in texts.items():
            with open(os.path.join(logs, name + ".txt"), "w") as f:
                f.write(text)
        with open(os.path.join(logs, "doctor.json"), "w") as f:
            json.dump({"checks": [{"name": "gpu", "status": "ok", "finding": "1 GPU",
                                   "data": {"libraries": {"cudnn": "9.19.0", "cublasLt": "13.1.0"},
                                            "header_vs_runtime": {"cudnn": {"header": "9.19.0", "runtime": "9.10.2"},
                                                                  "cuda_driver": {"runtime": "13.0"}},
                                            "library_warnings": ["cuDNN runtime 9.10.2 is older than the headers"],
                                            "loaded_libraries": ["/opt/torch/lib/libcudnn.so.9"]}}]}, f)
        with open(os.path.join(cells, "cell.json"), "w") as f:
            json.dump({"cell_id": "(base)", "axes": {}, "config": {"precision": "amp_bf16", "fusion": "on",
                                                                  "model": {"seq_len": 128}},
                       "summary": {"attention_impl": "cudnn_sdpa", "attention_impl_calls": {"cudnn_sdpa": 720},
                                   "plans_created_in_timed_steps": 0, "allocs_in_timed_steps": 0,
                                   "host_syncs_per_step": 2, "gemm_fallbacks": {},
                                   "step_time_ms": {"median": 16.384}, "samples_per_s": 1953.125,
                                   "final_loss": 7.1, "eval_loss": 7.0, "utilization": {"mfu": 0.31}}}, f)
        return logs

    def summary(self, logs):
        p = run_script("gpu_session_summary.py", "--phase", "first", "--steps", os.path.join(logs, "steps.tsv"),
                       "--logs", logs, "--budget", "450", "--elapsed", "401", "--commit", "c0ffee",
                       "--cuda-sources", H, "--sources", sources_arg())
        self.assertEqual(p.returncode, 0, p.stderr)
        path = os.path.join(self.tmp, "first-summary.txt")
        with open(path, "w") as f:
            f.write(p.stdout)
        return path, p.stdout

    def test_the_page_says_the_figures(self):
        _, text = self.summary(self.planted_logs())
        for said in ("NVIDIA H100 80GB HBM3", "driver 580.159.04", "cudnn 9.19.0", "its cuDNN 91900",
                     "attention_impl cudnn_sdpa", "0 plans created, 0 allocations, 2 host syncs/step", "step 16.38 ms",
                     "250000 tokens/s", "mpbench = 1.25x vs torch eager", "412 ran: 410 passed, 2 failed",
                     "CudaOps/Case.gemm_fp8_odd", "kernel gelu_fwd failed while executing",
                     "sanitizer: 0 errors", "commit c0ffee, CUDA sources " + H, "doctor's gpu check: ok: 1 GPU", "headers vs loaded: cudnn 9.19.0 / 9.10.2",
                     "library warning: cuDNN runtime 9.10.2 is older than the headers",
                     "the runner loaded: /opt/torch/lib/libcudnn.so.9",
                     "libraries: torch 2.11.0, CUDA 13.0, cuDNN 9.10.2; mapped: /opt/torch/libcudnn.so.9", "1. crashes or failures: test_ops_cuda",
                     "cuDNN attention and no plan in its timed steps: yes",
                     "4. against PyTorch eager on this GPU (one round): mpbench = 1.25x vs torch eager"):
            self.assertIn(said, text)

    def test_a_later_phase_names_the_gpu_from_the_runner_s_manifest(self):
        # A smoke phase has no nvidia-smi, torch-env or doctor step: the GPU, the runner's
        # libraries and PyTorch's version come from what its steps wrote (the first smoke
        # run, 2026-11-27, recorded "no GPU").
        logs = os.path.join(self.tmp, "smoke")
        os.makedirs(os.path.join(logs, "results", "gpu_smoke"))
        with open(os.path.join(logs, "steps.tsv"), "w") as f:
            f.write("gpu_smoke\tok\tok\t190\tsmoke/gpu_smoke.txt\n")
        with open(os.path.join(logs, "results", "gpu_smoke", "manifest.json"), "w") as f:
            json.dump({"device": {"kind": "cuda", "gpu": {"name": "NVIDIA H200"}},
                       "libraries": {"cudnn": "9.19.0", "cublasLt": "13.1.0",
                                     "header_vs_runtime": {"cudnn": {"header": "9.19.0", "runtime": "9.19.0"}},
                                     "loaded": ["/opt/torch/lib/libcudnn.so.9"]}}, f)
        with open(os.path.join(logs, "torch-precisions.txt"), "w") as f:
            f.write("== torch-precisions\ntorch 2.11.0+cu130 on NVIDIA H200: BERT L12 H768 A12\n")
        p = run_script("gpu_session_summary.py", "--phase", "smoke", "--steps", os.path.join(logs, "steps.tsv"),
                       "--logs", logs, "--budget", "450", "--elapsed", "244", "--commit", "c0ffee",
                       "--cuda-sources", H)
        self.assertEqual(p.returncode, 0, p.stderr)
        record = json.loads(p.stdout.split("ledger-json: ", 1)[1])
        self.assertEqual(record["gpu"], "NVIDIA H200")
        self.assertEqual(record["cudnn"], "9.19.0")
        self.assertEqual(record["torch"], "2.11.0+cu130")
        self.assertEqual(record["loaded_libraries"], ["/opt/torch/lib/libcudnn.so.9"])
        self.assertIn("headers vs loaded: cudnn 9.19.0 / 9.19.0", p.stdout)

    def test_the_kernel_path_or_a_plan_in_timed_steps_is_a_no(self):
        logs = self.planted_logs()
        path = os.path.join(logs, "results", "gpu_first_cell", "cells", "cell.json")
        for impl, plans in (("cuda_kernel", 0), ("cudnn_sdpa+cuda_kernel", 0), ("cudnn_sdpa", 2)):
            with open(path) as f:
                cell = json.load(f)
            cell["summary"].update(attention_impl=impl, plans_created_in_timed_steps=plans)
            with open(path, "w") as f:
                json.dump(cell, f)
            _, text = self.summary(logs)
            self.assertIn("no plan in its timed steps: NO", text)
        cell["summary"].update(attention_impl="cudnn_sdpa_bias_per_query", plans_created_in_timed_steps=0)
        with open(path, "w") as f:
            json.dump(cell, f)
        self.assertIn("no plan in its timed steps: yes", self.summary(logs)[1])  # the per-query bias form is cuDNN too

    def test_add_appends_once_and_next_reads_it(self):
        path, _ = self.summary(self.planted_logs())
        ledger_dir = os.path.join(self.tmp, "gpu")
        p = run_script("gpu_ledger.py", "add", path, "--dir", ledger_dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(ledger_dir, "ledger.jsonl")) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 1)
        r = json.loads(lines[0])
        self.assertEqual((r["commit"], r["cuda_sources"], r["gpu"], r["cudnn"]),
                         ("c0ffee", H, "NVIDIA H100 80GB HBM3", "9.19.0"))
        with open(os.path.join(ledger_dir, "LEDGER.md")) as f:
            md = f.read()
        self.assertIn("| test_ops_cuda | FAILED (exit 1) |", md)
        self.assertIn("mpbench_over_torch", md)
        again = run_script("gpu_ledger.py", "add", path, "--dir", ledger_dir)
        self.assertEqual(again.returncode, 2)
        self.assertIn("already in", again.stderr)
        self.assertEqual(r["sources"], SOURCES)
        p = run_script("gpu_ledger.py", "next", "--ledger", os.path.join(ledger_dir, "ledger.jsonl"),
                       "--sources", sources_arg(), "--plan", self.plan_file())
        self.assertIn("phase: first", p.stdout)  # test_ops_cuda failed: no bring-up yet

    def plan_file(self):
        path = os.path.join(self.tmp, "plan.tsv")
        with open(path, "w") as f:
            f.write(plan_text())
        return path

    def test_add_refuses_a_page_without_a_ledger_line(self):
        path = os.path.join(self.tmp, "x-summary.txt")
        with open(path, "w") as f:
            f.write("gpu-session first: scripts/gpu_session_summary.py FAILED\n")
        p = run_script("gpu_ledger.py", "add", path, "--dir", os.path.join(self.tmp, "gpu"))
        self.assertEqual(p.returncode, 2)
        self.assertIn(path, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "gpu", "ledger.jsonl")))


class SourceHashes(TempDirTest):
    def write(self, rel, text):
        os.makedirs(os.path.join(self.tmp, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(self.tmp, rel), "w") as f:
            f.write(text)

    def hashes(self):
        p = run_script("gpu_ledger.py", "source-hashes", self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        return dict(kv.split("=") for kv in p.stdout.strip().split(","))

    def test_groups_follow_the_include_graph(self):
        self.write("backends/cuda/a.cu", '#include "ops/gelu.h"\n#include <cuda_runtime.h>\n')
        self.write("ops/gelu.h", '#pragma once\n#include "core/scalar.h"\n')
        self.write("core/scalar.h", "float x;\n")
        self.write("core/unused.h", "int y;\n")
        self.write("tests/gpu/t.cpp", '#include "tests/gpu/helper.h"\n')
        self.write("tests/gpu/helper.h", "1\n")
        self.write("runner/main.cpp", "1\n")
        self.write("bench/torch_bert_gpu.py", "1\n")
        self.write("docs/GPU.md", "1\n")
        base = self.hashes()
        self.assertEqual(set(base), set(SOURCES))

        def changed(rel, text):
            self.write(rel, text)
            now = self.hashes()
            return {g for g in base if now[g] != base[g]}
        self.assertEqual(changed("docs/GPU.md", "2\n"), set())                    # a doc: nothing
        self.assertEqual(changed("tests/gpu/helper.h", "2\n"), {"gpu_tests"})     # a test: the gate only
        base = self.hashes()
        self.assertEqual(changed("runner/main.cpp", "2\n"), {"host"})
        base = self.hashes()
        self.assertEqual(changed("core/unused.h", "2\n"), {"host"})               # no .cu includes it
        base = self.hashes()
        self.assertEqual(changed("core/scalar.h", "2\n"), {"device", "host"})     # included by a .cu, two deep
        base = self.hashes()
        self.assertEqual(changed("backends/cuda/a.cu", '#include "ops/gelu.h"\n'), {"device"})
        base = self.hashes()
        self.assertEqual(changed("bench/torch_bert_gpu.py", "2\n"), {"torch"})

    def test_cuda_hash_is_the_device_group_and_needs_a_source_tree(self):
        self.write("backends/cuda/a.cu", "1\n")
        p = run_script("gpu_ledger.py", "cuda-hash", self.tmp)
        self.assertEqual(p.stdout.strip(), self.hashes()["device"])
        shutil.rmtree(os.path.join(self.tmp, "backends"))
        self.assertEqual(run_script("gpu_ledger.py", "cuda-hash", self.tmp).returncode, 2)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
