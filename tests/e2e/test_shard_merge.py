#!/usr/bin/python3
"""--shard i/N, runner merge, and a shard resumed after SIGTERM (docs/SCALE.md).

A 6-cell x 2-repeat MLP experiment runs once unsharded (the reference), then
as 3 shards; shard 1 is stopped with SIGTERM once it has a finished repeat on
disk and completed with --resume. The merge of the 3 shards must equal the
reference: the same cells, config hashes and bit-identical per-step losses
(the CPU backend is deterministic for a seed and thread count), the
baseline's repeats once (shard 0's), every shard's machine in the manifest,
and a set report.py and compare.py read. Then what merge must refuse (a
shard missing or given twice, a different config hash or commit unless
--allow-mixed, a missing cell, an existing OUT), and shards relabelled as
other machines: compare.py --generations across two merged sets, and a
merged set whose shards ran on different machines is never gated as a
regression.
"""

import csv
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from e2e_helpers import RUNNER, SOURCE_DIR, cells_of, report, write_mlp_experiment

ENV = dict(os.environ, OMP_NUM_THREADS="1")  # one thread: deterministic and quick
NAME = "sm"
SCRIPTS = os.path.join(SOURCE_DIR, "scripts")


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=600, **kw)
    return p.returncode, p.stdout + p.stderr


def runner(*args):
    return run([RUNNER, *args])


def losses(cell):
    return [(r["repeat"], r["loss"]) for r in cell["repeats"]]


def shard_dir(root, i, n=3):
    return os.path.join(root, f"{NAME}.shard-{i}-of-{n}")


def relabel(src_root, dst_root, label, shards):
    """Copies the shard directories, naming the device `label` in those of `shards` (a synthetic machine)."""
    dirs = []
    for i in range(3):
        dst = shard_dir(dst_root, i)
        shutil.copytree(shard_dir(src_root, i), dst)
        if i in shards:
            path = os.path.join(dst, "manifest.json")
            m = json.load(open(path))
            m["device"]["name"] = label
            json.dump(m, open(path, "w"), indent=2)
        dirs.append(dst)
    return dirs


def machine_column_fails(merged_dir, commits, what):
    """summary.csv's device, run id and commit columns of a merged set: each row its cell file's
    device and run id (its shard's) and the commit that shard's manifest gave (`commits`: run id ->
    commit), so rows of several sets concatenate without a join against manifest.json."""
    cells = cells_of(merged_dir)
    with open(os.path.join(merged_dir, "summary.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    fails = []
    for row in rows:
        cell = cells.get(row["cell_id"], {})
        want = (cell.get("device", {}).get("kind"), cell.get("device", {}).get("name"), cell.get("run_id"),
                commits.get(cell.get("run_id")))
        got = (row.get("device"), row.get("device_name"), row.get("run_id"), row.get("commit"))
        if got != want or not all(want):
            fails.append(f"{what}: summary.csv row {row['cell_id']}: device, name, run id, commit {got}, "
                         f"expected {want}")
    return fails


def main():
    fails = []
    tmp = tempfile.mkdtemp(prefix="mpb_shard_")
    try:
        yaml_path = write_mlp_experiment(
            tmp, NAME, steps=12, warmup_steps=2, repeats=2, batch_size=32, width=32, input_dim=16,
            eval_samples=64, matrix="precision: [fp32, amp_bf16]\n  model.width: [16, 32, 64]")
        ref_root, shard_root = os.path.join(tmp, "ref"), os.path.join(tmp, "shards")
        code, out = runner(yaml_path, "--device", "cpu", "--out", ref_root, "--quiet")
        if code != 0:
            return report([f"unsharded run exited {code}:\n{out}"])
        ref = cells_of(os.path.join(ref_root, NAME))
        ref_manifest = json.load(open(os.path.join(ref_root, NAME, "manifest.json")))

        # --dry-run --shard lists each share; together they are the matrix, each cell once.
        listed = {}
        for i in range(3):
            code, out = runner(yaml_path, "--dry-run", "--shard", f"{i}/3", "--assume-gpu", "a100")
            if code != 0:
                fails.append(f"--dry-run --shard {i}/3 exited {code}:\n{out}")
            if f"shard {i}/3:" not in out:
                fails.append(f"--dry-run --shard {i}/3 does not say which share it lists:\n{out}")
            for line in out.splitlines():
                words = line.split()
                if len(words) >= 4 and words[0].isdigit() and "=" in words[3] and "(baseline: a copy" not in line:
                    listed.setdefault(words[3], []).append(i)
        if sorted(listed) != sorted(ref) or any(len(v) != 1 for v in listed.values()):
            fails.append(f"the dry-run shares are not the matrix, each cell once: {listed} vs {sorted(ref)}")
        for bad in (["--shard", "3/3"], ["--shard", "1/7"], ["--shard", "x"]):
            code, out = runner(yaml_path, "--dry-run", *bad)
            if code != 2 or "--shard" not in out:
                fails.append(f"{bad}: expected exit 2 naming --shard, got {code}:\n{out}")

        # Shards 0 and 2 straight through; shard 1 stopped (SIGTERM) after a finished repeat, then resumed.
        for i in (0, 2):
            code, out = runner(yaml_path, "--device", "cpu", "--out", shard_root, "--shard", f"{i}/3", "--quiet")
            if code != 0:
                fails.append(f"shard {i}/3 exited {code}:\n{out}")
        s1 = shard_dir(shard_root, 1)
        # Each step sleeps 10 ms (--inject-step-delay-ms) so that a repeat lasts long enough for
        # this loop to see its record on a fast machine (otherwise the whole shard can finish
        # between two looks); the resumed run below does not, and the merge keeps its losses only.
        p = subprocess.Popen([RUNNER, yaml_path, "--device", "cpu", "--out", shard_root, "--shard", "1/3",
                              "--order", "sequential", "--inject-step-delay-ms", "10"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
        first = None
        deadline = time.time() + 300
        while first is None and p.poll() is None and time.time() < deadline:
            found = glob.glob(os.path.join(s1, "partial", "*.json")) + glob.glob(os.path.join(s1, "cells", "*.json"))
            if found:  # records are renamed into place whole
                try:
                    first = json.load(open(found[0]))
                except FileNotFoundError:  # a partial record that became the cell's record meanwhile: look again
                    continue
                p.send_signal(signal.SIGTERM)
            time.sleep(0.005)
        _, err = p.communicate(timeout=300)
        if first is None or p.returncode != 130:
            fails.append(f"shard 1/3 was not stopped by SIGTERM after its first repeat (exit {p.returncode}):\n{err}")
        code, out = runner(yaml_path, "--device", "cpu", "--out", shard_root, "--shard", "1/3",
                           "--order", "sequential", "--resume")
        if code != 0:
            fails.append(f"shard 1/3 --resume exited {code}:\n{out}")
        if "skipped (--resume)" not in out:
            fails.append(f"the resumed shard did not skip what it had finished:\n{out}")
        if first is not None:
            kept = cells_of(s1).get(first["cell_id"])
            before = {r["repeat"]: r["started"] for r in first["repeats"]}
            after = {r["repeat"]: r["started"] for r in (kept or {}).get("repeats", [])}
            if not kept or any(after.get(k) != v for k, v in before.items()):
                fails.append(f"shard 1/3 ran {first['cell_id']}'s finished repeats again: {before} -> {after}")

        manifests = [json.load(open(os.path.join(shard_dir(shard_root, i), "manifest.json"))) for i in range(3)]
        for i, m in enumerate(manifests):
            if m.get("shard", {}).get("index") != i or m["shard"].get("count") != 3:
                fails.append(f"shard {i}'s manifest does not record its shard: {m.get('shard')}")

        # The merge equals the unsharded run.
        merged_root = os.path.join(tmp, "merged")
        dirs = [shard_dir(shard_root, i) for i in range(3)]
        code, out = runner("merge", merged_root, *dirs)
        if code != 0:
            return report(fails + [f"merge exited {code}:\n{out}"])
        merged_dir = os.path.join(merged_root, NAME)
        merged = cells_of(merged_dir)
        mm = json.load(open(os.path.join(merged_dir, "manifest.json")))
        if sorted(merged) != sorted(ref):
            fails.append(f"merged cells {sorted(merged)} != unsharded {sorted(ref)}")
        for cid, c in ref.items():
            m = merged.get(cid)
            if m is None:
                continue
            if m["config_hash"] != c["config_hash"]:
                fails.append(f"{cid}: config hash {m['config_hash']} != {c['config_hash']}")
            if losses(m) != losses(c):
                fails.append(f"{cid}: per-step losses differ from the unsharded run")
            if m["is_baseline"] != c["is_baseline"]:
                fails.append(f"{cid}: is_baseline {m['is_baseline']} != {c['is_baseline']}")
        if mm.get("cell_config_hashes") != ref_manifest["cell_config_hashes"] or mm.get("cells") != ref_manifest["cells"]:
            fails.append("the merged manifest's cells or cell_config_hashes differ from the unsharded run's")
        base_id = next(cid for cid, c in ref.items() if c["is_baseline"])
        shard0_base = cells_of(shard_dir(shard_root, 0)).get(base_id)
        if not shard0_base or merged.get(base_id, {}).get("repeats") != shard0_base["repeats"]:
            fails.append("the merged baseline is not shard 0's (its repeats once)")
        if [s.get("index") for s in mm.get("shards", [])] != [0, 1, 2] or \
                any("hostname" not in (s.get("machine") or {}) for s in mm.get("shards", [])):
            fails.append(f"manifest.shards does not keep each shard with its machine: {mm.get('shards')}")
        if mm.get("merged", {}).get("mixed_machines") is not False or "shard" in mm:
            fails.append(f"manifest.merged: {mm.get('merged')}")
        with open(os.path.join(merged_dir, "summary.csv")) as f:
            if len(f.read().strip().splitlines()) != len(ref) + 1:
                fails.append("summary.csv does not have one row per cell")
        shard_commits = {m["run_id"]: m["git_commit"] for m in manifests}
        if len(shard_commits) != 3:
            fails.append(f"the shards do not have a run id each: {sorted(shard_commits)}")
        fails += machine_column_fails(merged_dir, shard_commits, "merge")
        code, out = run([sys.executable, os.path.join(SCRIPTS, "report.py"), merged_dir])
        if code != 0:
            fails.append(f"report.py on the merged set exited {code}:\n{out[-3000:]}")
        code, out = run([sys.executable, os.path.join(SCRIPTS, "compare.py"), os.path.join(ref_root, NAME), merged_dir])
        if code not in (0, 1) or "error" in out.lower():  # 1 would be a timing verdict, which this test does not judge
            fails.append(f"compare.py unsharded vs merged exited {code}:\n{out[-3000:]}")

        # What merge refuses, writing nothing.
        def refused(args, words, what):
            out_root = os.path.join(tmp, "refused")
            code, text = runner("merge", out_root, *args)
            if code != 2 or any(w not in text for w in words):
                fails.append(f"{what}: expected exit 2 with {words}, got {code}:\n{text}")
            if os.path.exists(os.path.join(out_root, NAME)):
                fails.append(f"{what}: the refused merge wrote {out_root}/{NAME}")
        refused(dirs[:2], ["2/3", "not given"], "a shard missing")
        refused(dirs + [dirs[1]], ["1/3", "given twice"], "a shard given twice")
        refused([os.path.join(ref_root, NAME)] + dirs, ['no "shard"'], "an unsharded run")
        code, out = runner("merge", merged_root, *dirs)
        if code != 2 or "exists and is not empty" not in out or len(cells_of(merged_dir)) != len(ref):
            fails.append(f"merging onto an existing set: expected exit 2 and the set untouched, got {code}:\n{out}")
        for key, value in (("config_hash", "0123456789abcdef"), ("git_commit", "deadbeef")):
            other = os.path.join(tmp, f"other_{key}")
            shutil.copytree(dirs[2], other)
            path = os.path.join(other, "manifest.json")
            m = json.load(open(path))
            m[key] = value
            json.dump(m, open(path, "w"))
            refused(dirs[:2] + [other], [key, "--allow-mixed"], f"a shard with another {key}")
            code, out = runner("merge", os.path.join(tmp, f"mixed_{key}"), "--allow-mixed", *dirs[:2], other)
            mixed = json.load(open(os.path.join(tmp, f"mixed_{key}", NAME, "manifest.json")))["merged"]["mixed"] \
                if code == 0 else []
            if code != 0 or not any(key in x for x in mixed):
                fails.append(f"--allow-mixed with another {key}: exit {code}, merged.mixed {mixed}:\n{out}")
            elif key == "git_commit":  # shard 2's cells name the commit their shard said, the others theirs
                commits = dict(shard_commits, **{manifests[2]["run_id"]: value})
                fails += machine_column_fails(os.path.join(tmp, f"mixed_{key}", NAME), commits, "mixed commits")
        gone = os.path.join(tmp, "gone")
        shutil.copytree(dirs[1], gone)
        victim_id = manifests[1]["shard"]["cells"][-1]  # a cell of its share, not its baseline copy
        victim = next(f for f in glob.glob(os.path.join(gone, "cells", "*.json"))
                      if json.load(open(f))["cell_id"] == victim_id)
        os.remove(victim)
        refused([dirs[0], gone, dirs[2]], [victim_id, "--resume"], "a missing cell")

        # Machines: two merged sets from "different machines" (a synthetic label) side by side,
        # and a set whose shards ran on two machines, which compare.py never gates.
        b_dirs = relabel(shard_root, os.path.join(tmp, "b_shards"), "synthetic-gpu-B", {0, 1, 2})
        code, out = runner("merge", os.path.join(tmp, "b"), *b_dirs)
        if code != 0:
            fails.append(f"merge of relabelled shards exited {code}:\n{out}")
        compare = [sys.executable, os.path.join(SCRIPTS, "compare.py")]
        code, out = run(compare + ["--generations", merged_dir, os.path.join(tmp, "b", NAME)])
        if code != 0 or "synthetic-gpu-B" not in out or "Generation table" not in out:
            fails.append(f"compare.py --generations over two merged sets exited {code}:\n{out[-3000:]}")
        c_dirs = relabel(shard_root, os.path.join(tmp, "c_shards"), "synthetic-gpu-C", {1})
        code, out = runner("merge", os.path.join(tmp, "c"), *c_dirs)
        cm = json.load(open(os.path.join(tmp, "c", NAME, "manifest.json"))) if code == 0 else {}
        if code != 0 or cm.get("merged", {}).get("mixed_machines") is not True or \
                "synthetic-gpu-C (shard 1)" not in cm.get("device", {}).get("name", ""):
            fails.append(f"a merge of shards on two machines does not say so (exit {code}): {cm.get('device')}\n{out}")
        code, out = run([sys.executable, os.path.join(SCRIPTS, "report.py"), os.path.join(tmp, "c", NAME)])
        if code != 0:
            fails.append(f"report.py on a mixed-machine merged set exited {code}:\n{out[-3000:]}")
        shutil.copytree(os.path.join(tmp, "c", NAME), os.path.join(tmp, "c2", NAME))
        for base in (merged_dir, os.path.join(tmp, "c2", NAME)):
            code, out = run(compare + [base, os.path.join(tmp, "c", NAME)])
            if code != 0 or "generational" not in out or "REGRESSED" in out:
                fails.append(f"compare.py {base} vs a mixed-machine set gated it (exit {code}):\n{out[-3000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
