#!/usr/bin/python3
"""scripts/slurm/submit.sh against a real Slurm (Debian's slurmctld, slurmd,
munge) started on this machine by local_cluster.sh: one node, 2 CPUs, ports
on 127.0.0.1 (CTest label `slurm`; needs root; docs/SCALE.md).

A 6-cell MLP experiment (CPU, one OpenMP thread: deterministic) runs once
unsharded. Then submit.sh sends it as a 3-task array plus the dependent merge
job. The first task seen with a finished repeat on disk is requeued while it
runs (`scontrol requeue`: Slurm stops it with SIGTERM and queues it again);
it must resume (the repeats it had finished keep their start times, its log
says it skipped them, its manifest records SLURM_RESTART_COUNT=1), and the
merged set must have the unsharded run's cells, config hashes and per-step
losses, the tasks' states (manifest.scheduler, with the requeue counted), a
report, and every shard's machine.

Exit 77 (skipped) only when Slurm is not installed
(scripts/install_deps.sh --with-slurm installs it). Everything it starts it
stops, on failure and on SIGTERM too. About a minute; it gives up after
MPB_SLURM_DEADLINE seconds (default 170).
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("MPB_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
RUNNER = os.path.abspath(os.environ.get("MPB_RUNNER", os.path.join(SOURCE_DIR, "build", "runner")))
CLUSTER = os.path.join(HERE, "local_cluster.sh")
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from e2e_helpers import cells_of, write_mlp_experiment  # noqa: E402  (the e2e tests' result reader, experiment writer)
DEADLINE = time.time() + float(os.environ.get("MPB_SLURM_DEADLINE", "170"))
NAME = "slurm_tiny"
EXPERIMENT = dict(steps=40, warmup_steps=2, repeats=2, batch_size=32, width=32, input_dim=16, eval_samples=64,
                  matrix=["precision: [fp32, amp_bf16]", "model.width: [16, 32, 64]"], extra="device: cpu\n")


class Terminated(Exception):
    pass


def on_term(signum, frame):
    raise Terminated(f"signal {signum}")


def sh(args, env, check=True, timeout=120):
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def job_state(job, env):
    out = sh(["scontrol", "show", "job", "-o", job], env, check=False)
    states = {f.split("=", 1)[1] for line in out.splitlines() for f in line.split() if f.startswith("JobState=")}
    return states


def wait(what, predicate, step=0.2):
    while time.time() < DEADLINE:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"gave up waiting for {what}")


def finished_repeats(shard_dir):
    """cell id -> {repeat: started} of what the shard has on disk (cells/ and partial/)."""
    out = {}
    for f in glob.glob(os.path.join(shard_dir, "partial", "*.json")) + \
            glob.glob(os.path.join(shard_dir, "cells", "*.json")):
        try:
            c = json.load(open(f))
        except (OSError, ValueError):
            continue          # being renamed right now
        out.setdefault(c["cell_id"], {}).update({r["repeat"]: r["started"] for r in c["repeats"]})
    return out


def check(tmp, env, fails):
    exp = write_mlp_experiment(tmp, NAME, **EXPERIMENT)
    sh([RUNNER, exp, "--out", os.path.join(tmp, "ref"), "--quiet"], env)
    ref = cells_of(os.path.join(tmp, "ref", NAME))

    cluster = os.path.join(tmp, "cluster")
    os.makedirs(cluster)
    sh(["bash", CLUSTER, "start", cluster], env)
    env["SLURM_CONF"] = os.path.join(cluster, "slurm.conf")
    run = os.path.join(tmp, "run")
    out = sh(["bash", os.path.join(SOURCE_DIR, "scripts", "slurm", "submit.sh"), exp, "--shards", "3",
              "--gpus-per-task", "0", "--out", run, "--runner", RUNNER], env)
    array, merge = out.strip().splitlines()[-1].split()[1:3]
    shard_dirs = [os.path.join(run, "shards", f"{NAME}.shard-{i}-of-3") for i in range(3)]

    # Requeue the first task that is running with a finished repeat on disk.
    def running_with_work():
        for i, d in enumerate(shard_dirs):
            done = finished_repeats(d)
            if done and "RUNNING" in job_state(f"{array}_{i}", env):
                return i, done
        return None
    task, before = wait("a running shard with a finished repeat", running_with_work, step=0.05)
    sh(["scontrol", "requeue", f"{array}_{task}"], env)

    def merge_done():
        s = job_state(merge, env)
        return s if s & {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"} else None
    state = wait("the merge job", merge_done, step=0.5)
    logs = {os.path.basename(p): open(p).read() for p in glob.glob(os.path.join(run, "logs", "*.out"))}
    if state != {"COMPLETED"}:
        fails.append(f"the merge job ended {state}; logs:\n" + "\n".join(f"== {k}\n{v[-3000:]}" for k, v in logs.items()))
        return

    # The requeued task resumed: what it had finished stayed, and it said so.
    after = finished_repeats(shard_dirs[task])
    for cid, reps in before.items():
        for r, started in reps.items():
            if after.get(cid, {}).get(r) != started:
                fails.append(f"task {task} ran {cid} repeat {r} again after the requeue "
                             f"(started {started} -> {after.get(cid, {}).get(r)})")
    log = logs.get(f"shard-{task}.out", "")
    if log.count("mpbench: shard") < 2 or "skipped (--resume)" not in log:
        fails.append(f"task {task}'s log does not show a second start that skipped finished work:\n{log[-3000:]}")
    shard_env = json.load(open(os.path.join(shard_dirs[task], "manifest.json")))["shard"]["environment"]
    if shard_env.get("SLURM_RESTART_COUNT") != "1" or shard_env.get("SLURM_ARRAY_TASK_ID") != str(task):
        fails.append(f"task {task}'s manifest does not record its restart: {shard_env}")

    # The merged set is the unsharded run.
    merged_dir = os.path.join(run, "merged", NAME)
    merged = cells_of(merged_dir)
    if sorted(merged) != sorted(ref):
        fails.append(f"merged cells {sorted(merged)} != unsharded {sorted(ref)}")
    for cid, c in ref.items():
        m = merged.get(cid)
        if m and (m["config_hash"] != c["config_hash"] or
                  [r["loss"] for r in m["repeats"]] != [r["loss"] for r in c["repeats"]]):
            fails.append(f"{cid}: the merged config hash or per-step losses differ from the unsharded run's")
    manifest = json.load(open(os.path.join(merged_dir, "manifest.json")))
    sched = manifest.get("scheduler") or {}
    tasks = {t.get("task"): t for t in sched.get("tasks", [])}
    if sched.get("array_job_id") != array or sorted(tasks) != [0, 1, 2] or \
            any(t.get("state") != "COMPLETED" for t in tasks.values()):
        fails.append(f"manifest.scheduler does not hold the three tasks' final states: {sched}")
    elif tasks[task].get("restarts") != 1:
        fails.append(f"manifest.scheduler does not count task {task}'s requeue: {tasks[task]}")
    if [s.get("index") for s in manifest.get("shards", [])] != [0, 1, 2]:
        fails.append(f"manifest.shards: {manifest.get('shards')}")
    if not os.path.isfile(os.path.join(merged_dir, "report", "index.html")):
        fails.append("the merge job wrote no report")


def main():
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            print(f"skipped: Slurm is not installed ({tool} not found); "
                  "bash scripts/install_deps.sh --with-slurm installs it")
            return 77
    if os.geteuid() != 0:
        print("FAIL: this test starts munged, slurmctld and slurmd, which run jobs as root: run it as root")
        return 1
    signal.signal(signal.SIGTERM, on_term)   # ctest's timeout: still stop the daemons
    tmp = tempfile.mkdtemp(prefix="mpb-slurm-")
    os.chmod(tmp, 0o700)
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    env.pop("SLURM_CONF", None)
    fails = []
    t0 = time.time()
    try:
        check(tmp, env, fails)
    except (AssertionError, Terminated, subprocess.TimeoutExpired) as e:
        fails.append(str(e))
    finally:
        subprocess.run(["bash", CLUSTER, "stop", os.path.join(tmp, "cluster")], env=env)
        if fails:
            for log in glob.glob(os.path.join(tmp, "cluster", "*.log")):
                print(f"== {log} (last lines)\n" + "".join(open(log).readlines()[-15:]))
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print("FAIL:", f)
    print(f"test_slurm: {time.time() - t0:.0f} s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
