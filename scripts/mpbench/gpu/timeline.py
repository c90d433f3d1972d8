"""A whole training step's kernels, from Nsight Compute's CSV: what the step spends its time on.

bin/gpu-session's lease profiles one step ("train step 12", the trainer's NVTX range) of
experiments/gpu_timeline.yaml with `ncu --metrics gpu__time_duration.sum` and exports the
report twice (`ncu --import R --csv --page raw --print-units base`): once with kernel names
(`--print-kernel-base function`) and once with each kernel renamed to its innermost NVTX
range (`--print-nvtx-rename kernel`). Joined on ncu's kernel ID, every kernel gets a name,
a duration and a part of the step:

  forward    embeddings forward, encoder.layer.N forward
  backward   encoder.layer.N backward / recompute, embeddings backward
  head       cls head forward / backward (the masked-LM head and its loss)
  optimizer  gradient statistics + optimizer step (finite check, norm, clip, AdamW)
  other      a kernel in the step but outside those ranges (input upload, loss read-back)

ncu runs kernels one at a time, so the durations add up to the step's GPU work without the
gaps between launches; the summary puts their sum beside the step time the runner measured.

Both CSV shapes ncu writes are read: `--page raw` (a row per kernel, a column per metric,
then a row of units) and `--page details` (a row per kernel and metric: "Metric Name",
"Metric Unit", "Metric Value"). Anything else is a TimelineError naming the file.
"""

import csv
import io
import re

DURATION = "gpu__time_duration.sum"
UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
           "second": 1e9, "s": 1e9}
PARTS = ("forward", "backward", "head", "optimizer", "other")


class TimelineError(Exception):
    pass


def _table(text, name):
    """The CSV's rows as dicts, from its header line on (ncu prints '==PROF==' lines first)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') or ln.startswith("ID,")), None)
    if start is None:
        raise TimelineError(f"{name}: no ncu CSV header (a line starting with \"ID\")")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def _number(value, name, where):
    try:
        return float(str(value).replace(",", ""))
    except ValueError:
        raise TimelineError(f"{name}: {where}: {value!r} is not a number")


def read_durations(text, name="ncu CSV"):
    """[(id, kernel name, ns)] in ncu's order, from either CSV shape."""
    rows = _table(text, name)
    if not rows:
        raise TimelineError(f"{name}: no kernel rows (did the NVTX filter match no kernel?)")
    out = []
    if "Metric Name" in rows[0]:  # --page details: a row per kernel and metric
        for n, r in enumerate(rows, 2):
            if r.get("Metric Name") not in (DURATION, "Duration"):
                continue
            unit = (r.get("Metric Unit") or "nsecond").strip()
            if unit not in UNIT_NS:
                raise TimelineError(f"{name}: line {n}: unknown duration unit {unit!r}")
            ns = _number(r.get("Metric Value"), name, f"line {n}") * UNIT_NS[unit]
            out.append((r["ID"], r.get("Kernel Name") or "?", ns))
    else:  # --page raw: a row per kernel; the first row under the header holds the units
        if DURATION not in rows[0]:
            raise TimelineError(f"{name}: no {DURATION} column (was ncu run with --metrics {DURATION}?)")
        unit = "nsecond"
        if not (rows[0].get("ID") or "").strip().isdigit():  # the units row
            unit = (rows[0][DURATION] or "nsecond").strip()
            rows = rows[1:]
        if unit not in UNIT_NS:
            raise TimelineError(f"{name}: unknown duration unit {unit!r}")
        for n, r in enumerate(rows, 3):
            out.append((r["ID"], r.get("Kernel Name") or "?", _number(r[DURATION], name, f"line {n}") * UNIT_NS[unit]))
    if not out:
        raise TimelineError(f"{name}: no {DURATION} values")
    return out


def part_of(range_name):
    """Which part of the step an NVTX range name belongs to (the model's range names:
    models/bert.cpp, models/mlp.cpp, train/trainer.cpp)."""
    r = range_name.strip()
    if r.startswith("cls head"):
        return "head"
    if r.startswith("gradient statistics"):
        return "optimizer"
    if r.endswith(" forward"):
        return "forward"
    if r.endswith(" backward") or r.endswith(" recompute"):
        return "backward"
    return "other"


def short_name(kernel):
    """A kernel's name without its parameter list, return type or template arguments'
    clutter: 'void mpb::cuda::k<float>(Args)' -> 'mpb::cuda::k<float>'."""
    k = re.sub(r"^void\s+", "", kernel.strip())
    depth, cut = 0, len(k)
    for i, ch in enumerate(k):  # the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    k = k[:cut]
    return k if len(k) <= 80 else k[:77] + "..."


def join(kernels_csv, nvtx_csv, names=("kernels CSV", "NVTX CSV")):
    """[{id, kernel, ns, range, part}] from the two exports of one report, joined on ID."""
    kernels = read_durations(kernels_csv, names[0])
    ranges = {i: k for i, k, _ in read_durations(nvtx_csv, names[1])}
    missing = [i for i, _, _ in kernels if i not in ranges]
    if missing:
        raise TimelineError(f"{names[1]}: no row for kernel IDs {missing[:5]} of {names[0]} (not the same report?)")
    return [{"id": i, "kernel": short_name(k), "ns": ns, "range": ranges[i], "part": part_of(ranges[i])}
            for i, k, ns in kernels]


def summarise(rows, step_ms=None, top=10):
    """{kernels, total_us, parts: {part: us}, top: [(kernel, count, us, share)], step_ms,
    gaps_ms}: per kernel name (all launches together), the top TOP by time."""
    total = sum(r["ns"] for r in rows)
    by_kernel = {}
    for r in rows:
        c = by_kernel.setdefault(r["kernel"], [0, 0.0])
        c[0] += 1
        c[1] += r["ns"]
    parts = {p: sum(r["ns"] for r in rows if r["part"] == p) / 1e3 for p in PARTS}
    ranked = sorted(by_kernel.items(), key=lambda kv: -kv[1][1])
    out = {"kernels": len(rows), "total_us": total / 1e3, "parts": parts,
           "top": [(k, n, ns / 1e3, ns / total if total else 0.0) for k, (n, ns) in ranked[:top]],
           "step_ms": step_ms, "gaps_ms": None}
    if step_ms is not None:
        out["gaps_ms"] = step_ms - total / 1e6  # launch gaps and host work, as seen from the device
    return out


def lines(title, s):
    """The summary page's lines for one timeline."""
    head = f"{title}: {s['kernels']} kernels, {s['total_us'] / 1e3:.2f} ms of kernel time"
    if s["step_ms"] is not None:
        head += f" in a {s['step_ms']:.2f}-ms step ({s['gaps_ms']:.2f} ms between or beside kernels)"
    total = s["total_us"] or 1.0
    out = [head, "  by part: " + ", ".join(f"{p} {us / 1e3:.2f} ms ({us / total:.0%})"
                                           for p, us in s["parts"].items() if us > 0)]
    out.append(f"  top {len(s['top'])} kernels (launches, time, share of kernel time):")
    out += [f"    {k:60s} {n:4d}x {us:9.1f} us {share:6.1%}" for k, n, us, share in s["top"]]
    return out
