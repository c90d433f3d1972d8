"""What bench/torch_bert_speed.py (BERT-mini, CPU) and bench/torch_bert_gpu.py
(BERT-base, GPU) share: the PyTorch BERT they train against mpbench's, and the
runner call that measures mpbench's side.

The model is models/bert.cpp's: post-LN encoder layers (attention + GELU FFN),
BERT's N(0, 0.02) initialisation with zero biases, an MLM head (dense, GELU,
LayerNorm) and a decoder tied to the token embedding. What the two scripts
do differently is a parameter:

  attention="explicit"  q k^T / sqrt(d) + mask, softmax, @ v, the mask as given
            "sdpa"      F.scaled_dot_product_attention (PyTorch 2.x), the mask
                        cast to q's dtype; the same composed softmax where
                        PyTorch has no SDPA (1.13: torch_bert_gpu's CPU smoke test)
  ln_in_weight_dtype    each LayerNorm's input cast to its weights' dtype: torch
                        1.13's CPU autocast refuses a bf16 input with fp32
                        LayerNorm weights, so torch_bert_speed's bf16 run keeps
                        its LayerNorms in bf16
  forward(..., positions=None)  dense labels (every position, -1 ignored);
                        positions given: the sparse head (those positions only)
"""

import csv
import json
import math
import os
import subprocess
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class BertShape:
    """The sizes: L layers, hidden H, A heads, FFN, sequence T, vocabulary V."""

    def __init__(self, L, H, A, FFN, T, V):
        self.L, self.H, self.A, self.FFN, self.T, self.V = L, H, A, FFN, T, V


def composed_attention(q, k, v, bias):
    """softmax(q k^T / sqrt(d) + bias) v, as written."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    return s.softmax(-1) @ v


def sdpa_attention(q, k, v, bias):
    """Fused attention where PyTorch has it (2.x); the composed softmax where
    it does not (1.13, Debian's CPU build)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return composed_attention(q, k, v, bias)


def _ln_as_is(module, x):
    return module(x)


def _ln_in_weight_dtype(module, x):
    return module(x.to(module.weight.dtype))


class Layer(nn.Module):
    """A post-LN BERT encoder layer (attention + GELU FFN), as models/bert.cpp."""

    def __init__(self, s, attention, ln_apply):
        super().__init__()
        self.s = s
        self.sdpa = attention == "sdpa"
        self.ln_apply = ln_apply
        self.qkv = nn.Linear(s.H, 3 * s.H)
        self.out = nn.Linear(s.H, s.H)
        self.ln1 = nn.LayerNorm(s.H, eps=1e-12)
        self.ff1 = nn.Linear(s.H, s.FFN)
        self.ff2 = nn.Linear(s.FFN, s.H)
        self.ln2 = nn.LayerNorm(s.H, eps=1e-12)

    def forward(self, x, bias):
        s, b = self.s, x.shape[0]
        q, k, v = self.qkv(x).view(b, s.T, 3, s.A, s.H // s.A).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            ctx = sdpa_attention(q, k, v, None if bias is None else bias.to(q.dtype))
        else:
            ctx = composed_attention(q, k, v, bias)
        ctx = ctx.transpose(1, 2).reshape(b, s.T, s.H)
        x = self.ln_apply(self.ln1, x + self.out(ctx))
        return self.ln_apply(self.ln2, x + self.ff2(F.gelu(self.ff1(x), approximate="tanh")))


class Bert(nn.Module):
    """BERT for masked-LM training; forward returns the loss (module docstring)."""

    def __init__(self, s, attention, ln_in_weight_dtype=False):
        super().__init__()
        if attention not in ("explicit", "sdpa"):
            raise ValueError(f"attention: {attention!r}, expected 'explicit' or 'sdpa'")
        self.s = s
        self.ln_apply = _ln_in_weight_dtype if ln_in_weight_dtype else _ln_as_is
        self.tok = nn.Embedding(s.V, s.H)
        self.pos = nn.Embedding(s.T, s.H)
        self.ln = nn.LayerNorm(s.H, eps=1e-12)
        self.layers = nn.ModuleList(Layer(s, attention, self.ln_apply) for _ in range(s.L))
        self.head = nn.Linear(s.H, s.H)
        self.head_ln = nn.LayerNorm(s.H, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(s.V))
        # BERT's initialisation (as models/bert.cpp): N(0, 0.02) weights and
        # embeddings, zero biases. PyTorch's defaults (N(0, 1) embeddings)
        # would saturate the tied decoder's softmax and fill the backward
        # pass with denormals, which makes the CPU crawl.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, ids, key_valid, labels, positions=None):
        """ids, key_valid (1 = a real token; None: no padding, so no mask at all, which
        lets SDPA choose FlashAttention): [B, T]. Dense (positions None):
        labels [B, T], -1 where not predicted. Sparse: positions, the flat
        indices (b * T + t) of the predicted tokens, and their labels."""
        s, ln = self.s, self.ln_apply
        x = ln(self.ln, self.tok(ids) + self.pos.weight[None])
        bias = None if key_valid is None else ((1.0 - key_valid.float()) * -1e4)[:, None, None, :]  # additive mask
        for layer in self.layers:
            x = layer(x, bias)
        if positions is not None:
            x = x.reshape(-1, s.H)[positions]  # the masked positions only (sparse MLM head)
        h = ln(self.head_ln, F.gelu(self.head(x), approximate="tanh"))
        logits = h @ self.tok.weight.t() + self.bias  # decoder tied to the embedding
        if positions is not None:
            return F.cross_entropy(logits.float(), labels)
        return F.cross_entropy(logits.float().view(-1, s.V), labels.view(-1), ignore_index=-1)


def mpbench_tokens_per_s(runner, experiment, device, seq, keep=None, env=None, manifest=None):
    """Runs RUNNER on experiments/EXPERIMENT.yaml (--quiet, --device DEVICE,
    into a temporary directory, in environment ENV: the caller's without) and
    reads its summary.csv: returns ({(precision, fusion): tokens/s}, {cell
    file name: cell JSON}), tokens/s being samples/s x SEQ, for the rows where
    keep(row) is true (all without keep). A dict MANIFEST receives the run's
    manifest.json. Raises CalledProcessError when the runner fails."""
    yaml = os.path.join(HERE, "..", "experiments", experiment + ".yaml")
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([runner, yaml, "--out", out, "--quiet", "--device", device], check=True, env=env)
        with open(os.path.join(out, experiment, "summary.csv")) as f:
            rows = list(csv.DictReader(f))
        if manifest is not None:
            with open(os.path.join(out, experiment, "manifest.json")) as f:
                manifest.update(json.load(f))
        cells_dir = os.path.join(out, experiment, "cells")
        cells = {}
        for name in sorted(os.listdir(cells_dir)) if os.path.isdir(cells_dir) else []:
            if name.endswith(".json"):
                with open(os.path.join(cells_dir, name)) as f:
                    cells[name] = json.load(f)
    result = {}
    for row in rows:
        if keep is None or keep(row):
            result[(row["axis.precision"], row["axis.fusion"])] = float(row["samples_per_s"]) * seq
    return result, cells
