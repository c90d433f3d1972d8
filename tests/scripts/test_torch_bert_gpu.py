"""bench/torch_bert_gpu.py, the GPU speed oracle, in the form any machine can
run: PyTorch's side only, on the CPU, at a toy size. It proves the model code
(BERT layers, SDPA or its composed fallback, the sparse MLM head, AdamW, the
timing) runs and reports tokens/s, and that asking for a GPU where PyTorch
sees none is a one-line error and exit 1, not a crash or a silent CPU run.
The GPU numbers themselves need a GPU (docs/GPU.md, run-book).

Exits 77 (skipped) when torch can't be imported.
"""

import os
import re
import subprocess
import sys
import unittest

from script_test_helpers import PYTHON, SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "bench", "torch_bert_gpu.py")
TOY = ["--layers", "1", "--hidden", "64", "--heads", "2", "--batch", "2", "--seq", "16", "--vocab", "100",
       "--steps", "3", "--rounds", "1"]


def run(*args):
    return subprocess.run([PYTHON, SCRIPT, *args], capture_output=True, text=True, timeout=300)


class TorchBertGpu(unittest.TestCase):
    def test_cpu_toy_reports_tokens_per_s(self):
        p = run("--torch-only", "--device", "cpu", *TOY)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("BERT L1 H64 A2, sequence 16, batch 2, vocabulary 104", p.stdout)  # 100 padded to 8
        m = re.search(r"^torch eager\s+fp32\s+(\d+) tokens/s \(best of 1, rounds 0.0% apart\)$", p.stdout, re.M)
        self.assertIsNotNone(m, p.stdout)
        self.assertGreater(int(m.group(1)), 0)
        import torch
        if not hasattr(torch, "compile"):  # Debian's 1.13: the compiled variants are named as skipped, with why
            self.assertIn("skipped torch.compile: torch", p.stdout)

    def test_bad_variant_is_refused(self):
        p = run("--torch-only", "--device", "cpu", "--variants", "jit", *TOY)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("unknown 'jit'", p.stderr)

    def test_no_gpu_is_a_one_line_error(self):
        import torch
        if torch.cuda.is_available():
            self.skipTest("a GPU is visible here")
        p = run("--torch-only", *TOY)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(p.stderr.strip().count("\n"), 0, p.stderr)
        self.assertIn("no CUDA GPU", p.stderr)

    def test_torch_runs_without_mpbench_envs_toolkit_path_and_says_what_it_loaded(self):
        # Started as under bin/mpbench-env: the toolkit's directory first on
        # LD_LIBRARY_PATH. PyTorch's process must start again without it
        # (bench/torch_library_env.py) and the JSON must say so.
        import json
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "torch.json")
            env = dict(os.environ, LD_LIBRARY_PATH="/usr/local/cuda/lib64:" + d,
                       MPB_ENV_ADDED_LIB_DIRS="/usr/local/cuda/lib64")
            for k in ("MPB_TORCH_ENV_DONE", "MPB_RUNNER_LD_LIBRARY_PATH"):
                env.pop(k, None)
            p = subprocess.run([PYTHON, SCRIPT, "--torch-only", "--device", "cpu", "--json", out, *TOY],
                               capture_output=True, text=True, timeout=300, env=env)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(out) as f:
                doc = json.load(f)
        libs = doc["libraries"]["torch"]
        self.assertEqual(libs["ld_library_path"], d)
        self.assertEqual(libs["stripped_from_ld_library_path"], ["/usr/local/cuda/lib64"])
        self.assertFalse([x for x in libs["loaded"] if x.startswith("/usr/local/cuda")], libs["loaded"])
        self.assertIsNone(doc["libraries"]["mpbench"])  # --torch-only
        self.assertIn("libraries: torch ran without /usr/local/cuda/lib64", p.stdout)
        self.assertEqual([r["side"] for r in doc["tokens_per_s"]], ["torch eager"])
        eager = doc["variants"][0]
        self.assertEqual((eager["variant"], eager["compile_s"], eager["dense_head"]), ("eager", 0.0, False))
        self.assertTrue(eager["sdpa_backend"])

    def test_json_into_a_missing_directory_is_refused_first(self):
        p = run("--torch-only", "--device", "cpu", "--json", "/nonexistent-dir/x.json", *TOY)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("--json /nonexistent-dir/x.json: its directory does not exist", p.stderr)
        self.assertNotIn("tokens/s", p.stdout)

    def test_bad_precision_is_refused(self):
        p = run("--torch-only", "--device", "cpu", "--precisions", "fp64", *TOY)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("unknown 'fp64'", p.stderr)


class AnchorRatio(unittest.TestCase):
    """The headline ratio is against the strongest PyTorch variant, named, with its range."""

    def ratios(self, torch_rounds, mpbench_rounds):
        sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
        import torch_bert_gpu
        return torch_bert_gpu.anchor_ratios(torch_rounds, mpbench_rounds, ["amp_bf16"])["amp_bf16"]

    def test_strongest_variant_is_the_anchor(self):
        r = self.ratios({("eager", "amp_bf16"): [100.0, 110.0], ("compile-ro", "amp_bf16"): [200.0, 180.0],
                         ("compile", "amp_bf16"): [150.0, 160.0]},
                        {("amp_bf16", "on"): [300.0, 240.0], ("amp_bf16", "off"): [10.0, 10.0]})
        self.assertEqual(r["anchor"], "compile-ro")
        self.assertEqual(r["anchor_label"], "torch.compile reduce-overhead")
        self.assertAlmostEqual(r["ratio"], 300.0 / 200.0)  # best over best
        self.assertAlmostEqual(r["ratio_range"][0], 240.0 / 180.0)  # round by round
        self.assertAlmostEqual(r["ratio_range"][1], 300.0 / 200.0)
        self.assertAlmostEqual(r["vs_each"]["eager"], 300.0 / 110.0)

    def test_dense_head_hf_is_the_anchor_only_alone(self):
        # HF scores every position (more work): faster or not, it anchors only when nothing else ran
        r = self.ratios({("eager", "amp_bf16"): [100.0], ("hf", "amp_bf16"): [120.0]}, {("amp_bf16", "on"): [200.0]})
        self.assertEqual(r["anchor"], "eager")
        r = self.ratios({("hf", "amp_bf16"): [120.0]}, {("amp_bf16", "on"): [240.0]})
        self.assertEqual((r["anchor"], r["ratio"]), ("hf", 2.0))


if __name__ == "__main__":
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch is not importable")
        sys.exit(77)
    unittest.main()
