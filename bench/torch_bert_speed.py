#!/usr/bin/python3
"""mpbench vs PyTorch on the same machine, in one run: BERT-mini training throughput.

The speed target of the BERT issue: BERT-mini (L4 H256 A4 FFN1024), sequence
128, batch 16, vocabulary 8192, AdamW, trained by PyTorch (Debian's
python3-torch, CPU) in fp32 and with bf16 autocast, against the runner's
amp/fp32 cells of experiments/bert_speed.yaml. Runs are interleaved (torch
fp32, mpbench, torch bf16) and each side's best of ROUNDS is compared, so
machine noise does not decide the ratio.

  /usr/bin/python3 bench/torch_bert_speed.py build/runner [--rounds 2] [--steps 12]

Prints tokens/s for each and the ratios; exits 0 (a benchmark reports, it
does not gate). Targets: mpbench >= 3x PyTorch in fp32 and >= 1.5x in amp_bf16.
The bf16 line says how each side multiplied: mpbench's GEMM support as its
cells record it, PyTorch's from the oneDNN implementation its bf16 matmul ran
(verbose log). Where either side is emulated the ratio is printed as no claim;
where PyTorch's bf16 matmul fails (oneDNN 2.6 has no bf16 on AVX2, e.g. under
ONEDNN_MAX_CPU_ISA=AVX2) it is not measured.
"""

import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_model import Bert, BertShape, mpbench_tokens_per_s  # noqa: E402

L, H, A, FFN, T, BATCH, VOCAB = 4, 256, 4, 1024, 128, 16, 8192
SHAPE = BertShape(L=L, H=H, A=A, FFN=FFN, T=T, V=VOCAB)


def torch_tokens_per_s(bf16, steps):
    torch.manual_seed(0)
    # The explicit softmax attention, dense labels; each LayerNorm's input in
    # its weights' dtype: torch 1.13's CPU autocast refuses a bf16 input with
    # fp32 LayerNorm weights, so the bf16 run keeps its LayerNorms in bf16 (the
    # fastest choice for PyTorch: conservative for the ratio).
    model = Bert(SHAPE, attention="explicit", ln_in_weight_dtype=True)
    if bf16:
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    ids = torch.randint(4, VOCAB, (BATCH, T))
    mask = torch.ones(BATCH, T, dtype=torch.int32)
    labels = torch.where(torch.rand(BATCH, T) < 0.15, ids, torch.full_like(ids, -1))
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(ids, mask, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    times = sorted(times[2:])  # the first steps allocate and warm caches
    return BATCH * T / times[len(times) // 2]


TORCH_BF16_PROBE = """
import torch
a, b = torch.randn(64, 64), torch.randn(64, 64)
with torch.autocast("cpu", dtype=torch.bfloat16):
    a @ b
"""


def torch_bf16_matmul():
    """How PyTorch runs a bf16 matmul here: oneDNN's implementation name from
    its verbose log (e.g. brg:avx512_core_bf16), and whether that is native
    bf16 arithmetic. PyTorch 1.13 has no API that says so; the log is what
    actually ran. Returns (impl, native), impl None where the probe failed
    (e.g. oneDNN refuses bf16 under ONEDNN_MAX_CPU_ISA=AVX2)."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    r = subprocess.run([sys.executable, "-c", TORCH_BF16_PROBE], env=env, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        f = line.split(",")
        if len(f) > 4 and f[1] == "exec" and f[3] == "matmul":
            return f[4], "bf16" in f[4] or "amx" in f[4]
    if r.returncode == 0:  # no oneDNN matmul: PyTorch's own (widening) bf16 kernels
        return "aten (no oneDNN matmul)", False
    return None, False


def mpbench_bert_speed(runner):
    """tokens/s per (precision, fusion) cell of experiments/bert_speed.yaml, and
    the runner's bf16 GEMM support as the cells record it (native or emulated)."""
    result, cells = mpbench_tokens_per_s(runner, "bert_speed", "cpu", T)
    bf16_gemm = next((c["device"]["emulated"]["gemm"] for name, c in cells.items() if "amp_bf16" in name), "?")
    return result, bf16_gemm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runner")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    torch_impl, torch_native = torch_bf16_matmul()
    best, mpb_bf16 = {}, "?"
    for _ in range(args.rounds):
        for name, value in [("torch fp32", torch_tokens_per_s(False, args.steps))]:
            best[name] = max(best.get(name, 0.0), value)
        cells, mpb_bf16 = mpbench_bert_speed(args.runner)
        for (precision, fusion), value in cells.items():
            key = f"mpbench {precision} fusion={fusion}"
            best[key] = max(best.get(key, 0.0), value)
        if torch_impl is not None:
            best["torch bf16"] = max(best.get("torch bf16", 0.0), torch_tokens_per_s(True, args.steps))
    for name, value in best.items():
        print(f"{name:32s} {value:10.0f} tokens/s")
    fp32 = max(v for k, v in best.items() if k.startswith("mpbench fp32"))
    bf16 = max(v for k, v in best.items() if k.startswith("mpbench amp_bf16"))
    print(f"mpbench fp32 / torch fp32     = {fp32 / best['torch fp32']:.2f}x (target >= 3)")
    # The bf16 ratio is a claim only where both sides multiply in bf16: an
    # emulated side (bf16 operands widened to fp32 math) measures conversions.
    torch_bf16 = f"torch bf16 matmul {torch_impl}: {'native' if torch_native else 'emulated'}"
    sides = f"mpbench bf16 GEMMs {mpb_bf16}; {torch_bf16}"
    if torch_impl is None:
        print(f"mpbench bf16 / torch bf16     = not measured: PyTorch's bf16 matmul fails here "
              f"(oneDNN refuses bf16 on this ISA); mpbench bf16 GEMMs {mpb_bf16}")
    elif torch_native and mpb_bf16 == "native":
        print(f"mpbench bf16 / torch bf16     = {bf16 / best['torch bf16']:.2f}x (target >= 1.5; {sides})")
    else:
        print(f"mpbench bf16 / torch bf16     = {bf16 / best['torch bf16']:.2f}x (NOT a claim: emulated bf16; {sides})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
