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
        m = re.search(r"^torch\s+fp32\s+(\d+) tokens/s$", p.stdout, re.M)
        self.assertIsNotNone(m, p.stdout)
        self.assertGreater(int(m.group(1)), 0)

    def test_no_gpu_is_a_one_line_error(self):
        import torch
        if torch.cuda.is_available():
            self.skipTest("a GPU is visible here")
        p = run("--torch-only", *TOY)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(p.stderr.strip().count("\n"), 0, p.stderr)
        self.assertIn("no CUDA GPU", p.stderr)

    def test_bad_precision_is_refused(self):
        p = run("--torch-only", "--device", "cpu", "--precisions", "fp64", *TOY)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("unknown 'fp64'", p.stderr)


if __name__ == "__main__":
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch is not importable")
        sys.exit(77)
    unittest.main()
