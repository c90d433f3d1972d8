#!/usr/bin/python3
"""The lease ledger: what each lent-GPU run of bin/gpu-session did, at which CUDA sources.

A lease is short (docs/GPU.md, run-book), so each one should go on where the last one
stopped. The ledger is two files under results/gpu/: ledger.jsonl (one JSON object per
phase run, appended; what `gpu-session next` reads, shipped inside the bundle by
scripts/gpu_bundle.sh) and LEDGER.md (the same, for people).

  gpu_ledger.py cuda-hash SRC_DIR
      the hash of the CUDA sources (CUDA_SOURCE_DIRS under SRC_DIR): gpu_bundle.sh
      writes it into the bundle's MANIFEST.md, gpu-session into its summary
  gpu_ledger.py add SUMMARY [--dir results/gpu]
      appends the run a PHASE-summary.txt describes (its last line, `ledger-json: {...}`)
      to ledger.jsonl and LEDGER.md; a run already there is refused
  gpu_ledger.py next --ledger FILE --cuda-sources HASH --plan FILE|-
      prints `phase: NAME` and `why: ...`: the first phase of the plan (gpu-session --plan)
      one of whose steps has not passed in the ledger's latest record of it at HASH

Exit status: 0, or 2 for bad input (the file and line named; nothing written).
"""

import argparse
import hashlib
import json
import os
import sys

from mpbench import SOURCE_DIR

# What the CUDA binaries and their tests are made of: the backend, the scalar cores it
# compiles into its kernels (MPB_HD), the op-check table and the two GPU test folders.
# A change elsewhere (the runner, the CPU backend) does not make a passed GPU test stale.
CUDA_SOURCE_DIRS = ("backends/cuda", "ops", "opcheck", "tests/gpu", "tests/ops")
# A step passed when it ran and passed, or was an optional one (nsys missing, PyTorch's
# side without time left); failed, timeout, skipped (a needed tool missing), not-run and
# partial (a headline slice whose time ran out) did not.
PASSED = ("ok", "optional")


LEDGER_HEADER = ("# GPU lease ledger\n\nEach lent-GPU run of `bin/gpu-session`, appended by "
                 "`scripts/gpu_ledger.py add SUMMARY` (docs/GPU.md, run-book); the same records, one JSON "
                 "object a line, are in `ledger.jsonl`, which `gpu-session next` reads.\n\n")


class BadInput(Exception):
    pass


def cuda_sources_hash(src):
    """sha256 over (path, sha256 of content) of every file under CUDA_SOURCE_DIRS, sorted
    by path; the first 16 hex digits. Missing folders count as empty."""
    h = hashlib.sha256()
    for top in CUDA_SOURCE_DIRS:
        files = []
        for root, dirs, names in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files += [os.path.join(root, n) for n in names if not n.endswith(".pyc")]
        for path in sorted(files):
            rel = os.path.relpath(path, src)
            with open(path, "rb") as f:
                h.update(f"{rel}\0{hashlib.sha256(f.read()).hexdigest()}\n".encode())
    return h.hexdigest()[:16]


def read_ledger(path):
    """The ledger's records, oldest first; [] when the file does not exist."""
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                raise BadInput(f"{path}:{n}: not JSON: {e}")
            for key in ("phase", "cuda_sources", "steps", "date"):
                if key not in r:
                    raise BadInput(f"{path}:{n}: the record has no '{key}'")
            records.append(r)
    return records


def read_plan(f, name):
    """{phase: [step, ...]} in the plan's order, from `gpu-session --plan`."""
    plan = {}
    for n, line in enumerate(f, 1):
        if line.startswith("#") or not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3 or not parts[2].isdigit():
            raise BadInput(f"{name}:{n}: expected 'phase<TAB>step<TAB>seconds', got {line.strip()!r}")
        phase, step, _ = parts
        steps = plan.setdefault(phase, [])
        if step != "budget":
            steps.append(step)
    if not plan:
        raise BadInput(f"{name}: no phase in the plan")
    return plan


def latest_codes(records, cuda_sources, phase):
    """{step: code} from the latest record of each step of PHASE at CUDA_SOURCES."""
    codes = {}
    for r in records:
        if r["phase"] == phase and r["cuda_sources"] == cuda_sources:
            for s in r["steps"]:
                codes[s["name"]] = s["code"]
    return codes


def next_phase(plan, records, cuda_sources):
    """(phase, why): the first phase with a step not passed at CUDA_SOURCES. When every
    phase has passed, the last one (headline) again: more of 3090_bert.yaml, or the same
    on the other kind of GPU."""
    for phase, steps in plan.items():
        codes = latest_codes(records, cuda_sources, phase)
        if not codes:
            return phase, f"no run of '{phase}' at CUDA sources {cuda_sources} in the ledger"
        missing = [s for s in steps if codes.get(s) not in PASSED]
        if missing:
            said = ", ".join(f"{s} ({codes.get(s, 'never ran')})" for s in missing)
            return phase, f"'{phase}' has steps that have not passed at CUDA sources {cuda_sources}: {said}"
    last = list(plan)[-1]
    return last, f"every phase has passed at CUDA sources {cuda_sources}: '{last}' again"


def read_summary(path):
    """The run record on a summary's `ledger-json:` line."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    for n, line in enumerate(lines, 1):
        if line.startswith("ledger-json: "):
            try:
                r = json.loads(line[len("ledger-json: "):])
            except ValueError as e:
                raise BadInput(f"{path}:{n}: the ledger-json line is not JSON: {e}")
            for key in ("phase", "cuda_sources", "commit", "steps", "date", "gpu"):
                if key not in r:
                    raise BadInput(f"{path}:{n}: the ledger-json line has no '{key}'")
            if not r["cuda_sources"]:
                raise BadInput(f"{path}:{n}: the run has no CUDA sources hash (a bundle without one in MANIFEST.md)")
            return r
    raise BadInput(f"{path}: no 'ledger-json:' line (not a gpu-session summary, or its summary script failed)")


def markdown(r, summary_name):
    """LEDGER.md's section for one run."""
    counts = {}
    for s in r["steps"]:
        counts[s["code"]] = counts.get(s["code"], 0) + 1
    out = [f"## {r['date']} {r['phase']} on {r['gpu'] or 'no GPU named'}", "",
           f"- commit `{r['commit']}`, CUDA sources `{r['cuda_sources']}`",
           f"- driver {r.get('driver') or '?'}; cuDNN {r.get('cudnn') or '?'}; PyTorch {r.get('torch') or '?'}",
           f"- {r.get('elapsed_s', '?')} s of a {r.get('budget_s', '?')}-s budget; steps: "
           + ", ".join(f"{n} {c}" for c, n in sorted(counts.items())),
           f"- summary: `{summary_name}`", ""]
    out += ["| step | status | s |", "|---|---|---|"]
    out += [f"| {s['name']} | {s['status']} | {s.get('secs', '-')} |" for s in r["steps"]]
    figures = r.get("figures") or {}
    if figures:
        out += [""] + [f"- {k}: {v}" for k, v in figures.items()]
    return "\n".join(out) + "\n\n"


def add(summary, ledger_dir):
    r = read_summary(summary)
    jsonl = os.path.join(ledger_dir, "ledger.jsonl")
    for old in read_ledger(jsonl):
        if (old["date"], old["phase"], old.get("commit")) == (r["date"], r["phase"], r["commit"]):
            raise BadInput(f"{summary}: this run ({r['phase']} at {r['date']}) is already in {jsonl}")
    os.makedirs(ledger_dir, exist_ok=True)
    md = os.path.join(ledger_dir, "LEDGER.md")
    if not os.path.exists(md):
        with open(md, "w") as f:
            f.write(LEDGER_HEADER)
    with open(jsonl, "a") as f:
        f.write(json.dumps(r, sort_keys=True) + "\n")
    with open(md, "a") as f:
        f.write(markdown(r, os.path.basename(summary)))
    print(f"gpu_ledger: {r['phase']} of {r['date']} on {r['gpu'] or 'no GPU'} added to {jsonl} and {md}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("cuda-hash")
    h.add_argument("src")
    a = sub.add_parser("add")
    a.add_argument("summary")
    a.add_argument("--dir", default=os.path.join(SOURCE_DIR, "results", "gpu"))
    n = sub.add_parser("next")
    n.add_argument("--ledger", required=True)
    n.add_argument("--cuda-sources", required=True)
    n.add_argument("--plan", required=True, help="gpu-session --plan's output, or - for stdin")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "cuda-hash":
            if not os.path.isdir(os.path.join(args.src, "backends", "cuda")):
                raise BadInput(f"{args.src}: no backends/cuda here (not an mpbench source tree)")
            print(cuda_sources_hash(args.src))
        elif args.cmd == "add":
            add(args.summary, args.dir)
        else:
            if not args.cuda_sources:
                raise BadInput("--cuda-sources is empty (the bundle's MANIFEST.md names no CUDA sources hash)")
            if args.plan == "-":
                plan = read_plan(sys.stdin, "<stdin>")
            else:
                with open(args.plan) as f:
                    plan = read_plan(f, args.plan)
            phase, why = next_phase(plan, read_ledger(args.ledger), args.cuda_sources)
            print(f"phase: {phase}\nwhy: {why}")
    except BadInput as e:
        print(f"gpu_ledger: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
