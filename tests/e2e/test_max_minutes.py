#!/usr/bin/python3
"""--max-minutes: a run in slices (docs/RESULTS.md, exit code 5).

A 2-cell x 2-repeat MLP experiment runs with a budget far shorter than its
set-up (--max-minutes 0.0001): exactly one repeat must run (every slice makes
progress), then the runner stops before the next one with exit code 5, a
message naming --resume, the finished repeat kept (partial/), and a manifest
that says why it stopped and is not "finished". Slices with --resume and the
same budget then go on one repeat each until the run finishes (exit 0): 4
slices in all. The final set must equal an uninterrupted run's: the same
cells and bit-identical per-step losses (the CPU backend is deterministic for
a seed and thread count).

A budget that stops after every repeat would also pass that, whatever the
clock said; so the same experiment also runs once with a generous budget
(--max-minutes 1000): it must finish in that one invocation (exit 0, every
cell finished with the uninterrupted run's losses, a manifest that is
"finished" and has no "stopped").
"""

import json
import os
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, cells_of, report, write_mlp_experiment

ENV = dict(os.environ, OMP_NUM_THREADS="1")


def run(yaml_path, out, *extra):
    p = subprocess.run([RUNNER, yaml_path, "--device", "cpu", "--out", out, "--quiet", *extra],
                       capture_output=True, text=True, timeout=600, env=ENV)
    return p.returncode, p.stderr


def losses(run_dir):
    return {cid: [(r["repeat"], r["loss"]) for r in c["repeats"]] for cid, c in cells_of(run_dir).items()}


def main():
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = write_mlp_experiment(tmp, "mm", steps=12, warmup_steps=2, repeats=2, batch_size=32, width=32,
                                         input_dim=16, eval_samples=32, matrix="fusion: [off, on]",
                                         baseline="fusion: off")
        ref_out, out = os.path.join(tmp, "ref"), os.path.join(tmp, "sliced")
        code, err = run(yaml_path, ref_out)
        if code != 0:
            return report([f"the uninterrupted run exited {code}:\n{err}"])

        generous_out = os.path.join(tmp, "generous")
        code, err = run(yaml_path, generous_out, "--max-minutes", "1000")
        g = os.path.join(generous_out, "mm")
        if code != 0:
            fails.append(f"the run with --max-minutes 1000 exited {code}, expected 0 (one invocation):\n{err}")
        if losses(g) != losses(os.path.join(ref_out, "mm")):
            fails.append(f"the run with --max-minutes 1000 left cells {sorted(cells_of(g))} or per-step losses "
                         "that differ from the uninterrupted run's")
        manifest_path = os.path.join(g, "manifest.json")
        manifest = json.load(open(manifest_path)) if os.path.isfile(manifest_path) else {}
        if not manifest.get("finished") or "stopped" in manifest:
            fails.append(f"the run with --max-minutes 1000: manifest finished {manifest.get('finished')}, "
                         f"stopped {manifest.get('stopped')}")

        code, err = run(yaml_path, out, "--max-minutes", "0.0001")
        d = os.path.join(out, "mm")
        if code != 5:
            fails.append(f"the first slice exited {code}, expected 5:\n{err}")
        if "--max-minutes" not in err or "--resume" not in err:
            fails.append(f"the first slice's message names neither --max-minutes nor --resume:\n{err}")
        partial = os.path.join(d, "partial")
        kept = sorted(os.listdir(partial)) if os.path.isdir(partial) else []
        if len(kept) != 1 or cells_of(d):
            fails.append(f"after the first slice: partial/ {kept}, cells {sorted(cells_of(d))}; expected one "
                         "partial cell with one repeat and no finished cell")
        manifest = json.load(open(os.path.join(d, "manifest.json")))
        if manifest.get("stopped", {}).get("reason") != "max_minutes" or manifest.get("finished"):
            fails.append(f"the first slice's manifest: stopped {manifest.get('stopped')}, "
                         f"finished {manifest.get('finished')}")

        slices = 1
        while code == 5 and slices < 10:
            code, err = run(yaml_path, out, "--resume", "--max-minutes", "0.0001")
            slices += 1
        if code != 0:
            fails.append(f"slice {slices} exited {code}:\n{err}")
        if slices != 4:
            fails.append(f"the run took {slices} slices, expected 4 (one repeat each)")
        if losses(d) != losses(os.path.join(ref_out, "mm")):
            fails.append("the sliced run's cells or per-step losses differ from the uninterrupted run's")
        manifest = json.load(open(os.path.join(d, "manifest.json")))
        if not manifest.get("finished") or "stopped" in manifest:
            fails.append(f"the last slice's manifest: finished {manifest.get('finished')}, "
                         f"stopped {manifest.get('stopped')}")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
