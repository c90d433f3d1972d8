#!/usr/bin/env python3
"""Re-runs an exported mpbench cell in PyTorch (the llm.c way of verifying a
hand-written model): usage

    /usr/bin/python3 scripts/torch_reference.py DIR

DIR comes from `runner FILE.yaml --export-reference DIR --filter ...`
(docs/REFERENCE.md). From DIR/meta.json and DIR/weights.safetensors this
builds the same model in PyTorch, loads mpbench's initial weights, and writes
DIR/reference.safetensors with the same tensors mpbench.safetensors holds:

    logits            F32 [rows, classes]  step 1's batch, forward
    loss              F64 []               its mean loss over real labels
    grad.<param>      F32                  d loss / d param (loss.backward())
    train.loss        F64 [steps]          the loss of training steps 1..steps
    train.grad_norm   F64 [steps]          the global gradient norm of each step
    train.skipped     I32 [steps]          0 (the reference never skips a step)

Training mirrors mpbench's trainer: step s feeds batch s, the loss (times
loss_weight) is backpropagated, the gradient is clipped to grad_clip when set,
then torch.optim.AdamW (or SGD, or PaperLamb below: torch has no LAMB) with
the config's hyper-parameters takes a step, with two parameter groups as the BERT recipes build them: weight decay
for most parameters, none for those optimizer.decay_exclude names (biases,
LayerNorm weights), picked by name; then LambdaLR with HuggingFace's schedule
takes its step.

PyTorch runs in float32, as the model does, so scripts/check_reference.py
compares two fp32 implementations; see its tolerances.

Models: the MLP (models/mlp.cpp) and BERT (models/bert.cpp); for a LAMB
cell with optimizer.lamb_qkv split, BERT's attention has separate query, key
and value Linears, as NVIDIA's BERT recipe (mpbench's packed attention.qkv
tensors are split into them on load and concatenated back for the check), so
PaperLamb gives each its own trust ratio. Everything
needs only numpy and torch; the safetensors files are read and written by
mpbench.reference.safetensors (the safetensors package is not needed).
"""

import json
import math
import os
import re
import sys

import numpy as np


try:
    import torch
    import torch.nn.functional as F
    TORCH_IMPORT_ERROR = None
except ImportError as e:  # torch_reference.py says it is missing (main)
    torch = None
    TORCH_IMPORT_ERROR = e

EXIT_USAGE = 2

from mpbench.reference.safetensors import SafetensorsError, read_safetensors, write_safetensors  # noqa: F401

# ---- models ------------------------------------------------------------------------------

class Unsupported(Exception):
    """The export can't be mirrored here (the message says why)."""


def build_mlp(meta):
    """models/mlp.cpp: hidden_layers x (Linear -> activation), Linear -> logits."""
    nn = torch.nn
    names = [p["name"] for p in meta["params"]]
    shapes = {p["name"]: p["shape"] for p in meta["params"]}
    n_layers = len([n for n in names if re.fullmatch(r"layers\.\d+\.weight", n)])
    act = meta["config"]["model"]["activation"]
    if act not in ("gelu", "relu"):
        raise Unsupported(f"MLP activation {act!r}")

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(
                nn.Linear(shapes[f"layers.{i}.weight"][1], shapes[f"layers.{i}.weight"][0])
                for i in range(n_layers))
            # mpbench's GELU is the tanh approximation (ops/activation.h).
            self.act = nn.GELU(approximate="tanh") if act == "gelu" else nn.ReLU()

        def forward(self, batch):
            h = batch["x"]
            for i, layer in enumerate(self.layers):
                h = layer(h)
                if i < n_layers - 1:
                    h = self.act(h)
            return h

    return Mlp()


def build_bert(meta):
    """models/bert.cpp: BERT for masked-LM, post-LN (original) or pre-LN."""
    nn = torch.nn
    cfg = meta["config"]["model"]
    if float(cfg.get("dropout", 0.0)) > 0.0:
        raise Unsupported("dropout > 0: mpbench's counter-based dropout masks can't be reproduced in PyTorch; "
                          "export a cell with model.dropout: 0")
    shapes = {p["name"]: tuple(p["shape"]) for p in meta["params"]}
    names = list(shapes)
    V, C = shapes["embeddings.word_embeddings.weight"]
    T = shapes["embeddings.position_embeddings.weight"][0]
    L = len({n.split(".")[2] for n in names if n.startswith("encoder.layer.")})
    F_dim = shapes["encoder.layer.0.intermediate.dense.weight"][0]
    m = re.search(r"\bA(\d+)\b", meta["model"].get("describe", ""))  # "bert L2 H128 A2 ..."
    heads = int(m.group(1)) if m else int(cfg.get("heads", 0))
    if heads <= 0 or C % heads:
        raise Unsupported(f"can't tell the number of attention heads (describe: {meta['model'].get('describe')!r})")
    pre_ln = "encoder.ln.weight" in shapes
    # model.mlm_head: sparse (the default) runs the head on the masked
    # positions only; results from before the key decoded every position.
    sparse_head = meta["config"]["model"].get("mlm_head", "dense") == "sparse"
    # The fp32 values of core/precision.h's layernorm_eps() and
    # attention_mask_value() (the reference always runs fp32).
    eps = float(cfg["ln_eps"])
    mask_value = -1e9
    D = C // heads
    qkv_layers = separate_qkv(meta)
    gelu = nn.GELU(approximate="tanh")

    def ln(dim):
        return nn.LayerNorm(dim, eps=eps)

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(V, C)
            self.position_embeddings = nn.Embedding(T, C)
            self.token_type_embeddings = nn.Embedding(2, C)
            if not pre_ln:
                self.LayerNorm = ln(C)

        def forward(self, ids):
            # every token has segment 0 (single-sentence MLM)
            e = self.word_embeddings(ids) + self.position_embeddings.weight[None, :ids.shape[1]] \
                + self.token_type_embeddings.weight[0]
            return e if pre_ln else self.LayerNorm(e)

    class Dense(nn.Module):  # HF's attention.output / output: dense (+ LayerNorm for post-LN)
        def __init__(self, n_in, n_out, with_ln):
            super().__init__()
            self.dense = nn.Linear(n_in, n_out)
            if with_ln:
                self.LayerNorm = ln(n_out)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            if pre_ln:
                self.ln = ln(C)
            if qkv_layers:  # NVIDIA's BERT recipe: three Linears (LAMB: three trust ratios)
                self.query, self.key, self.value = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)
            else:  # One [3C, C] projection: rows [0,C) query, [C,2C) key, [2C,3C) value.
                self.qkv = nn.Linear(C, 3 * C)
            self.output = Dense(C, C, not pre_ln)

        def forward(self, x, key_valid):
            B = x.shape[0]
            if qkv_layers:
                q, k, v = (f(x).view(B, T, heads, D).transpose(1, 2) for f in (self.query, self.key, self.value))
            else:
                qkv = self.qkv(x).view(B, T, 3, heads, D).permute(2, 0, 3, 1, 4)  # [3, B, H, T, D]
                q, k, v = qkv[0], qkv[1], qkv[2]
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
            s = s + (1.0 - key_valid.to(s.dtype))[:, None, None, :] * mask_value  # padded keys
            p = torch.softmax(s, dim=-1)
            a = (p @ v).transpose(1, 2).reshape(B, T, C)  # merge heads
            return self.output.dense(a)

    class Intermediate(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(C, F_dim)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.intermediate = Intermediate()
            self.output = Dense(F_dim, C, not pre_ln)
            if pre_ln:
                self.ln = ln(C)

        def forward(self, x, key_valid):
            if pre_ln:  # x + attn(LN1(x)) = r;  r + FFN(LN2(r))
                r = x + self.attention(self.attention.ln(x), key_valid)
                return r + self.output.dense(gelu(self.intermediate.dense(self.ln(r))))
            h = self.attention.output.LayerNorm(x + self.attention(x, key_valid))
            return self.output.LayerNorm(h + self.output.dense(gelu(self.intermediate.dense(h))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.ModuleList(Layer() for _ in range(L))
            if pre_ln:
                self.ln = ln(C)

    class Transform(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(C, C)
            self.LayerNorm = ln(C)

    class Predictions(nn.Module):
        def __init__(self):
            super().__init__()
            self.transform = Transform()
            self.bias = nn.Parameter(torch.zeros(V))  # the decoder weight is the word embedding

    class Cls(nn.Module):
        def __init__(self):
            super().__init__()
            self.predictions = Predictions()

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = Embeddings()
            self.encoder = Encoder()
            self.cls = Cls()

        def forward(self, batch):
            ids = batch["ids"]
            key_valid = batch["mask"] if "mask" in batch else torch.ones_like(ids)
            x = self.embeddings(ids)
            for layer in self.encoder.layer:
                x = layer(x, key_valid)
            if pre_ln:
                x = self.encoder.ln(x)
            x = x.reshape(-1, C)
            if sparse_head:  # the labelled (masked) positions, in order: mpbench's sparse logits() rows
                x = x[batch["y"].reshape(-1) >= 0]
            t = self.cls.predictions.transform
            h = t.LayerNorm(gelu(t.dense(x)))
            logits = h @ self.embeddings.word_embeddings.weight.t() + self.cls.predictions.bias
            return logits  # [B*T, V] (dense) or [masked, V] (sparse), rows as mpbench's logits()

    model = Bert()
    got, want = set(model.state_dict()), {part for n in shapes for part in torch_parts(meta, n)}
    if got != want:
        raise Unsupported(f"the PyTorch BERT's parameters differ from the export's: "
                          f"only here {sorted(got - want)}, only exported {sorted(want - got)}")
    return model


BUILDERS = {"mlp": build_mlp, "bert": build_bert}

QKV_NAME = re.compile(r"^(encoder\.layer\.\d+\.attention\.)qkv\.(weight|bias)$")


def separate_qkv(meta):
    """Whether the BERT reference has separate query/key/value Linears: for a
    LAMB cell with optimizer.lamb_qkv split (the default; an export from before
    the key has none and gave QKV one trust ratio, packed). The forward and
    backward are the packed projection's; LAMB's trust ratio per tensor then
    is per layer, as in NVIDIA's BERT recipe."""
    o = meta["config"]["optimizer"]
    return meta["model"]["kind"] == "bert" and o.get("kind") == "lamb" and o.get("lamb_qkv", "packed") == "split"


def torch_parts(meta, name):
    """The reference's parameters that make up mpbench's tensor `name`, in
    order along dim 0: the query, key and value Linears' for a packed
    attention.qkv with separate_qkv, else the tensor itself."""
    m = QKV_NAME.match(name)
    if not m or not separate_qkv(meta):
        return [name]
    return [f"{m.group(1)}{layer}.{m.group(2)}" for layer in ("query", "key", "value")]


def build_model(meta, weights):
    """The model with the exported weights, and its parameters by torch name
    in mpbench's order (the optimizer's order doesn't change the math)."""
    kind = meta["model"]["kind"]
    if kind not in BUILDERS:
        raise Unsupported(f"model kind {kind!r} has no PyTorch reference (known: {', '.join(BUILDERS)})")
    model = BUILDERS[kind](meta)
    state = {}
    for p in meta["params"]:
        parts = torch_parts(meta, p["name"])
        whole = np.asarray(weights[p["name"]], dtype=np.float32)
        for part, block in zip(parts, np.split(whole, len(parts), axis=0)):
            state[part] = torch.from_numpy(np.ascontiguousarray(block))
    model.load_state_dict(state, strict=True)
    named = dict(model.named_parameters())
    if set(named) != set(state):
        raise Unsupported(f"parameter names differ from the export's: {sorted(set(named) ^ set(state))}")
    return model, {part: named[part] for p in meta["params"] for part in torch_parts(meta, p["name"])}


def as_exported(meta, params, name, of=lambda t: t):
    """mpbench's tensor `name` from the reference's parameters (`of` each:
    the value, or its gradient), its parts concatenated along dim 0."""
    return torch.cat([of(params[part]) for part in torch_parts(meta, name)], dim=0)


def batch_tensors(batches, step):
    b = {}
    prefix = f"step{step}."
    for key in ("x", "ids", "mask", "y"):
        a = batches.get(prefix + key)
        if a is not None:
            b[key] = torch.from_numpy(a.astype(np.int64) if key in ("ids", "y") else a)
    if "y" not in b:
        raise Unsupported(f"batches.safetensors has no {prefix}y")
    return b


def mean_loss(logits, y):
    """Softmax cross-entropy summed over labels >= 0, divided by their count (at least 1)."""
    keep = y >= 0
    count = max(1, int(keep.sum()))
    if logits.shape[0] != y.shape[0]:  # a sparse head's logits: the labelled rows already
        return F.cross_entropy(logits, y[keep], reduction="sum") / count
    return F.cross_entropy(logits[keep], y[keep], reduction="sum") / count


# Which parameters optimizer.decay_exclude names, by state-dict name as
# HuggingFace's BERT examples pick their no-decay group ("bias",
# "LayerNorm.weight"), widened to the pre-LN model's Megatron names (".ln.").
# Independent of mpbench's own bookkeeping (ParamRole, models/model.h), so the
# check compares two classifications as well as two optimizers.
NO_DECAY_NAMES = {
    "bias": re.compile(r"(^|\.)bias$"),
    "layernorm": re.compile(r"(^|\.)(LayerNorm|ln)\.weight$"),
}


def param_groups(cfg, meta, params):
    """Two parameter groups, as the BERT recipes build them: weight decay for the
    rest, none for what optimizer.decay_exclude names. Empty groups are left out."""
    o = cfg["optimizer"]
    exclude = o.get("decay_exclude", [])
    for name in exclude:
        if name not in NO_DECAY_NAMES:
            raise Unsupported(f"optimizer.decay_exclude {name!r}")
    decay, no_decay = [], []
    for p in meta["params"]:  # mpbench's order
        name = p["name"]
        excluded = any(NO_DECAY_NAMES[e].search(name) for e in exclude)
        (no_decay if excluded else decay).extend(params[part] for part in torch_parts(meta, name))
    groups = [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


class PaperLamb(torch.optim.Optimizer if torch is not None else object):
    """LAMB written from the paper, not from mpbench: You et al. 2019, "Large
    Batch Optimization for Deep Learning: Training BERT in 76 minutes",
    Algorithm 2, per parameter tensor (the paper's layer), with the choices
    NVIDIA apex's FusedLAMB makes where the paper leaves one: the scaling
    function phi is the identity, the trust ratio ||x|| / ||r + lambda x|| is 1
    when either norm is 0, and bias correction (1 - beta^t) can be turned off.
    The norms are taken in float64. A parameter group's weight_decay is the
    paper's lambda (0 for the group optimizer.decay_exclude names)."""

    def __init__(self, params, lr, betas, eps, weight_decay, bias_correction):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      bias_correction=bias_correction))

    @torch.no_grad() if torch is not None else (lambda f: f)
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["t"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["t"] += 1
                t, m, v, g = state["t"], state["m"], state["v"], p.grad
                m.mul_(beta1).add_(g, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                c1 = 1.0 - beta1 ** t if group["bias_correction"] else 1.0
                c2 = 1.0 - beta2 ** t if group["bias_correction"] else 1.0
                r = (m / c1) / ((v / c2).sqrt() + group["eps"])
                if group["weight_decay"] != 0.0:
                    r = r + group["weight_decay"] * p
                x_norm = float(p.double().norm())
                r_norm = float(r.double().norm())
                ratio = x_norm / r_norm if x_norm > 0.0 and r_norm > 0.0 else 1.0
                p.sub_(r, alpha=group["lr"] * ratio)


def on_off(value):
    """An off/on key of the cell's configuration JSON (a JSON bool; "on"/"off" accepted too)."""
    if isinstance(value, bool):
        return value
    if value in ("on", "off"):
        return value == "on"
    raise Unsupported(f"expected on/off, got {value!r}")


def make_optimizer(cfg, meta, params):
    o = cfg["optimizer"]
    groups = param_groups(cfg, meta, params)
    if o["kind"] == "adamw":
        return torch.optim.AdamW(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], foreach=False)
    if o["kind"] == "sgd":
        return torch.optim.SGD(groups, lr=o["lr"], momentum=o["momentum"], dampening=0.0, nesterov=False,
                               foreach=False)
    if o["kind"] == "lamb":
        return PaperLamb(groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                         weight_decay=o["weight_decay"], bias_correction=on_off(o.get("bias_correction", True)))
    raise Unsupported(f"optimizer {o['kind']!r}")


def run(d):
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    weights, _ = read_safetensors(os.path.join(d, "weights.safetensors"))
    batches, _ = read_safetensors(os.path.join(d, "batches.safetensors"))
    cfg = meta["config"]
    steps = int(meta["steps"])
    if cfg.get("inject_nonfinite"):
        raise Unsupported("inject_nonfinite: the reference doesn't mirror injected faults")
    if cfg["precision"] != "fp32":
        print(f"torch_reference: note: the cell's precision is {cfg['precision']!r}; the reference runs fp32, "
              "and check_reference.py's tolerances are fp32's", file=sys.stderr)
    torch.manual_seed(0)  # nothing here is random; for completeness

    out = {}
    # Step 1: logits, loss, gradients.
    model, params = build_model(meta, weights)
    b1 = batch_tensors(batches, 1)
    logits = model(b1)
    loss = mean_loss(logits, b1["y"])
    loss.backward()
    out["logits"] = logits.detach().numpy().astype(np.float32)
    out["loss"] = np.array(loss.item(), dtype=np.float64)
    for p in meta["params"]:
        unreached = any(params[part].grad is None for part in torch_parts(meta, p["name"]))
        out["grad." + p["name"]] = (np.zeros(p["shape"], np.float32) if unreached else
                                    as_exported(meta, params, p["name"], lambda t: t.grad).numpy().astype(np.float32))

    # Training: a fresh model from the same weights, steps 1..steps.
    model, params = build_model(meta, weights)
    opt = make_optimizer(cfg, meta, params)
    # HuggingFace's schedules through PyTorch's own LambdaLR, stepped after each
    # update as the recipes do: the convention mpbench follows (train/lr_schedule.h).
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(cfg, s))
    clip = float(cfg["optimizer"].get("grad_clip", 0.0))
    weight = float(cfg.get("loss_weight", 1.0))
    losses, norms = [], []
    for s in range(1, steps + 1):
        b = batch_tensors(batches, s)
        opt.zero_grad(set_to_none=False)
        loss = mean_loss(model(b), b["y"])
        (loss * weight).backward()
        for p in params.values():
            if p.grad is None:  # a parameter the loss doesn't reach: a zero gradient, as in mpbench
                p.grad = torch.zeros_like(p)
        norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params.values()))
        if clip > 0 and norm > clip:
            for p in params.values():
                p.grad.mul_(clip / norm)
        opt.step()
        sched.step()
        losses.append(loss.item())
        norms.append(norm)
    out["train.loss"] = np.array(losses, dtype=np.float64)
    out["train.grad_norm"] = np.array(norms, dtype=np.float64)
    out["train.skipped"] = np.zeros(steps, dtype=np.int32)
    for p in meta["params"]:
        out["final." + p["name"]] = as_exported(meta, params, p["name"], lambda t: t.detach()).numpy().astype(np.float32)
    write_safetensors(os.path.join(d, "reference.safetensors"), out,
                      {"format": "mpbench-reference-results", "source": "torch " + torch.__version__,
                       "cell": f"{meta.get('experiment')} / {meta.get('cell_id')}"})
    return meta


def lr_factor(cfg, s):
    """lr_lambda(s) of transformers' get_linear_schedule_with_warmup / get_cosine_schedule_with_warmup
    (num_cycles 0.5), or a warm-up then constant; s is LambdaLR's 0-based count of earlier updates."""
    o = cfg["optimizer"]
    warmup, decay, steps = int(o.get("warmup", 0)), o.get("decay", "none"), int(cfg["steps"])
    if s < warmup:
        return s / max(1, warmup)
    if decay == "none":
        return 1.0
    progress = (s - warmup) / max(1, steps - warmup)
    if decay == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[0] + "\n\n    usage: torch_reference.py DIR", file=sys.stderr)
        return EXIT_USAGE
    if torch is None:
        print(f"torch_reference: PyTorch is not importable ({TORCH_IMPORT_ERROR}); "
              "run with Debian's /usr/bin/python3 (python3-torch)", file=sys.stderr)
        return EXIT_USAGE
    d = argv[1]
    try:
        meta = run(d)
    except Unsupported as e:
        print(f"torch_reference: unsupported: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, SafetensorsError, KeyError, ValueError) as e:
        print(f"torch_reference: {d}: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"torch_reference: {meta['model']['kind']} {meta.get('cell_id')}: wrote "
          f"{os.path.join(d, 'reference.safetensors')} (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
