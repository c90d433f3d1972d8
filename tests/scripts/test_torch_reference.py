"""mpbench against PyTorch (docs/REFERENCE.md): for each cell of
tests/data/reference_mlp.yaml, reference_bert_tiny.yaml and reference_bert_lamb.yaml, run
`runner --export-reference`, scripts/torch_reference.py and
scripts/check_reference.py, and fail on any mismatch.

Run by CTest with Debian's /usr/bin/python3 and MPB_RUNNER (the built
runner) and MPB_SOURCE_DIR in the environment. Exits 77 (skipped) when torch
can't be imported or the runner isn't given; never passes without checking.
BERT cells are skipped, with the runner's reason, while the runner can't
build BERT cells yet.
"""

import json
import os
import subprocess
import sys
import unittest

from script_test_helpers import TempDirTest

SKIP_EXIT_CODE = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("MPB_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPTS = os.path.join(SOURCE_DIR, "scripts")
DATA = os.path.join(SOURCE_DIR, "tests", "data")
RUNNER = os.environ.get("MPB_RUNNER", "")
PYTHON = sys.executable or "/usr/bin/python3"

MLP_YAML = os.path.join(DATA, "reference_mlp.yaml")
BERT_YAML = os.path.join(DATA, "reference_bert_tiny.yaml")
LAMB_YAML = os.path.join(DATA, "reference_bert_lamb.yaml")

# What the runner says while BERT isn't wired into it (config/schema.cpp's
# "not supported yet" table, train/cell_factory.cpp's builders). Only these
# turn a BERT failure into a skip; anything else fails.
BERT_NOT_WIRED = ("model.kind 'bert' is not supported yet", "model.kind 'bert' has no builder",
                  "data.kind 'markov' has no builder")


def run(cmd, timeout=300):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def describe(proc):
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


class ReferenceCase(TempDirTest):
    tmp_prefix = "mpb-ref-"

    def export(self, yaml, cell_filter, name):
        out = os.path.join(self.tmp, name)
        proc = run([RUNNER, yaml, "--export-reference", out, "--filter", cell_filter])
        return out, proc

    def check_cell(self, yaml, cell_filter, name, skip_if=()):
        out, proc = self.export(yaml, cell_filter, name)
        if proc.returncode != 0:
            for reason in skip_if:
                if reason in proc.stderr:
                    self.skipTest(f"the runner can't build this cell yet: {proc.stderr.strip()}")
        self.assertEqual(proc.returncode, 0, "runner --export-reference: " + describe(proc))
        for f in ("meta.json", "weights.safetensors", "batches.safetensors", "mpbench.safetensors"):
            self.assertTrue(os.path.isfile(os.path.join(out, f)), f)
        proc = run([PYTHON, os.path.join(SCRIPTS, "torch_reference.py"), out])
        self.assertEqual(proc.returncode, 0, "torch_reference.py: " + describe(proc))
        proc = run([PYTHON, os.path.join(SCRIPTS, "check_reference.py"), out])
        self.assertEqual(proc.returncode, 0, "check_reference.py: " + describe(proc))  # shows the table
        self.assertIn("tensors match", proc.stdout)
        return out


class MlpMatchesPyTorch(ReferenceCase):
    def test_unfused_gelu(self):
        self.check_cell(MLP_YAML, "fusion=off,model.activation=gelu", "mlp_gelu")

    def test_fused_gelu(self):
        self.check_cell(MLP_YAML, "fusion=on,optimizer.decay=none", "mlp_fused")

    def test_lr_schedule(self):
        self.check_cell(MLP_YAML, "optimizer.decay=cosine", "mlp_schedule")

    def test_relu(self):
        self.check_cell(MLP_YAML, "model.activation=relu", "mlp_relu")

    def test_decay_exclude_bias(self):
        """Two parameter groups: weight decay on the weights, none on the biases."""
        self.check_cell(MLP_YAML, "optimizer.decay_exclude=[bias]", "mlp_no_decay_bias")


class BertMatchesPyTorch(ReferenceCase):
    def check_bert(self, cell_filter, name):
        self.check_cell(BERT_YAML, cell_filter, name, skip_if=BERT_NOT_WIRED)

    # The matrix cells have the default sparse MLM head; two include cells the dense one.
    def test_post_ln(self):
        self.check_bert("model.pre_ln=off,fusion=off,model.mlm_head=sparse", "bert_post_ln")

    def test_post_ln_fused(self):
        self.check_bert("model.pre_ln=off,fusion=on,model.mlm_head=sparse", "bert_post_ln_fused")

    def test_pre_ln(self):
        self.check_bert("model.pre_ln=on,fusion=off,model.mlm_head=sparse", "bert_pre_ln")

    def test_pre_ln_fused(self):
        self.check_bert("model.pre_ln=on,fusion=on,model.mlm_head=sparse", "bert_pre_ln_fused")

    def test_post_ln_dense_head(self):
        self.check_bert("model.pre_ln=off,fusion=off,model.mlm_head=dense", "bert_post_ln_dense")

    def test_pre_ln_fused_dense_head(self):
        self.check_bert("model.pre_ln=on,fusion=on,model.mlm_head=dense", "bert_pre_ln_fused_dense")


class LambMatchesPaper(ReferenceCase):
    """optimizer.kind lamb against torch_reference.py's PaperLamb, written from
    the paper (torch has no LAMB): 10 steps of BERT-tiny, every final weight."""

    def test_bias_correction_unfused(self):
        """optimizer.lamb_qkv split: q, k, v as separate Linears in PyTorch, three trust ratios."""
        self.check_cell(LAMB_YAML, "optimizer.bias_correction=on,optimizer.lamb_qkv=split", "bert_lamb")

    def test_packed_qkv(self):
        """optimizer.lamb_qkv packed: one [3C, C] Linear in PyTorch, one trust ratio."""
        self.check_cell(LAMB_YAML, "optimizer.lamb_qkv=packed", "bert_lamb_packed")

    def test_no_bias_correction_fused(self):
        self.check_cell(LAMB_YAML, "optimizer.bias_correction=off", "bert_lamb_no_bc")

    def test_the_check_tells_split_from_packed(self):
        """The packed cell's run checked against the split reference (separate
        q, k, v Linears) fails on the QKV weights: the check sees the difference."""
        out, proc = self.export(LAMB_YAML, "optimizer.lamb_qkv=packed", "bert_lamb_mislabelled")
        self.assertEqual(proc.returncode, 0, describe(proc))
        meta_path = os.path.join(out, "meta.json")
        with open(meta_path) as f:
            meta = json.load(f)
        meta["config"]["optimizer"]["lamb_qkv"] = "split"
        with open(meta_path, "w") as f:
            json.dump(meta, f)
        proc = run([PYTHON, os.path.join(SCRIPTS, "torch_reference.py"), out])
        self.assertEqual(proc.returncode, 0, "torch_reference.py: " + describe(proc))
        proc = run([PYTHON, os.path.join(SCRIPTS, "check_reference.py"), out])
        self.assertEqual(proc.returncode, 1, describe(proc))
        self.assertRegex(proc.stdout, r"final\.encoder\.layer\.\d\.attention\.qkv\.weight .* FAIL")


class ExportCli(ReferenceCase):
    def test_needs_exactly_one_cell(self):
        out, proc = self.export(MLP_YAML, "fusion=off", "two")  # matches the gelu and relu cells
        self.assertEqual(proc.returncode, 2, describe(proc))
        self.assertIn("exactly one cell", proc.stderr)
        self.assertIn("model.activation=relu", proc.stderr)  # the candidates are listed
        self.assertFalse(os.path.exists(out))
        out, proc = self.export(MLP_YAML, "fusion=on,seed=12345", "none")
        self.assertEqual(proc.returncode, 2, describe(proc))
        self.assertIn("matches 0", proc.stderr)

    def test_check_fails_on_a_mismatch(self):
        """The checker is not vacuous: a perturbed gradient fails it, with exit 1."""
        sys.path.insert(0, SCRIPTS)
        from mpbench.reference import torch_model as tr  # noqa: E402
        out = self.check_cell(MLP_YAML, "fusion=on,optimizer.decay=none", "mlp_perturbed")
        path = os.path.join(out, "reference.safetensors")
        ref, meta = tr.read_safetensors(path)
        ref["grad.layers.1.bias"] = ref["grad.layers.1.bias"] * 1.001
        tr.write_safetensors(path, ref, meta)
        proc = run([PYTHON, os.path.join(SCRIPTS, "check_reference.py"), out])
        self.assertEqual(proc.returncode, 1, describe(proc))
        self.assertRegex(proc.stdout, r"grad\.layers\.1\.bias .* FAIL")
        del ref["final.layers.0.bias"]
        tr.write_safetensors(path, ref, meta)
        proc = run([PYTHON, os.path.join(SCRIPTS, "check_reference.py"), out])
        self.assertEqual(proc.returncode, 1, describe(proc))
        self.assertIn("MISSING from reference", proc.stdout)


def main():
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: PyTorch is not importable by {PYTHON} ({e}); install python3-torch", file=sys.stderr)
        return SKIP_EXIT_CODE
    if not RUNNER or not os.access(RUNNER, os.X_OK):
        print(f"skipped: MPB_RUNNER is not set to the built runner (got {RUNNER!r})", file=sys.stderr)
        return SKIP_EXIT_CODE
    result = unittest.main(exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
