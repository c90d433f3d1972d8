"""The PyTorch training steps bench/torch_bert_gpu.py measures mpbench against: the
ways a user would actually train BERT-base on a GPU today, each doing the same work
as mpbench's gpu_smoke cell (same model, batch, vocabulary, sparse MLM head, AdamW
with weight decay 0.01, gradient clipping at 1.0 and the warm-up + linear-decay
schedule; no dropout, as mpbench's default).

  eager       PyTorch eager: autocast, F.scaled_dot_product_attention with no mask
              (the batch has no padding, so SDPA may pick FlashAttention, cuDNN or
              memory-efficient attention), AdamW(fused=True)
  compile     the same model under torch.compile (default mode)
  compile-ro  torch.compile(mode="reduce-overhead"): CUDA graphs over forward and backward
  hf          HuggingFace transformers' BertForMaskedLM(attn_implementation="sdpa"),
              AdamW(fused=True). Its MLM head is DENSE: it scores every position
              (B x T x V logits) where mpbench and the variants above score only the
              ~15% masked positions, so it does more work; said wherever it is shown.

Each variant builds once (compilation counted apart, as compile_s) and is then timed
in rounds that bench/torch_bert_gpu.py interleaves with the other variants and mpbench.
"""

import contextlib
import math
import time

import torch

from torch_bert_model import Bert

VARIANTS = ("eager", "compile-ro", "compile", "hf")  # built in this order: the likely strongest early
LABELS = {"eager": "torch eager", "compile": "torch.compile", "compile-ro": "torch.compile reduce-overhead",
          "hf": "HF BertForMaskedLM sdpa (dense head)"}
WARMUP_STEPS = 5  # reduce-overhead records its CUDA graphs on the third call; 5 leaves it warm


def unavailable(variant, device):
    """Why VARIANT cannot run here, or None."""
    if variant in ("compile", "compile-ro"):
        if not hasattr(torch, "compile"):
            return f"torch {torch.__version__} has no torch.compile (needs 2.x)"
        if variant == "compile-ro" and device != "cuda":
            return "reduce-overhead (CUDA graphs) needs a GPU"
    if variant == "hf":
        try:
            import transformers  # noqa: F401
        except ImportError:
            return "transformers is not installed"
    return None


def lr_lambda(total):
    """mpbench's schedule (optimizer warmup: 5, decay: linear): linear warm-up over 5
    steps, then linear decay to 0 at the last step."""
    warm = 5
    return lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))


def adamw(params, device):
    """AdamW as a user on a GPU would set it: fused=True (one kernel for all tensors)."""
    fused = device == "cuda"
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **({"fused": True} if fused else {}))
    return opt, "AdamW(fused=True)" if fused else "AdamW (foreach; fused needs CUDA)"


def hf_model(s, device):
    from transformers import BertConfig, BertForMaskedLM
    cfg = BertConfig(vocab_size=s.V, hidden_size=s.H, num_hidden_layers=s.L, num_attention_heads=s.A,
                     intermediate_size=s.FFN, max_position_embeddings=s.T, hidden_act="gelu_new",
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12)
    model = BertForMaskedLM._from_config(cfg, attn_implementation="sdpa")
    used = getattr(model.config, "_attn_implementation", None)
    if used != "sdpa":
        raise RuntimeError(f"transformers gave attn_implementation {used!r}, not 'sdpa'")
    return model.to(device)


class Variant:
    """One variant at one precision, built and warmed up: step() runs one training step."""

    def __init__(self, variant, s, precision, device, total_steps):
        torch.manual_seed(0)
        self.variant, self.precision, self.device = variant, precision, device
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        self.half = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}.get(precision)
        g = torch.Generator(device="cpu").manual_seed(1)
        self.ids = torch.randint(4, s.V, (s.B, s.T), generator=g).to(device)
        masked = torch.rand(s.B * s.T, generator=g) < 0.15
        self.positions = masked.nonzero().squeeze(1).to(device)
        self.labels = self.ids.reshape(-1)[self.positions]
        if variant == "hf":
            self.model = hf_model(s, device)
            dense = torch.full((s.B * s.T,), -100, dtype=torch.long, device=device)
            dense[self.positions] = self.labels
            self.dense_labels = dense.view(s.B, s.T)
            self.forward = lambda: self.model(input_ids=self.ids, labels=self.dense_labels).loss
        else:
            self.model = Bert(s, attention="sdpa").to(device)
            fn = self.model
            if variant == "compile":
                fn = torch.compile(self.model)
            elif variant == "compile-ro":
                fn = torch.compile(self.model, mode="reduce-overhead")
            # key_valid None: no padding, so no mask reaches SDPA
            self.forward = lambda: fn(self.ids, None, self.labels, self.positions)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.opt, self.optimizer = adamw(self.params, device)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(total_steps))
        scaling = precision == "amp_fp16" and device == "cuda"
        self.scaler = (torch.amp.GradScaler("cuda", enabled=scaling) if hasattr(torch.amp, "GradScaler")
                       else torch.cuda.amp.GradScaler(enabled=scaling))  # torch 1.13
        t0 = time.perf_counter()
        warm = [self.timed_step() for _ in range(WARMUP_STEPS)]
        wall = time.perf_counter() - t0
        # Compilation (and CUDA graph recording) is what the warm-up took beyond steady steps.
        self.compile_s = max(0.0, wall - WARMUP_STEPS * min(warm)) if variant.startswith("compile") else 0.0
        self.sdpa_backend = sdpa_backend(self)

    def step(self):
        amp = torch.autocast(self.device, dtype=self.half) if self.half is not None else contextlib.nullcontext()
        with amp:
            loss = self.forward()
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)  # mpbench's grad_clip: 1.0
        self.scaler.step(self.opt)
        self.scaler.update()
        self.sched.step()
        return loss

    def timed_step(self):
        """Seconds for one step: CUDA events on a GPU, the host clock on the CPU."""
        if self.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = self.step()
            end.record()
            end.synchronize()
            seconds = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            loss = self.step()
            seconds = time.perf_counter() - t0
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"{LABELS[self.variant]} {self.precision}: the loss is {loss.item()}")
        return seconds

    def median_step_s(self, steps):
        times = sorted(self.timed_step() for _ in range(steps))
        return times[len(times) // 2]


def sdpa_backend(v):
    """Which attention kernel SDPA chose, from the aten op the profiler saw in one step:
    flash, efficient, cudnn or math; 'composed softmax' where PyTorch has no SDPA."""
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return "composed softmax (no SDPA in this PyTorch)"
    import warnings
    from torch.profiler import ProfilerActivity, profile
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes on event cycles
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            v.step()
    ops = {e.name.removeprefix("aten::") for e in prof.events()}
    kinds = {"_scaled_dot_product_flash_attention": "flash", "_scaled_dot_product_efficient_attention": "efficient",
             "_scaled_dot_product_cudnn_attention": "cudnn", "_scaled_dot_product_attention_math": "math",
             "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)"}
    found = sorted(kind for op, kind in kinds.items() if op in ops)
    return "+".join(dict.fromkeys(found)) or "not seen (compiled into a fused kernel?)"
