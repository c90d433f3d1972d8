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

Each side runs with its own CUDA libraries (torch_library_env.py): PyTorch
without the toolkit directories bin/mpbench-env put first on LD_LIBRARY_PATH
(the script re-executes itself without them before importing torch), the
runner with them. Both say which libraries they loaded: PyTorch's cuDNN and
CUDA versions and the libcudnn*/libcublas* paths in its /proc/self/maps, the
runner's header-vs-runtime versions from its manifest; --json PATH writes
that and the tokens/s.

  python3 bench/torch_bert_gpu.py bin/runner [--rounds 2] [--steps 30] [--json OUT.json]
  python3 bench/torch_bert_gpu.py --torch-only --device cpu --layers 1 --hidden 64 --heads 2 --batch 2 --steps 3
        (the smoke test's form: PyTorch side only, on any machine)
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_library_env as libenv  # noqa: E402

if __name__ == "__main__":
    libenv.reexec_with_torch_environment()  # before torch loads any CUDA library

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

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


def mpbench_gpu_smoke(runner, seq, manifest):
    """tokens/s per (precision, fusion) cell of experiments/gpu_smoke.yaml
    (not its static-loss-scale extra cell), the runner in the environment the
    script was started with; its manifest.json into the dict MANIFEST."""
    result, _ = mpbench_tokens_per_s(runner, "gpu_smoke", "cuda", seq,
                                     keep=lambda row: row.get("axis.loss_scale", "") in ("none", "dynamic"),
                                     env=libenv.runner_environment(os.environ), manifest=manifest)
    return result


def torch_libraries():
    """What this PyTorch process loaded: call after it has run (cuDNN 9 maps
    its engine libraries on first use)."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": libenv.cudnn_version_string(cudnn) if cudnn else "not loaded",
            "loaded": libenv.process_libraries(),
            "ld_library_path": os.environ.get("LD_LIBRARY_PATH"),
            "stripped_from_ld_library_path": libenv.stripped_dirs()}


def library_lines(torch_libs, runner_libs):
    """The summary's lines: each side's cuDNN/CUDA and where its libraries came from."""
    lines = [f"libraries: torch {torch_libs['torch']}, CUDA {torch_libs['cuda']}, cuDNN {torch_libs['cudnn']}; "
             f"mapped: {', '.join(torch_libs['loaded']) or 'no libcudnn/libcublas'}"]
    if torch_libs["stripped_from_ld_library_path"]:
        lines.append("libraries: torch ran without " + ":".join(torch_libs["stripped_from_ld_library_path"]) +
                     " (mpbench-env's / the toolkit's) on LD_LIBRARY_PATH")
    if runner_libs is not None:
        versions = runner_libs.get("header_vs_runtime") or {}
        parts = [f"{k} headers {v.get('header')} / loaded {v.get('runtime')}" for k, v in sorted(versions.items())
                 if "header" in v]
        lines.append("libraries: mpbench " + ("; ".join(parts) or "(no header_vs_runtime in its manifest)"))
        if runner_libs.get("loaded"):
            lines.append("libraries: mpbench mapped: " + ", ".join(runner_libs["loaded"]))
        lines += [f"libraries: mpbench warning: {w}" for w in runner_libs.get("warnings", [])]
    return lines


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
    ap.add_argument("--json", metavar="PATH", help="also write the tokens/s, ratios and each side's libraries here")
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
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        ap.error(f"--json {a.json}: its directory does not exist")  # said now, not after the runs
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
    manifest = {}
    for _ in range(a.rounds):
        for p in precisions:
            best[("torch", p)] = max(best.get(("torch", p), 0.0), torch_tokens_per_s(s, p, a.steps, a.device))
        if not a.torch_only:
            for (p, fusion), v in mpbench_gpu_smoke(a.runner, s.T, manifest).items():
                best[(f"mpbench fusion={fusion}", p)] = max(best.get((f"mpbench fusion={fusion}", p), 0.0), v)
    for (side, p), v in sorted(best.items()):
        print(f"{side:20s} {p:9s} {v:10.0f} tokens/s")
    ratios = {}
    if not a.torch_only:
        for p in precisions:
            t = best.get(("torch", p))
            fused, unfused = best.get(("mpbench fusion=on", p)), best.get(("mpbench fusion=off", p))
            if t and fused and unfused:
                ratios[p] = {"fused": fused / t, "unfused": unfused / t}
                print(f"{p:9s} mpbench / torch = {fused / t:.2f}x fused, {unfused / t:.2f}x unfused")
    torch_libs = torch_libraries()
    runner_libs = None if a.torch_only else libenv.runner_libraries(manifest)
    for line in library_lines(torch_libs, runner_libs):
        print(line)
    if a.json:
        doc = {"device": where, "shape": {"L": s.L, "H": s.H, "A": s.A, "T": s.T, "B": s.B, "V": s.V},
               "tokens_per_s": [{"side": side, "precision": p, "tokens_per_s": v} for (side, p), v in sorted(best.items())],
               "mpbench_over_torch": ratios,
               "libraries": {"torch": torch_libs, "mpbench": runner_libs}}
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
