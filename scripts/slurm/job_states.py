#!/usr/bin/python3
"""The states of a Slurm array job's tasks, as JSON for `runner merge --scheduler FILE`
(manifest.scheduler of the merged set; docs/SCALE.md).

    job_states.py ARRAY_JOB_ID [--out FILE]

From `sacct` (every attempt of a task with --duplicates, so a requeued task
shows its REQUEUED attempt and the one that finished), or, where the cluster
keeps no accounting database (sacct: "accounting storage is disabled"), from
`scontrol show job`, which knows a finished job for MinJobAge seconds and
counts its requeues (Restarts=). The JSON says which source it used and why.
Exit status: 0 written; 1 neither command answered (the message says why).
"""

import argparse
import datetime
import json
import re
import subprocess
import sys

SACCT_FIELDS = ["JobID", "JobName", "State", "ExitCode", "Start", "End", "Elapsed", "NodeList"]
TASK_ID = re.compile(r"^(\d+)_(\d+)$")             # 1234_5: one array task (not a step like 1234_5.batch)
SCONTROL_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z:/]*)=(\S*)")


def parse_sacct(text):
    """`sacct --parsable2 --noheader --duplicates --format=SACCT_FIELDS` -> {task: [attempt, ...]} in order."""
    tasks = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS):
            continue
        row = dict(zip(SACCT_FIELDS, parts))
        m = TASK_ID.match(row["JobID"])
        if not m:
            continue
        tasks.setdefault(int(m.group(2)), []).append({
            "job_id": row["JobID"], "state": row["State"].split()[0] if row["State"] else "",
            "exit_code": row["ExitCode"], "start": row["Start"], "end": row["End"],
            "elapsed": row["Elapsed"], "node": row["NodeList"]})
    return tasks


def parse_scontrol(text):
    """`scontrol show job -o ARRAY_JOB_ID` (one line per task) -> {task: [its last attempt]}."""
    tasks = {}
    for line in text.splitlines():
        fields = dict(SCONTROL_PAIR.findall(line))
        task = fields.get("ArrayTaskId", "")
        if not task.isdigit():
            continue                                 # a pending range such as 3-5: no task has run yet
        tasks[int(task)] = [{
            "job_id": f"{fields.get('ArrayJobId', '')}_{task}", "state": fields.get("JobState", ""),
            "exit_code": fields.get("ExitCode", ""), "start": fields.get("StartTime", ""),
            "end": fields.get("EndTime", ""), "elapsed": fields.get("RunTime", ""),
            "node": fields.get("NodeList", ""), "restarts": int(fields.get("Restarts", "0") or 0),
            "slurm_job_id": fields.get("JobId", "")}]
    return tasks


def summarize(tasks):
    """Per task, in task order: the final attempt's fields, how often it was requeued, and every attempt."""
    out = []
    for task in sorted(tasks):
        attempts = tasks[task]
        final = dict(attempts[-1])
        restarts = final.pop("restarts", None)
        final.pop("slurm_job_id", None)
        final.update(task=task, restarts=restarts if restarts is not None else len(attempts) - 1,
                     attempts=attempts)
        out.append(final)
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, (p.stderr or p.stdout).strip()


def collect(array_job_id):
    doc = {"scheduler": "slurm", "array_job_id": str(array_job_id),
           "collected": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    code, out, err = run(["sacct", "-j", str(array_job_id), "--duplicates", "--parsable2", "--noheader",
                          "--format=" + ",".join(SACCT_FIELDS)])
    tasks = parse_sacct(out) if code == 0 else {}
    if tasks:
        doc.update(source="sacct --duplicates", tasks=summarize(tasks))
        return doc
    why = err or "sacct listed no task of the job"
    code, out, err2 = run(["scontrol", "show", "job", "-o", str(array_job_id)])
    tasks = parse_scontrol(out) if code == 0 else {}
    if not tasks:
        raise RuntimeError(f"sacct: {why}; scontrol show job: {err2 or 'no task of the job'}")
    doc.update(source="scontrol show job", why_not_sacct=why, tasks=summarize(tasks))
    return doc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("array_job_id")
    p.add_argument("--out", help="write the JSON here (default: standard output)")
    args = p.parse_args(argv)
    if not args.array_job_id.isdigit():
        p.error(f"ARRAY_JOB_ID must be a job number, got {args.array_job_id!r}")
    try:
        doc = collect(args.array_job_id)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"job_states.py: error: {e}", file=sys.stderr)
        return 1
    text = json.dumps(doc, indent=2) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
