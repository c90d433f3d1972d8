#!/usr/bin/python3
"""mpb_bench's per-op JSON (bench/bench_ops.cpp) as the Markdown tables of docs/PERFORMANCE.md.

    build/bench/mpb_bench --benchmark_filter="$(cat bench/ops_filter.txt)" \\
        --benchmark_repetitions=3 --benchmark_format=json > ops.json
    scripts/bench_ops_table.py ops.json                         # print the tables
    scripts/bench_ops_table.py ops.json --update docs/PERFORMANCE.md   # replace them between the markers
    MPB_CPU_ISA=avx2 build/bench/mpb_bench ... > avx2.json
    scripts/bench_ops_table.py avx2.json --update docs/PERFORMANCE.md --section avx2   # a named block

With --benchmark_repetitions, the median of the repetitions is used (Google
Benchmark's own "_median" aggregate). For each fused op and its unfused
composition: both times, the ratio (above 1: fusion wins), and what bounds the
fused op: bandwidth when its arithmetic intensity (FLOP per byte of compulsory
traffic) is below the machine's ridge (GEMM ceiling / triad bandwidth), compute
above it, with how close it comes to that bound. GEMMs per compute mode: the
rate against that mode's ceiling.
"""

import argparse
import json
import re
import sys

from mpbench import output as mo

BEGIN = "<!-- bench_ops:begin (scripts/bench_ops_table.py writes what is between these lines) -->"
END = "<!-- bench_ops:end -->"


def markers(section):
    """The marker lines of a named block (--section), or of the unnamed one."""
    if not section:
        return BEGIN, END
    return BEGIN.replace("bench_ops:begin", f"bench_ops:begin {section}"), END.replace("bench_ops:end",
                                                                                     f"bench_ops:end {section}")
PAIRED = ("BM_Attention", "BM_ResidualLayerNorm", "BM_GemmBiasGelu", "BM_SoftmaxXent", "BM_AdamW")
OP_NAMES = {"BM_Attention": "attention fwd+bwd", "BM_ResidualLayerNorm": "residual + LayerNorm",
            "BM_GemmBiasGelu": "GEMM + bias + GELU", "BM_SoftmaxXent": "softmax cross-entropy (sparse head)",
            "BM_AdamW": "AdamW step (fp32 state)"}


def runs(doc):
    """name (without /real_time and aggregate suffixes) -> the run to use: the median if present."""
    chosen = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = re.sub(r"(/real_time|/iterations:\d+)+", "", b.get("run_name", b["name"]))
        if b.get("run_type") == "aggregate" or name not in chosen:
            chosen[name] = b
    return chosen


def ms(b):
    unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b["real_time"] * unit


def bound(b, bounds, precision):
    """(what bounds it, fraction of that bound) from the op's rates and the machine's."""
    flops, nbytes = b.get("FLOP/s", 0.0), b.get("bytes/s", 0.0)
    ceiling = bounds.get(f"ceiling_{'bf16' if precision == 'bf16' else 'fp32'}_FLOP/s")
    triad = bounds.get("triad_bytes/s")
    if not ceiling or not triad or not nbytes:
        return "?", None
    ridge = ceiling / triad
    if flops / nbytes < ridge:
        return "bandwidth", nbytes / triad
    return "compute", flops / ceiling


def fmt_ratio(x):
    return "—" if x is None else f"{x:.2f}"


def tables(doc):
    rs = runs(doc)
    bounds = rs.get("BM_MachineBounds", {})
    ctx = doc.get("context", {})
    out = []
    triad = bounds.get("triad_bytes/s")
    ceil32, ceil16 = bounds.get("ceiling_fp32_FLOP/s"), bounds.get("ceiling_bf16_FLOP/s")
    out.append(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs; CPU kernels: "
               f"{ctx.get('cpu_kernels', '?')}; GEMMs: {ctx.get('gemm_isa', '?')}. Bounds measured in the same run: "
               f"STREAM triad {triad / 1e9:.1f} GB/s, GEMM ceiling fp32 {ceil32 / 1e9:.0f} / bf16 "
               f"{ceil16 / 1e9:.0f} GFLOP/s." if triad and ceil32 and ceil16 else "Machine bounds: not in this run.")
    out.append("")
    out.append("| op | shape | precision | fused | unfused | fused speed-up | fused GB/s | fused GFLOP/s | "
               "bound | of the bound |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---|---:|")
    for fn in PAIRED:
        for name in sorted(n for n in rs if n.startswith(fn + "/") and n.endswith("_fused")):
            key = name[len(fn) + 1:-len("_fused")]
            unfused = rs.get(f"{fn}/{key}_unfused")
            fused = rs[name]
            parts = key.split("_")
            shape, precision = parts[0], parts[1]
            what, frac = bound(fused, bounds, precision)
            ratio = ms(unfused) / ms(fused) if unfused else None
            out.append(f"| {OP_NAMES[fn]} | {shape} | {precision} | {ms(fused):.3f} ms | "
                       f"{'—' if not unfused else f'{ms(unfused):.3f} ms'} | {fmt_ratio(ratio)}x | "
                       f"{fused.get('bytes/s', 0) / 1e9:.1f} | {fused.get('FLOP/s', 0) / 1e9:.1f} | {what} | "
                       f"{'—' if frac is None else f'{100 * frac:.0f}%'} |")
    out.append("")
    out.append("| GEMM | shape | mode | time | GFLOP/s | of the mode's ceiling |")
    out.append("|---|---|---|---:|---:|---:|")
    for name in sorted(n for n in rs if n.startswith("BM_GemmLayer/")):
        b = rs[name]
        shape, _, rest = name[len("BM_GemmLayer/"):].partition("_")  # mini_qkv_dW_bf16
        gemm, _, mode = rest.rpartition("_")
        frac = b.get("frac_ceiling")
        out.append(f"| {gemm.replace('_', ' ')} | {shape} | {mode} | {ms(b):.3f} ms | "
                   f"{b.get('FLOP/s', 0) / 1e9:.1f} | {'—' if frac is None else f'{100 * frac:.0f}%'} |")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", help="mpb_bench --benchmark_format=json output")
    ap.add_argument("--update", metavar="MARKDOWN", help="replace the tables between the bench_ops markers")
    ap.add_argument("--section", default="", help="with --update: the block whose markers carry this name")
    args = ap.parse_args(argv[1:])
    try:
        with open(args.json, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"bench_ops_table: {args.json}: {e}", file=sys.stderr)
        return 2
    text = tables(doc)
    if not args.update:
        sys.stdout.write(text)
        return 0
    with open(args.update, encoding="utf-8") as f:
        md = f.read()
    begin, end = markers(args.section)
    if begin not in md or end not in md:
        print(f"bench_ops_table: {args.update}: no bench_ops markers (the lines {begin!r} and {end!r})",
              file=sys.stderr)
        return 2
    head, rest = md.split(begin, 1)
    _, tail = rest.split(end, 1)
    mo.write_output(args.update, head + begin + "\n" + text + end + tail)
    print(f"bench_ops_table: updated {args.update}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
