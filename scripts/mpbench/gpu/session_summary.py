#!/usr/bin/python3
"""The page bin/gpu-session leaves as PHASE-summary.txt: what a person reads in a minute.

From a phase's log folder: the machine (GPU, driver, clock; PyTorch's and the runner's
cuDNN and cuBLASLt versions), one row per step, the test counts and failed tests, the
first kernel fault, the sanitizer's error count, the BERT-base cell's figures
(attention_impl, plans/allocations/syncs in timed steps, step ms, tokens/s) and PyTorch's
on the same GPU with the ratio; last, one `ledger-json:` line that scripts/gpu_ledger.py
add appends to the ledger.

  gpu_session_summary.py --phase P --steps STEPS.tsv --logs DIR --budget S --elapsed S
                         --commit C --cuda-sources H   (gpu-session calls it; prints the page)
"""

import argparse
import contextlib
import datetime
import glob
import io
import json
import os
import re
import sys

from mpbench.gpu import timeline

# The BERT cells of gpu_first_cell.yaml and gpu_smoke.yaml: sequence 128 (tokens = samples x 128).
CELL_EXPERIMENT = "gpu_first_cell"


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_steps(path):
    """[(name, code, status, secs, log)] in the order the steps ran."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                raise SystemExit(f"{path}:{n}: expected 5 tab-separated fields, got {line.strip()!r}")
            rows.append(parts)
    return rows


def machine(logs):
    """{gpu, driver, sm_clock, torch, torch_cudnn, libraries, doctor} from the environment steps."""
    m = {"gpu": "", "driver": "", "sm_clock": "", "torch": "", "torch_cudnn": "", "libraries": {}, "doctor": "",
         "header_vs_runtime": {}, "library_warnings": [], "loaded_libraries": []}
    smi = [ln for ln in read_text(os.path.join(logs, "nvidia-smi.txt")).splitlines()
           if ln and not ln.startswith("==") and not ln.startswith("name")]
    if smi:
        cols = [c.strip() for c in smi[0].split(",")]
        if len(cols) >= 4:
            m["gpu"], m["driver"], m["sm_clock"] = cols[0], cols[1], f"{cols[2]} (max {cols[3]})"
    t = read_text(os.path.join(logs, "torch-env.txt"))
    if mt := re.search(r"^torch (\S+) cuda (\S+) cudnn (\S+)", t, re.M):
        m["torch"], m["torch_cudnn"] = f"{mt.group(1)} (CUDA {mt.group(2)})", mt.group(3)
    if not m["gpu"] and (mg := re.search(r"^gpu (.+)$", t, re.M)) and "none" not in mg.group(1):
        m["gpu"] = mg.group(1)
    try:
        with open(os.path.join(logs, "doctor.json")) as f:
            doctor = json.load(f)
        gpu = next(c for c in doctor.get("checks", []) if c.get("name") == "gpu")
        data = gpu.get("data") or {}
        m["libraries"] = data.get("libraries") or {}
        # runner doctor's header-vs-runtime check (item 5): {library: {header, runtime}}, its
        # warnings, and which copies of the libraries the runner loaded (item 8)
        m["header_vs_runtime"] = data.get("header_vs_runtime") or {}
        m["library_warnings"] = data.get("library_warnings") or []
        m["loaded_libraries"] = data.get("loaded_libraries") or []
        m["doctor"] = f"{gpu.get('status', '?')}: {gpu.get('finding', '')}"
    except (OSError, ValueError, StopIteration):
        pass
    runner_manifest_fallback(logs, m)
    return m


def runner_manifest_fallback(logs, m):
    """Fills what a phase without the environment steps lacks (the GPU's name, the runner's
    libraries, PyTorch's version) from the runner's manifest.json of a result it wrote and
    from bench/torch_bert_gpu.py's first line ('torch VERSION on GPU: ...'). The driver is
    not in either: only nvidia-smi says it."""
    for path in sorted(glob.glob(os.path.join(logs, "results", "*", "manifest.json"))):
        try:
            with open(path) as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            continue
        device = manifest.get("device") or {}
        if not m["gpu"]:
            m["gpu"] = (device.get("gpu") or {}).get("name") or ""
        libs = dict(manifest.get("libraries") or {})
        if not m["libraries"]:
            m["header_vs_runtime"] = libs.pop("header_vs_runtime", {}) or {}
            m["loaded_libraries"] = libs.pop("loaded", []) or []
            m["libraries"] = {k: v for k, v in libs.items() if isinstance(v, str)}
        if m["gpu"] and m["libraries"]:
            break
    if not m["torch"]:
        for path in sorted(glob.glob(os.path.join(logs, "*.txt"))):
            if mt := re.search(r"^torch (\S+) on (.+?): ", read_text(path), re.M):
                m["torch"] = mt.group(1)
                m["gpu"] = m["gpu"] or mt.group(2)
                break


def gtest_counts(text):
    """'N passed, N failed, N skipped' from a gtest log, or '' when it did not finish."""
    ran = re.search(r"^\[==========\] (\d+) tests? from .* ran", text, re.M)
    if not ran:
        return ""
    def count(tag):
        mm = re.search(rf"^\[  {tag}  ?\] (\d+) tests?[,.]", text, re.M)
        return int(mm.group(1)) if mm else 0
    return f"{ran.group(1)} ran: {count('PASSED')} passed, {count('FAILED')} failed, {count('SKIPPED')} skipped"


def cell_figures(logs, experiment):
    """The figures of EXPERIMENT's cells under the phase's results/: {cell_id: {...}}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(logs, "results", experiment, "cells", "*.json"))):
        try:
            with open(path) as f:
                cell = json.load(f)
        except (OSError, ValueError) as e:
            out[os.path.basename(path)] = {"error": str(e)}
            continue
        s = cell.get("summary") or {}
        seq = ((cell.get("config") or {}).get("model") or {}).get("seq_len") or 128
        step = (s.get("step_time_ms") or {}).get("median")
        sps = s.get("samples_per_s")
        out[cell.get("cell_id") or os.path.basename(path)] = {
            "attention_impl": s.get("attention_impl"),
            "attention_impl_calls": s.get("attention_impl_calls"),
            "plans_created_in_timed_steps": s.get("plans_created_in_timed_steps"),
            "allocs_in_timed_steps": s.get("allocs_in_timed_steps"),
            "host_syncs_per_step": s.get("host_syncs_per_step"),
            "gemm_fallbacks": s.get("gemm_fallbacks"),
            "step_ms_median": step,
            "tokens_per_s": round(sps * seq) if sps else None,
            "mfu": ((s.get("utilization") or {}).get("mfu")),
            "mfu_tensor_peak": ((s.get("utilization") or {}).get("mfu_tensor_peak")),
            "final_loss": s.get("final_loss"),
            "eval_loss": s.get("eval_loss"),
            "precision": (cell.get("axes") or {}).get("precision") or (cell.get("config") or {}).get("precision"),
            "fusion": (cell.get("axes") or {}).get("fusion") or (cell.get("config") or {}).get("fusion"),
            "batch_size": (cell.get("config") or {}).get("batch_size"),
        }
    return out


def torch_tokens(text):
    """{precision: tokens/s} from bench/torch_bert_gpu.py's lines 'torch  PREC  N tokens/s'."""
    return {p: float(v) for p, v in re.findall(r"^torch\s+(\S+)\s+([\d.]+) tokens/s", text, re.M)}


def fmt(v, spec=""):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for a in ("--phase", "--steps", "--logs", "--commit", "--cuda-sources"):
        ap.add_argument(a, required=True)
    ap.add_argument("--sources", default="", help="GROUP=HASH,... (the bundle's MANIFEST.md); the ledger's per-step key")
    ap.add_argument("--budget", type=int, required=True)
    ap.add_argument("--elapsed", type=int, required=True)
    a = ap.parse_args()
    steps = read_steps(a.steps)
    m = machine(a.logs)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    libs = ", ".join(f"{k} {v}" for k, v in sorted(m["libraries"].items())) or "? (doctor did not report)"
    print(f"gpu-session {a.phase}: {date}, {a.elapsed} s of a {a.budget}-s budget")
    print(f"bundle: commit {a.commit or '?'}, CUDA sources {a.cuda_sources or '?'}")
    if a.phase == "lease":
        print("\n" + "\n".join(lease_answers(a.logs, steps)))
    print(f"GPU: {m['gpu'] or '? (nvidia-smi and PyTorch named none)'}; driver {m['driver'] or '?'}; SM clock {m['sm_clock'] or '?'}")
    print(f"runner's libraries (doctor): {libs}")
    if m["header_vs_runtime"]:
        print("headers vs loaded: " + ", ".join(
            f"{k} {v.get('header') or 'none'} / {v.get('runtime')}" for k, v in sorted(m["header_vs_runtime"].items())
            if isinstance(v, dict) and "header" in v))
    for w in m["library_warnings"]:
        print(f"library warning: {w}")
    if m["loaded_libraries"]:
        print("the runner loaded: " + ", ".join(m["loaded_libraries"]))
    if m["doctor"]:
        print(f"doctor's gpu check: {m['doctor']}")
    print(f"PyTorch: {m['torch'] or '?'}, its cuDNN {m['torch_cudnn'] or '?'}")
    body = io.StringIO()
    with contextlib.redirect_stdout(body):
        figures, bad = step_table_and_cells(a, steps)
    if a.phase == "first":
        print("\n" + "\n".join(first_answers(steps, figures, bad)))
    print(body.getvalue(), end="")
    logs_said = []
    for pattern in ("cublaslt.*.log", "cudnn.log", "cudnn_frontend.log"):
        for path in sorted(glob.glob(os.path.join(a.logs, pattern))):
            logs_said.append(f"{os.path.basename(path)} {os.path.getsize(path)} bytes")
    print("\nlibrary logs in the tarball: " + (", ".join(logs_said) or "none written"))
    sources = dict(p.split("=", 1) for p in a.sources.split(",") if "=" in p)
    record = {"schema": "mpbench.gpu_lease/1", "date": date, "phase": a.phase, "commit": a.commit,
              "cuda_sources": a.cuda_sources, "sources": sources, "gpu": m["gpu"], "driver": m["driver"],
              "cudnn": m["libraries"].get("cudnn", ""), "libraries": m["libraries"],
              "header_vs_runtime": m["header_vs_runtime"], "library_warnings": m["library_warnings"],
              "loaded_libraries": m["loaded_libraries"], "torch": m["torch"],
              "torch_cudnn": m["torch_cudnn"], "budget_s": a.budget, "elapsed_s": a.elapsed,
              "steps": [{"name": n, "code": c, "status": s, "secs": t} for n, c, s, t, _ in steps],
              "figures": figures}
    print("\nledger-json: " + json.dumps(record, sort_keys=True))
    return 0


def first_answers(steps, figures, bad):
    """The first phase's four questions, in the issue's order, each in one line."""
    codes = {n: c for n, c, *_ in steps}
    out = ["In short:"]
    broke = [n for n, c, *_ in steps if c in ("failed", "timeout")]
    out.append("1. crashes or failures: " + (", ".join(broke) + " (below)" if broke else "none"))
    ops = figures.get("test_ops_cuda tests")
    out.append("2. every op against the CPU (test_ops_cuda): " + (ops or f"no count ({codes.get('test_ops_cuda', 'not run')})")
               + ("; failed: " + ", ".join(sorted(bad)) if bad else ""))
    cell = next((v for k, v in figures.items() if k.startswith(CELL_EXPERIMENT)), None)
    if cell:
        # cuDNN in either bias form ("cudnn_sdpa", "cudnn_sdpa_bias_per_query"), and nothing else
        impls = (cell.get("attention_impl") or "").split("+")
        ok = all(i.startswith("cudnn_sdpa") for i in impls) and cell.get("plans_created_in_timed_steps") == 0
        out.append(f"3. BERT-base amp_bf16 with cuDNN attention and no plan in its timed steps: {'yes' if ok else 'NO'} "
                   f"(attention_impl {cell.get('attention_impl')}, {fmt(cell.get('plans_created_in_timed_steps'))} plans, "
                   f"step {fmt(cell.get('step_ms_median'), '.2f')} ms)")
        ratio = cell.get("mpbench_over_torch")
        out.append("4. against PyTorch eager on this GPU (one round): " + (f"mpbench = {ratio:.2f}x vs torch eager" if ratio else
                   f"not measured (torch-cell: {codes.get('torch-cell', 'not run')})"))
    else:
        out.append(f"3. BERT-base cell: no result (bert-cell: {codes.get('bert-cell', 'not run')})")
        out.append("4. against PyTorch: no mpbench figure to compare")
    return out


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def anchor_lines(doc):
    """The anchor step's ratios, each naming what it is against, with its spread."""
    if not doc:
        return ["mpbench vs PyTorch: not measured (anchor step: no anchor.json)"]
    out = []
    for p, r in (doc.get("mpbench_over_torch") or {}).items():
        lo, hi = r["ratio_range"]
        out.append(f"mpbench {p} fused = {r['ratio']:.2f}x vs {r['anchor_label']} (the strongest PyTorch measured; "
                   f"best of {doc.get('rounds')} interleaved rounds, round by round {lo:.2f}-{hi:.2f}x)")
    for v in doc.get("variants") or []:
        out.append(f"  {v['label']} {v['precision']}: {v['best']:.0f} tokens/s (rounds {v['spread']:.1%} apart), "
                   f"SDPA {v['sdpa_backend']}, {v['optimizer']}"
                   + (f", compiled in {v['compile_s']:.0f} s" if v.get("compile_s") else "")
                   + (" [dense MLM head: more work]" if v.get("dense_head") else ""))
    for m in doc.get("mpbench") or []:
        out.append(f"  mpbench {m['precision']} fusion={m['fusion']}: {m['best']:.0f} tokens/s "
                   f"(rounds {m['spread']:.1%} apart)")
    out += [f"  skipped {v}: {why}" for v, why in (doc.get("skipped") or {}).items()]
    return out or ["mpbench vs PyTorch: anchor.json holds no ratio"]


def timeline_lines(logs, fused_step_ms):
    """Each timeline's parts and top 10 kernels (timeline.py), or why there is none."""
    out = []
    for v in ("fused", "unfused"):
        k, n = (os.path.join(logs, f"timeline_{v}{x}.csv") for x in ("", ".nvtx"))
        if not os.path.exists(k):
            out.append(f"amp_bf16 {v} timeline: none (timeline-{v} / timeline-csv steps)")
            continue
        try:
            rows = timeline.join(read_text(k), read_text(n), (os.path.basename(k), os.path.basename(n)))
        except timeline.TimelineError as e:
            out.append(f"amp_bf16 {v} timeline: unreadable: {e}")
            continue
        out += timeline.lines(f"amp_bf16 {v} timeline (one step under ncu)",
                              timeline.summarise(rows, fused_step_ms if v == "fused" else None))
    return out


def fp8_lines(logs):
    """gpu_fp8's cells: fp8 beside amp_bf16 at each batch (step ms, eval loss, the band)."""
    cells = cell_figures(logs, "gpu_fp8")
    by = {}
    for c in cells.values():
        if "error" not in c:
            by[(c.get("batch_size"), c["precision"])] = c
    out = []
    for b in sorted({k[0] for k in by if k[0]}):
        bf, f8 = by.get((b, "amp_bf16")), by.get((b, "fp8"))
        if not (bf and f8):
            continue
        speed = (bf["step_ms_median"] / f8["step_ms_median"]) if bf["step_ms_median"] and f8["step_ms_median"] else None
        gap = (f8["eval_loss"] - bf["eval_loss"]) / bf["eval_loss"] if bf["eval_loss"] and f8["eval_loss"] else None
        out.append(f"fp8 at batch {b}: step {fmt(f8['step_ms_median'], '.2f')} ms vs amp_bf16 "
                   f"{fmt(bf['step_ms_median'], '.2f')} ms ({fmt(speed, '.2f')}x); eval loss {fmt(gap, '+.2%')} vs bf16 "
                   + ("(inside fp8.yaml's 2.5% band)" if gap is not None and abs(gap) <= 0.025 else "(OUTSIDE the 2.5% band)"))
    return out or ["fp8 beside amp_bf16: no gpu_fp8 cells (fp8-cells step)"]


def lease_answers(logs, steps):
    """The lease's page leads with: the gate, the anchor ratio, the timeline's top kernels, fp8."""
    codes = {n: st for n, _, st, *_ in steps}
    out = ["In short:", "gate: " + ", ".join(f"{n} {codes.get(n, 'not run')}" for n in ("gate-test_gpu", "gate-test_ops_cuda"))]
    anchor = read_json(os.path.join(logs, "anchor.json"))
    out += anchor_lines(anchor)
    fused_ms = None
    for m in (anchor or {}).get("mpbench") or []:
        shape = anchor.get("shape") or {}
        if m.get("fusion") == "on" and m.get("best") and shape.get("B"):
            fused_ms = shape["B"] * shape["T"] / m["best"] * 1e3
    out += timeline_lines(logs, fused_ms)
    out += fp8_lines(logs)
    return out


def step_table_and_cells(a, steps):
    """Prints the step table, failed tests, faults and the cells' figures; returns
    (figures for the ledger, the failed tests' names)."""
    print()
    print(f"{'step':24s} {'status':18s} {'secs':>6s}  log / tests")
    figures = {}
    for name, code, status, secs, log in steps:
        text = read_text(os.path.join(a.logs, f"{name}.txt"))
        counts = gtest_counts(text)
        if counts:
            figures[f"{name} tests"] = counts
        extra = counts or log
        if mm := re.search(r"ERROR SUMMARY: (\d+) errors?", text):
            extra += f"; sanitizer: {mm.group(1)} errors"
            figures[f"{name} sanitizer errors"] = int(mm.group(1))
        print(f"{name:24s} {status:18s} {secs:>6s}  {extra}")
    faults = []
    failed_tests = set()
    for name, *_ in steps:
        text = read_text(os.path.join(a.logs, f"{name}.txt"))
        failed_tests.update(re.findall(r"^\[  FAILED  \] ([A-Za-z][\w/.]*)", text, re.M))
        if f := re.search(r"^.*failed while executing \(MPB_CUDA_DEBUG_SYNC\).*$", text, re.M):
            faults.append(f"{name}: {f.group(0).strip()}")
    if failed_tests:
        print("\nfailed tests: " + ", ".join(sorted(failed_tests)))
    if faults:
        print("first kernel fault per step:\n  " + "\n  ".join(faults))

    torch = {}
    torch_libraries = []
    for name in ("torch-cell", "torch-precisions"):
        text = read_text(os.path.join(a.logs, f"{name}.txt"))
        torch.update(torch_tokens(text))
        # bench/torch_bert_gpu.py's own 'libraries:' lines: what PyTorch loaded, from where
        torch_libraries += [ln for ln in re.findall(r"^libraries: .*$", text, re.M) if ln not in torch_libraries]
    anchor = read_json(os.path.join(a.logs, "anchor.json"))
    for p, r in ((anchor or {}).get("mpbench_over_torch") or {}).items():
        figures[f"anchor {p}"] = {"ratio": round(r["ratio"], 3), "vs": r["anchor_label"],
                                  "round_range": [round(x, 3) for x in r["ratio_range"]]}
    for experiment in (CELL_EXPERIMENT, "gpu_smoke", "gpu_fp8"):
        cells = cell_figures(a.logs, experiment)
        if not cells:
            continue
        print(f"\n{experiment} (mpbench; vs PyTorch eager on the same GPU, one round each, PyTorch's run first):")
        for cell_id, c in cells.items():
            if "error" in c:
                print(f"  {cell_id}: unreadable: {c['error']}")
                continue
            t = torch.get(c["precision"]) if c["fusion"] == "on" else None
            ratio = c["tokens_per_s"] / t if t and c["tokens_per_s"] else None
            calls = ", ".join(f"{k} {v} calls" for k, v in (c["attention_impl_calls"] or {}).items())
            print(f"  {cell_id}: attention_impl {c['attention_impl']}" + (f" ({calls})" if calls else ""))
            print(f"      timed steps: {fmt(c['plans_created_in_timed_steps'])} plans created, "
                  f"{fmt(c['allocs_in_timed_steps'])} allocations, {fmt(c['host_syncs_per_step'])} host syncs/step; "
                  f"GEMM fallbacks {c['gemm_fallbacks'] or 'none'}")
            print(f"      step {fmt(c['step_ms_median'], '.2f')} ms (median), {fmt(c['tokens_per_s'])} tokens/s, "
                  f"MFU {fmt(c['mfu_tensor_peak'], '.2f')} of the bf16 dense tensor-core peak "
                  f"({fmt(c['mfu'], '.2f')} of its own mode's); loss {fmt(c['final_loss'], '.3f')} (eval {fmt(c['eval_loss'], '.3f')})")
            if ratio:
                print(f"      PyTorch eager (autocast + SDPA, one round): {t:.0f} tokens/s; "
                      f"mpbench = {ratio:.2f}x vs torch eager")
            figures[f"{experiment} {cell_id}"] = {k: v for k, v in c.items() if k not in ("precision", "fusion")}
            if ratio:
                figures[f"{experiment} {cell_id}"]["torch_tokens_per_s"] = round(t)
                figures[f"{experiment} {cell_id}"]["mpbench_over_torch"] = round(ratio, 3)
    if torch and not any(k.startswith(CELL_EXPERIMENT) or k.startswith("gpu_smoke") for k in figures):
        print("\nPyTorch alone: " + ", ".join(f"{p} {v:.0f} tokens/s" for p, v in sorted(torch.items())))
    if torch_libraries:
        print("PyTorch's side, as bench/torch_bert_gpu.py says:\n  " + "\n  ".join(torch_libraries))
    return figures, failed_tests


if __name__ == "__main__":
    sys.exit(main())
