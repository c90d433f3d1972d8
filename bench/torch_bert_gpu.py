#!/usr/bin/python3
"""mpbench vs PyTorch on the same GPU, interleaved: BERT-base training throughput.

The speed oracle of the GPU issues (10, 11): the BERT-base cell of
experiments/gpu_smoke.yaml (L12 H768 A12 FFN3072, sequence 128, batch 32,
vocabulary 30522 padded to a multiple of 8 as `pad_vocab: on` does, BERT's
N(0, 0.02) initialisation, AdamW, masked-LM loss on the ~15% masked
positions only, as mpbench's default sparse head and NVIDIA's BERT decode)
in PyTorch 2.x eager mode with `scaled_dot_product_attention`, in

  fp32      TF32 off for matmuls and cuDNN
  tf32      TF32 on
  amp_fp16  autocast fp16 + GradScaler (dynamic loss scaling)
  amp_bf16  autocast bf16

Rounds alternate PyTorch's four runs with the runner's gpu_smoke cells on
the same GPU, and each side's best round counts, so a clock or a neighbour
does not decide the ratio. Prints tokens/s per run and mpbench / PyTorch per
precision (mpbench's fused cell against PyTorch's SDPA, its unfused one
beside). A benchmark reports, it does not gate: exit 0; 1 when a side fails.

  python3 bench/torch_bert_gpu.py bin/runner [--rounds 2] [--steps 30]
  python3 bench/torch_bert_gpu.py --torch-only --device cpu --layers 1 --hidden 64 --heads 2 --batch 2 --steps 3
        (the smoke test's form: PyTorch side only, on any machine)
"""

import argparse
import contextlib
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bert_model import Bert, BertShape, mpbench_tokens_per_s  # noqa: E402

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16")


class Shape(BertShape):
    """The model's sizes from the command line, and the batch B."""

    def __init__(self, a):
        super().__init__(L=a.layers, H=a.hidden, A=a.heads, FFN=4 * a.hidden, T=a.seq,
                         V=(a.vocab + 7) // 8 * 8)  # pad_vocab: on (docs/CONFIG.md)
        self.B = a.batch


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def torch_tokens_per_s(s, precision, steps, device):
    """Median step time after 5 warm-up steps (GPU: CUDA events around each
    step), as tokens/s."""
    torch.manual_seed(0)
    set_tf32(precision == "tf32")
    model = Bert(s, attention="sdpa").to(device)  # SDPA (composed softmax on torch 1.13), sparse head
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    half = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(precision)
    scaler = torch.cuda.amp.GradScaler(enabled=precision == "amp_fp16" and device == "cuda")
    ids = torch.randint(4, s.V, (s.B, s.T), device=device)
    key_valid = torch.ones(s.B, s.T, dtype=torch.int32, device=device)
    masked = torch.rand(s.B * s.T, device=device) < 0.15
    positions = masked.nonzero().squeeze(1)
    labels = ids.reshape(-1)[positions]
    times = []
    for step in range(steps + 5):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        amp = torch.autocast(device, dtype=half) if half is not None else contextlib.nullcontext()
        with amp:
            loss = model(ids, key_valid, labels, positions)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if device == "cuda":
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            seconds = time.perf_counter() - t0
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"torch {precision}: loss {loss.item()} at step {step}")
        if step >= 5:
            times.append(seconds)
    times.sort()
    return s.B * s.T / times[len(times) // 2]


def mpbench_gpu_smoke(runner, seq):
    """tokens/s per (precision, fusion) cell of experiments/gpu_smoke.yaml
    (not its static-loss-scale extra cell)."""
    result, _ = mpbench_tokens_per_s(runner, "gpu_smoke", "cuda", seq,
                                     keep=lambda row: row.get("axis.loss_scale", "") in ("none", "dynamic"))
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runner", nargs="?", help="the runner (bin/runner of the bundle, or build/runner)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30, help="timed PyTorch steps per run (after 5 of warm-up)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--torch-only", action="store_true", help="PyTorch's side only (no runner)")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=30522)
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_bert_gpu: PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1
    if a.device == "cuda" and not hasattr(F, "scaled_dot_product_attention"):
        print(f"torch_bert_gpu: PyTorch {torch.__version__} has no scaled_dot_product_attention (needs 2.x)",
              file=sys.stderr)
        return 1
    if not a.torch_only and not a.runner:
        ap.error("give the runner, or --torch-only")
    precisions = [p for p in a.precisions.split(",") if p]
    for p in precisions:
        if p not in PRECISIONS:
            ap.error(f"--precisions: unknown {p!r} (one of {', '.join(PRECISIONS)})")
    if a.device == "cpu":
        # The smoke test's form: fp32 only (a CPU has no TF32 or fp16 autocast,
        # and Debian's torch 1.13 CPU autocast refuses bf16 into fp32 LayerNorm).
        precisions = [p for p in precisions if p == "fp32"]
    s = Shape(a)
    where = torch.cuda.get_device_name() if a.device == "cuda" else "CPU"
    attn = "scaled_dot_product_attention" if hasattr(F, "scaled_dot_product_attention") else "composed softmax"
    print(f"torch {torch.__version__} on {where}: BERT L{s.L} H{s.H} A{s.A}, sequence {s.T}, batch {s.B}, "
          f"vocabulary {s.V}, attention {attn}")
    best = {}
    for _ in range(a.rounds):
        for p in precisions:
            best[("torch", p)] = max(best.get(("torch", p), 0.0), torch_tokens_per_s(s, p, a.steps, a.device))
        if not a.torch_only:
            for (p, fusion), v in mpbench_gpu_smoke(a.runner, s.T).items():
                best[(f"mpbench fusion={fusion}", p)] = max(best.get((f"mpbench fusion={fusion}", p), 0.0), v)
    for (side, p), v in sorted(best.items()):
        print(f"{side:20s} {p:9s} {v:10.0f} tokens/s")
    if not a.torch_only:
        for p in precisions:
            t = best.get(("torch", p))
            fused, unfused = best.get(("mpbench fusion=on", p)), best.get(("mpbench fusion=off", p))
            if t and fused and unfused:
                print(f"{p:9s} mpbench / torch = {fused / t:.2f}x fused, {unfused / t:.2f}x unfused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
