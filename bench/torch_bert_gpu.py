#!/usr/bin/python3
"""mpbench vs PyTorch on the same GPU, interleaved: BERT-base training throughput.

The speed anchor of the GPU issues (10, 11, 44): the BERT-base cell of
experiments/gpu_smoke.yaml (L12 H768 A12 FFN3072, sequence 128, batch 32,
vocabulary 30522 padded to a multiple of 8 as `pad_vocab: on` does, BERT's
N(0, 0.02) initialisation, AdamW, gradient clipping at 1.0, warm-up + linear
decay, masked-LM loss on the ~15% masked positions only) trained the ways a
user would pick (bench/torch_bert_variants.py: eager, torch.compile,
torch.compile reduce-overhead, HuggingFace's BertForMaskedLM with SDPA; fused
AdamW; no attention mask, the batch having no padding) in

  fp32      TF32 off for matmuls and cuDNN
  tf32      TF32 on
  amp_fp16  autocast fp16 + GradScaler (dynamic loss scaling)
  amp_bf16  autocast bf16

Each round runs every variant once (its median step over --steps) and then
the runner's experiments/gpu_first_cell.yaml (amp_bf16, fused) or, with
--mpbench-experiment gpu_smoke, every precision x fusion cell; a side's best
round counts and the spread of its rounds is printed beside it, so a clock
or a neighbour does not decide the ratio. Compilation is timed apart
(compile_s) and never inside a step. The headline ratio is mpbench's fused
cell over the STRONGEST PyTorch variant of that precision, and always names
it ("vs torch.compile reduce-overhead"). A benchmark reports, it does not
gate: exit 0; 1 when a side fails; 2 for bad usage.

Each side runs with its own CUDA libraries (torch_library_env.py): PyTorch
without the toolkit directories bin/mpbench-env put first on LD_LIBRARY_PATH
(the script re-executes itself without them before importing torch), the
runner with them. Both say which libraries they loaded; --json PATH writes
that, every round's tokens/s, each variant's SDPA backend and compile time.

  python3 bench/torch_bert_gpu.py bin/runner [--rounds 3] [--steps 30] [--variants eager,compile,...]
          [--precisions amp_bf16] [--json OUT.json]
  python3 bench/torch_bert_gpu.py --torch-only --device cpu --layers 1 --hidden 64 --heads 2 --batch 2 --steps 3
        (the smoke test's form: PyTorch side only, on any machine)
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_library_env as libenv  # noqa: E402

if __name__ == "__main__":
    libenv.reexec_with_torch_environment()  # before torch loads any CUDA library

import torch  # noqa: E402

from torch_bert_model import BertShape, mpbench_tokens_per_s  # noqa: E402
from torch_bert_variants import LABELS, VARIANTS, Variant, unavailable  # noqa: E402

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16")


class Shape(BertShape):
    """The model's sizes from the command line, and the batch B."""

    def __init__(self, a):
        super().__init__(L=a.layers, H=a.hidden, A=a.heads, FFN=4 * a.hidden, T=a.seq,
                         V=(a.vocab + 7) // 8 * 8)  # pad_vocab: on (docs/CONFIG.md)
        self.B = a.batch


def mpbench_round(runner, experiment, seq, manifest):
    """{(precision, fusion): tokens/s} of one run of EXPERIMENT's cells with no static loss
    scale (gpu_smoke's extra cell), the runner in the environment the script was started
    with; its manifest.json into the dict MANIFEST."""
    result, _ = mpbench_tokens_per_s(runner, experiment, "cuda", seq,
                                     keep=lambda row: row.get("axis.loss_scale", "none") in ("none", "dynamic"),
                                     env=libenv.runner_environment(os.environ), manifest=manifest)
    return result


def spread(rounds):
    """(max - min) / max of a side's rounds: how far the rounds were apart."""
    return (max(rounds) - min(rounds)) / max(rounds) if rounds and max(rounds) > 0 else 0.0


def anchor_ratios(torch_rounds, mpbench_rounds, precisions):
    """{precision: {...}}: mpbench's best fused round over each variant's best round, the
    strongest variant (highest best tokens/s; the dense-head HF model only when no other
    ran) named as the anchor, and the ratio's range over the rounds (round r's mpbench
    over round r's variant)."""
    out = {}
    for p in precisions:
        mp = mpbench_rounds.get((p, "on"))
        runs = {v: r for (v, q), r in torch_rounds.items() if q == p and r}
        if not mp or not runs:
            continue
        sparse = {v: r for v, r in runs.items() if v != "hf"} or runs
        strongest = max(sparse, key=lambda v: max(sparse[v]))
        per_variant = {v: max(mp) / max(r) for v, r in runs.items()}
        paired = [m / t for m, t in zip(mp, runs[strongest])]
        out[p] = {"anchor": strongest, "anchor_label": LABELS[strongest], "ratio": per_variant[strongest],
                  "ratio_range": [min(paired), max(paired)], "vs_each": per_variant}
    return out


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


def report(a, s, where, skipped, built, torch_rounds, mpbench_rounds, manifest, precisions, final):
    """The table and ratios (printed when FINAL), and the JSON (after every round)."""
    rows = [(LABELS[v], p, r) for (v, p), r in torch_rounds.items() if r]
    rows += [(f"mpbench fusion={f}", p, r) for (p, f), r in sorted(mpbench_rounds.items())]
    ratios = {} if a.torch_only else anchor_ratios(torch_rounds, mpbench_rounds, precisions)
    torch_libs = torch_libraries()
    runner_libs = None if a.torch_only else libenv.runner_libraries(manifest)
    if final:
        for side, p, r in rows:
            print(f"{side:40s} {p:9s} {max(r):10.0f} tokens/s (best of {len(r)}, rounds {spread(r):.1%} apart)")
        for p, r in ratios.items():
            lo, hi = r["ratio_range"]
            print(f"{p:9s} mpbench fused = {r['ratio']:.2f}x vs {r['anchor_label']} (the strongest PyTorch measured; "
                  f"rounds {lo:.2f}-{hi:.2f}x); " + ", ".join(f"{x:.2f}x vs {LABELS[v]}" for v, x in r["vs_each"].items()))
        for line in library_lines(torch_libs, runner_libs):
            print(line)
    if not a.json:
        return
    done = {k: r for k, r in torch_rounds.items() if r}
    doc = {"device": where, "torch": torch.__version__, "final": final,
           "shape": {"L": s.L, "H": s.H, "A": s.A, "T": s.T, "B": s.B, "V": s.V},
           "rounds": max((len(r) for r in done.values()), default=0), "steps": a.steps, "skipped": skipped,
           "variants": [{"variant": v, "label": LABELS[v], "precision": p, "rounds_tokens_per_s": done[(v, p)],
                         "best": max(done[(v, p)]), "spread": spread(done[(v, p)]),
                         "compile_s": b.compile_s, "sdpa_backend": b.sdpa_backend, "optimizer": b.optimizer,
                         "dense_head": v == "hf"} for (v, p), b in built.items() if (v, p) in done],
           "mpbench": [{"precision": p, "fusion": f, "rounds_tokens_per_s": r, "best": max(r), "spread": spread(r)}
                       for (p, f), r in sorted(mpbench_rounds.items())],
           "mpbench_over_torch": ratios,
           "tokens_per_s": [{"side": side, "precision": p, "tokens_per_s": max(r)} for side, p, r in rows],
           "libraries": {"torch": torch_libs, "mpbench": runner_libs}}
    # A fresh, exclusively created temp file beside the target (never a planted link), then rename.
    fd, tmp = tempfile.mkstemp(prefix=".torch_bert_gpu.", dir=os.path.dirname(os.path.abspath(a.json)))
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, a.json)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runner", nargs="?", help="the runner (bin/runner of the bundle, or build/runner)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each side's best counts (default 3)")
    ap.add_argument("--steps", type=int, default=30, help="timed PyTorch steps per round (after the warm-up)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--torch-only", action="store_true", help="PyTorch's side only (no runner)")
    ap.add_argument("--precisions", default="amp_bf16", help=f"comma-separated, of {', '.join(PRECISIONS)}")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--mpbench-experiment", default="gpu_first_cell",
                    help="the runner's side: gpu_first_cell (amp_bf16 fused) or gpu_smoke (every precision)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--json", metavar="PATH", help="also write every round, the ratios and each side's libraries "
                    "(rewritten after every round, so a run cut short keeps what it measured)")
    ap.add_argument("--budget-s", type=float, metavar="S",
                    help="seconds this run may take (a lease's step): variants stop being built after half of it "
                         "(the rest are named as skipped), and no round starts that the last one says would overrun")
    a = ap.parse_args()
    if a.rounds < 1 or a.steps < 1:
        ap.error("--rounds and --steps must be at least 1")
    if not a.torch_only and not a.runner:
        ap.error("give the runner, or --torch-only")
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        ap.error(f"--json {a.json}: its directory does not exist")  # said now, not after the runs
    precisions = [p for p in a.precisions.split(",") if p]
    for p in precisions:
        if p not in PRECISIONS:
            ap.error(f"--precisions: unknown {p!r} (one of {', '.join(PRECISIONS)})")
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"--variants: unknown {v!r} (one of {', '.join(VARIANTS)})")
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_bert_gpu: PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1
    if a.device == "cpu":
        # The smoke test's form: fp32 only (a CPU has no TF32 or fp16 autocast,
        # and Debian's torch 1.13 CPU autocast refuses bf16 into fp32 LayerNorm).
        precisions = ["fp32"]
    s = Shape(a)
    where = torch.cuda.get_device_name() if a.device == "cuda" else "CPU"
    print(f"torch {torch.__version__} on {where}: BERT L{s.L} H{s.H} A{s.A}, sequence {s.T}, batch {s.B}, "
          f"vocabulary {s.V}; {a.rounds} interleaved round(s), the best of each side counts")
    started = time.monotonic()
    elapsed = lambda: time.monotonic() - started  # noqa: E731
    skipped = {v: why for v in variants if (why := unavailable(v, a.device))}
    for v, why in skipped.items():
        print(f"skipped {LABELS[v]}: {why}")
    built = {}
    for p in precisions:
        for v in variants:
            if v in skipped:
                continue
            if a.budget_s and elapsed() > a.budget_s / 2 and any(q == p for _, q in built):  # one at least
                skipped[v] = f"not built: {elapsed():.0f} s of the {a.budget_s:.0f}-s budget were gone"
                print(f"skipped {LABELS[v]} {p}: {skipped[v]}")
                continue
            built[(v, p)] = Variant(v, s, p, a.device, total_steps=5 + (a.rounds + 1) * (a.steps + 1))
            b = built[(v, p)]
            print(f"built {LABELS[v]} {p}: SDPA backend {b.sdpa_backend}, {b.optimizer}"
                  + (f", compiled in {b.compile_s:.1f} s (not in any step time)" if b.compile_s else ""))
    torch_rounds = {k: [] for k in built}
    mpbench_rounds = {}
    manifest = {}
    for r in range(a.rounds):
        t0 = elapsed()
        for key, b in built.items():
            torch_rounds[key].append(s.B * s.T / b.median_step_s(a.steps))
        if not a.torch_only:
            for k, v in mpbench_round(a.runner, a.mpbench_experiment, s.T, manifest).items():
                mpbench_rounds.setdefault(k, []).append(v)
        report(a, s, where, skipped, built, torch_rounds, mpbench_rounds, manifest, precisions, final=False)
        if a.budget_s and r + 1 < a.rounds and elapsed() + (elapsed() - t0) > a.budget_s:
            print(f"stopping after {r + 1} round(s): another would pass the {a.budget_s:.0f}-s budget")
            break
    report(a, s, where, skipped, built, torch_rounds, mpbench_rounds, manifest, precisions, final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
