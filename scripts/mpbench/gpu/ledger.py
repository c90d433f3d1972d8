#!/usr/bin/python3
"""The lease ledger: what each lent-GPU run of bin/gpu-session did, at which CUDA sources.

A lease is short (docs/GPU.md, run-book), so each one should go on where the last one
stopped. The ledger is two files under results/gpu/: ledger.jsonl (one JSON object per
phase run, appended; what `gpu-session next` reads, shipped inside the bundle by
scripts/gpu_bundle.sh) and LEDGER.md (the same, for people).

  gpu_ledger.py source-hashes SRC_DIR
      GROUP=HASH for each source group (mpbench.gpu.sources: device, gpu_tests, host,
      torch), comma-separated: gpu_bundle.sh writes the line into the bundle's MANIFEST.md
  gpu_ledger.py cuda-hash SRC_DIR
      the device group's hash alone (the ledger's `cuda_sources`, shown in LEDGER.md)
  gpu_ledger.py add SUMMARY [--dir results/gpu]
      appends the run a PHASE-summary.txt describes (its last line, `ledger-json: {...}`)
      to ledger.jsonl and LEDGER.md; a run already there is refused
  gpu_ledger.py next --ledger FILE --sources GROUP=HASH,... --plan FILE|-
      prints `phase: NAME`, `why: ...` and `reuse: STEP=DATE,...`: `first` until a bring-up has
      passed; then `lease`, whose steps that passed at the current hashes of the groups
      they run are reused, not run again (a test, doc or host-only change leaves the
      device group's hash, and so the GPU tests' results, as they were)

Exit status: 0, or 2 for bad input (the file and line named; nothing written).
"""

import argparse
import json
import os
import sys

from mpbench import SOURCE_DIR
from mpbench.gpu import sources

# A step passed when it ran and passed, or was an optional one (nsys missing, PyTorch's
# side without time left); failed, timeout, skipped (a needed tool missing), not-run and
# partial (a headline slice whose time ran out) did not.
PASSED = ("ok", "optional")


LEDGER_HEADER = ("# GPU lease ledger\n\nEach lent-GPU run of `bin/gpu-session`, appended by "
                 "`scripts/gpu_ledger.py add SUMMARY` (docs/GPU.md, run-book); the same records, one JSON "
                 "object a line, are in `ledger.jsonl`, which `gpu-session next` reads.\n\n")


class BadInput(Exception):
    pass


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
    """{phase: [Step, ...]} in the plan's order, from `gpu-session --plan`: lines of
    phase, step, seconds, and (since the per-step rule) the source groups the step runs
    (comma-separated, '-' for none) and when it runs ('always', or 'if-time': a lease's
    tail, run only when its whole limit fits in what is left)."""
    plan = {}
    for n, line in enumerate(f, 1):
        if line.startswith("#") or not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) not in (3, 5) or not parts[2].isdigit():
            raise BadInput(f"{name}:{n}: expected 'phase<TAB>step<TAB>seconds[<TAB>inputs<TAB>when]', "
                           f"got {line.strip()!r}")
        phase, step = parts[0], parts[1]
        inputs, when = (parts[3], parts[4]) if len(parts) == 5 else ("device", "always")
        groups = tuple(g for g in inputs.split(",") if g and g != "-")
        unknown = [g for g in groups if g not in sources.GROUPS]
        if unknown:
            raise BadInput(f"{name}:{n}: step {step!r} names unknown source groups {unknown} "
                           f"(known: {', '.join(sources.GROUPS)})")
        if when not in ("always", "if-time"):
            raise BadInput(f"{name}:{n}: step {step!r}: when must be 'always' or 'if-time', got {when!r}")
        steps = plan.setdefault(phase, [])
        if step != "budget":
            steps.append(Step(step, int(parts[2]), groups, when))
    if not plan:
        raise BadInput(f"{name}: no phase in the plan")
    return plan


class Step:
    """One step of the plan: its name, time limit, the source groups it runs, and when."""

    def __init__(self, name, limit, inputs, when):
        self.name, self.limit, self.inputs, self.when = name, limit, inputs, when


def parse_sources(text):
    """{group: hash} from 'device=0123..,host=..' (gpu-session passes MANIFEST.md's line)."""
    out = {}
    for part in (p for p in text.split(",") if p.strip()):
        group, sep, value = part.partition("=")
        if not sep or not value or group.strip() not in sources.GROUPS:
            raise BadInput(f"--sources: expected GROUP=HASH for the groups {', '.join(sources.GROUPS)}, got {part!r}")
        out[group.strip()] = value.strip()
    missing = [g for g in sources.GROUPS if g not in out]
    if missing:
        raise BadInput(f"--sources: no hash for {', '.join(missing)} (a bundle packed before the per-step rule?)")
    return out


def step_state(records, step, current):
    """(code, date) of STEP's latest run whose bundle had the same hashes as CURRENT for
    every group the step runs; (None, None) when none did. A step the lease reused (not
    run again) is not a run of it; records from before the per-step rule have no
    'sources' and match nothing."""
    code = date = None
    for r in records:
        recorded = r.get("sources") or {}
        if any(recorded.get(g) != current[g] for g in step.inputs):
            continue
        for s in r["steps"]:
            if s["name"] == step.name and s["code"] != "reused":
                code, date = s["code"], r["date"]
    return code, date


def brought_up(records):
    """Whether a `first` phase ever passed every step (the machine's bring-up: the
    environment, the tests with every launch synchronised, memcheck on the never-run
    kernels), at any sources: after that, a device change re-runs the slim gate."""
    return any(r["phase"] == "first" and r["steps"] and all(s["code"] in PASSED + ("reused",) for s in r["steps"])
               for r in records)


def next_lease(plan, records, current):
    """(phase, why, reuse): `first` until the ledger has a passed bring-up; then the
    `lease` phase, whose steps already passed at their inputs' current hashes are
    REUSE ({step: date}) and not run again."""
    if "first" in plan and not brought_up(records):
        return "first", "no passed 'first' (bring-up) in the ledger", {}
    if "lease" not in plan:
        raise BadInput("the plan has no 'lease' phase")
    reuse, stale = {}, []
    for step in plan["lease"]:
        code, date = step_state(records, step, current)
        if step.inputs and code == "ok":  # an optional step that did not run is nothing to reuse
            reuse[step.name] = date
        else:
            why = "never ran at these sources" if code is None else code
            stale.append(f"{step.name} ({why})")
    why = (f"re-running {len(stale)} step(s): {', '.join(stale)}" if stale else "every step has passed")
    if reuse:
        why += f"; reusing {len(reuse)} that passed at the same sources: {', '.join(reuse)}"
    return "lease", why, reuse


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
    for name in ("cuda-hash", "source-hashes"):
        sub.add_parser(name).add_argument("src")
    a = sub.add_parser("add")
    a.add_argument("summary")
    a.add_argument("--dir", default=os.path.join(SOURCE_DIR, "results", "gpu"))
    n = sub.add_parser("next")
    n.add_argument("--ledger", required=True)
    n.add_argument("--sources", required=True, help="GROUP=HASH,... (the bundle's MANIFEST.md line)")
    n.add_argument("--plan", required=True, help="gpu-session --plan's output, or - for stdin")
    args = ap.parse_args(argv)
    try:
        if args.cmd in ("cuda-hash", "source-hashes"):
            if not os.path.isdir(os.path.join(args.src, "backends", "cuda")):
                raise BadInput(f"{args.src}: no backends/cuda here (not an mpbench source tree)")
            hashes = sources.all_hashes(args.src)
            print(hashes["device"] if args.cmd == "cuda-hash" else ",".join(f"{g}={h}" for g, h in hashes.items()))
        elif args.cmd == "add":
            add(args.summary, args.dir)
        else:
            current = parse_sources(args.sources)
            if args.plan == "-":
                plan = read_plan(sys.stdin, "<stdin>")
            else:
                with open(args.plan) as f:
                    plan = read_plan(f, args.plan)
            phase, why, reuse = next_lease(plan, read_ledger(args.ledger), current)
            print(f"phase: {phase}\nwhy: {why}\nreuse: {','.join(f'{k}={v}' for k, v in reuse.items())}")
    except BadInput as e:
        print(f"gpu_ledger: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
