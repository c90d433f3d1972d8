#!/usr/bin/python3
"""A result set never holds a cell of another run (issue 33 defect 3; docs/RESULTS.md, "Guarantees").

Real runs of two experiments with identical cells, "rid" and "ridb" (so their
cells' config_hash match and only the run says they differ), "rid" unsharded
and as 2 shards. A cell file copied from "ridb", or from the unsharded run,
into a shard must make `runner merge` refuse (exit 2, the file and what
differs named); the same files copied into the unsharded set must make a
plain --resume refuse before it writes anything, and report.py and
compare.py refuse to read the set. Without strangers: the run id is in the
manifest and every cell, --resume keeps it, a fresh run draws a new one, and
the shards' ids are listed in the merged manifest, which report.py reads.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from e2e_helpers import RUNNER, SOURCE_DIR, report, write_mlp_experiment

ENV = dict(os.environ, OMP_NUM_THREADS="1")
SMALL = dict(steps=6, warmup_steps=1, repeats=1, batch_size=32, width=32, input_dim=16, eval_samples=32,
             matrix="fusion: [off, on]")
SCRIPTS = os.path.join(SOURCE_DIR, "scripts")


def run(*args):
    p = subprocess.run([*args], capture_output=True, text=True, env=ENV, timeout=600)
    return p.returncode, p.stdout + p.stderr


def script(name, *args):
    return run(sys.executable, os.path.join(SCRIPTS, name), *args)


def load(path):
    with open(path) as f:
        return json.load(f)


def cell_file(run_dir, cell="fusion=on"):
    return os.path.join(run_dir, "cells", cell + ".json")


def expect_refused(fails, what, code, out, path, *words):
    if code != 2:
        fails.append(f"{what}: exit {code}, expected 2:\n{out[-3000:]}")
    for text in (path, *words):
        if text not in out:
            fails.append(f"{what}: {text!r} not in its message:\n{out[-3000:]}")
    if "Traceback" in out:
        fails.append(f"{what}: a traceback:\n{out[-3000:]}")


def check_run_ids(fails, u, shards):
    for d in [u, *shards]:
        rid = load(os.path.join(d, "manifest.json")).get("run_id")
        if not rid:
            fails.append(f"{d}/manifest.json has no run_id")
        for c in ("fusion=off", "fusion=on"):
            if os.path.exists(cell_file(d, c)) and load(cell_file(d, c)).get("run_id") != rid:
                fails.append(f"{cell_file(d, c)}: run_id is not its manifest's {rid!r}")
    ids = {load(os.path.join(d, "manifest.json")).get("run_id") for d in [u, *shards]}
    if len(ids) != 3:
        fails.append(f"the unsharded run and the two shards should have 3 run ids, have {ids}")


def check_merge(fails, tmp, u, other, shards):
    owner = next(d for d in shards if os.path.exists(cell_file(d, "fusion=on"))
                 and "fusion=on" in load(os.path.join(d, "manifest.json"))["shard"]["cells"])
    code, out = run(RUNNER, "merge", os.path.join(tmp, "merged"), *shards)
    merged = os.path.join(tmp, "merged", "rid")
    if code != 0:
        fails.append(f"merging the shards as they ran: exit {code}\n{out}")
        return
    m = load(os.path.join(merged, "manifest.json"))
    shard_ids = [s.get("run_id") for s in m.get("shards", [])]
    if sorted(shard_ids) != sorted(load(os.path.join(d, "manifest.json"))["run_id"] for d in shards):
        fails.append(f"merged manifest shards[].run_id {shard_ids}")
    code, out = script("report.py", merged, "--out", os.path.join(tmp, "merged_report"))
    if code != 0:
        fails.append(f"report.py on the merged set: exit {code}\n{out[-3000:]}")

    target = cell_file(owner)
    keep = os.path.join(tmp, "kept-shard-cell.json")   # outside cells/: the runner sweeps what is there
    shutil.copy(target, keep)
    for source, words in ((cell_file(other), ("experiment 'ridb', this run's is 'rid'",)),
                          (cell_file(u), ("run_id '" + load(cell_file(u))["run_id"] + "'",))):
        shutil.copy(source, target)
        for extra in ([], ["--allow-mixed"]):
            code, out = run(RUNNER, "merge", *extra, os.path.join(tmp, "merged2"), *shards)
            expect_refused(fails, f"merge with {source} copied in {' '.join(extra)}", code, out, target, *words)
        if os.path.exists(os.path.join(tmp, "merged2")):
            fails.append(f"a refused merge wrote {tmp}/merged2")
    shutil.move(keep, target)


def check_resume_and_scripts(fails, tmp, u, other, shard_cell):
    target = cell_file(u)
    keep = os.path.join(tmp, "kept-cell.json")
    shutil.copy(target, keep)
    yaml_path = os.path.join(tmp, "rid.yaml")
    for source, words in ((cell_file(other), ("experiment 'ridb'", "another experiment")),
                          (shard_cell, ("run_id", "another run"))):
        shutil.copy(source, target)
        manifest_before = open(os.path.join(u, "manifest.json")).read()
        code, out = run(RUNNER, yaml_path, "--out", os.path.dirname(u), "--resume", "--quiet")
        expect_refused(fails, f"--resume with {source} copied in", code, out, target, words[0])
        if open(os.path.join(u, "manifest.json")).read() != manifest_before:
            fails.append(f"--resume with {source} copied in rewrote the manifest")
        code, out = script("report.py", u, "--out", os.path.join(tmp, "report_stranger"))
        expect_refused(fails, f"report.py with {source} copied in", code, out, target, words[1])
        code, out = script("compare.py", u, u)
        expect_refused(fails, f"compare.py with {source} copied in", code, out, target, words[1])
    # Issue 43 item 2: a fresh run of the baseline cell, refused for the stranger still in cells/,
    # moves nothing: the baseline's file stays and stale/ gets no new entry.
    stale = os.path.join(u, "stale")
    stale_before = sorted(os.listdir(stale)) if os.path.isdir(stale) else []
    code, out = run(RUNNER, yaml_path, "--out", os.path.dirname(u), "--filter", "fusion=off", "--quiet")
    expect_refused(fails, "a fresh --filter fusion=off run with a stranger in cells/", code, out, target, "run_id")
    stale_after = sorted(os.listdir(stale)) if os.path.isdir(stale) else []
    if not os.path.exists(cell_file(u, "fusion=off")) or stale_after != stale_before:
        fails.append(f"a refused run moved files: the baseline's file there {os.path.exists(cell_file(u, 'fusion=off'))}, "
                     f"stale/ {stale_before} -> {stale_after}")
    shutil.move(keep, target)

    rid = load(os.path.join(u, "manifest.json"))["run_id"]
    code, out = run(RUNNER, yaml_path, "--out", os.path.dirname(u), "--resume", "--quiet")
    if code != 0 or load(os.path.join(u, "manifest.json"))["run_id"] != rid:
        fails.append(f"--resume of the finished run: exit {code}, run_id should stay {rid}\n{out[-2000:]}")
    code, out = run(RUNNER, yaml_path, "--out", os.path.dirname(u), "--quiet")
    fresh = load(os.path.join(u, "manifest.json"))["run_id"]
    if code != 0 or fresh == rid or load(cell_file(u))["run_id"] != fresh:
        fails.append(f"a fresh run: exit {code}, run_id {fresh} should be new (was {rid}) and in its cells\n"
                     f"{out[-2000:]}")


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="mpb_runid_") as tmp:
        paths = {name: write_mlp_experiment(tmp, name, **SMALL) for name in ("rid", "ridb")}
        for name, out_dir in (("rid", "u"), ("ridb", "u")):
            code, out = run(RUNNER, paths[name], "--out", os.path.join(tmp, out_dir), "--quiet")
            if code != 0:
                return report([f"runner {name}: exit {code}\n{out}"])
        for i in range(2):
            code, out = run(RUNNER, paths["rid"], "--out", os.path.join(tmp, "s"), "--shard", f"{i}/2", "--quiet")
            if code != 0:
                return report([f"runner rid --shard {i}/2: exit {code}\n{out}"])
        u, other = os.path.join(tmp, "u", "rid"), os.path.join(tmp, "u", "ridb")
        shards = [os.path.join(tmp, "s", f"rid.shard-{i}-of-2") for i in range(2)]
        # The premise: a copied cell's config_hash matches, so only the run can tell.
        if load(cell_file(u))["config_hash"] != load(cell_file(other))["config_hash"]:
            fails.append("rid's and ridb's cells have different config hashes: the test proves nothing")
        check_run_ids(fails, u, shards)
        check_merge(fails, tmp, u, other, shards)
        shard_cell = next(cell_file(d) for d in shards if os.path.exists(cell_file(d)))
        check_resume_and_scripts(fails, tmp, u, other, shard_cell)
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
