#!/usr/bin/python3
"""scripts/slurm/job_states.py: a Slurm array's task states from sacct (every
attempt: a requeued task has a REQUEUED attempt before the one that finished)
or, where the cluster keeps no accounting, from scontrol (Restarts=). The
parsers run on text captured from Slurm 22.05; the command falls back from
sacct to scontrol with fake commands on PATH."""

import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

import script_test_helpers  # noqa: F401  (puts scripts/ on sys.path)
from script_test_helpers import PYTHON, SCRIPTS

sys.path.insert(0, os.path.join(SCRIPTS, "slurm"))
import job_states  # noqa: E402

SACCT = """\
41_0|mpb-x|COMPLETED|0:0|2026-11-24T00:02:13|2026-11-24T00:02:15|00:00:02|mpbnode
41_0.batch|batch|COMPLETED|0:0|2026-11-24T00:02:13|2026-11-24T00:02:15|00:00:02|mpbnode
41_1|mpb-x|REQUEUED|0:15|2026-11-24T00:02:13|2026-11-24T00:02:14|00:00:01|mpbnode
41_1.batch|batch|CANCELLED|0:15|2026-11-24T00:02:13|2026-11-24T00:02:14|00:00:01|mpbnode
41_1|mpb-x|COMPLETED|0:0|2026-11-24T00:02:30|2026-11-24T00:02:33|00:00:03|mpbnode
41_2|mpb-x|CANCELLED by 0|0:0|2026-11-24T00:02:13|2026-11-24T00:02:20|00:00:07|mpbnode
"""

SCONTROL = (
    "JobId=42 ArrayJobId=41 ArrayTaskId=1 JobName=mpb-x UserId=root(0) JobState=COMPLETED Reason=None "
    "Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:03 "
    "StartTime=2026-11-24T00:02:30 EndTime=2026-11-24T00:02:33 Partition=p AllocNode:Sid=localhost:1 "
    "NodeList=mpbnode BatchHost=mpbnode ReqB:S:C:T=0:0:*:* Command=/x/shard.sbatch\n"
    "JobId=41 ArrayJobId=41 ArrayTaskId=0 JobName=mpb-x JobState=COMPLETED Restarts=0 ExitCode=0:0 "
    "RunTime=00:00:02 StartTime=2026-11-24T00:02:13 EndTime=2026-11-24T00:02:15 NodeList=mpbnode\n"
    "JobId=43 ArrayJobId=41 ArrayTaskId=2-4 JobName=mpb-x JobState=PENDING Restarts=0 NodeList=\n")


class Parsers(unittest.TestCase):

    def test_sacct_keeps_every_attempt_of_a_task_and_skips_steps(self):
        tasks = job_states.summarize(job_states.parse_sacct(SACCT))
        self.assertEqual([t["task"] for t in tasks], [0, 1, 2])
        requeued = tasks[1]
        self.assertEqual(requeued["state"], "COMPLETED")
        self.assertEqual(requeued["restarts"], 1)
        self.assertEqual([a["state"] for a in requeued["attempts"]], ["REQUEUED", "COMPLETED"])
        self.assertEqual(tasks[2]["state"], "CANCELLED")       # "CANCELLED by 0" -> the state alone
        self.assertEqual(tasks[0]["restarts"], 0)
        self.assertEqual(tasks[0]["node"], "mpbnode")

    def test_scontrol_counts_restarts_and_skips_pending_ranges(self):
        tasks = job_states.summarize(job_states.parse_scontrol(SCONTROL))
        self.assertEqual([t["task"] for t in tasks], [0, 1])
        self.assertEqual(tasks[1]["restarts"], 1)
        self.assertEqual(tasks[1]["job_id"], "41_1")
        self.assertEqual(tasks[1]["elapsed"], "00:00:03")

    def test_garbage_is_no_task(self):
        self.assertEqual(job_states.parse_sacct("sacct: error: something\n\n"), {})
        self.assertEqual(job_states.parse_scontrol("slurm_load_jobs error: Invalid job id specified\n"), {})


def fake(bin_dir, name, code, text):
    path = os.path.join(bin_dir, name)
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\nexit {code}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


class Command(unittest.TestCase):

    def run_script(self, sacct, scontrol, *args):
        with tempfile.TemporaryDirectory() as d:
            fake(d, "sacct", *sacct)
            fake(d, "scontrol", *scontrol)
            env = dict(os.environ, PATH=d + os.pathsep + os.environ.get("PATH", ""))
            out = os.path.join(d, "states.json")
            p = subprocess.run([PYTHON, os.path.join(SCRIPTS, "slurm", "job_states.py"), *args, "--out", out],
                               capture_output=True, text=True, env=env)
            doc = json.load(open(out)) if os.path.exists(out) else None
            return p.returncode, p.stderr, doc

    def test_sacct_first(self):
        code, err, doc = self.run_script((0, SACCT), (1, ""), "41")
        self.assertEqual(code, 0, err)
        self.assertEqual(doc["source"], "sacct --duplicates")
        self.assertEqual(doc["array_job_id"], "41")
        self.assertEqual(len(doc["tasks"]), 3)

    def test_scontrol_when_accounting_is_disabled_and_why(self):
        code, err, doc = self.run_script((1, "Slurm accounting storage is disabled\n"), (0, SCONTROL), "41")
        self.assertEqual(code, 0, err)
        self.assertEqual(doc["source"], "scontrol show job")
        self.assertIn("accounting storage is disabled", doc["why_not_sacct"])
        self.assertEqual(doc["tasks"][1]["restarts"], 1)

    def test_neither_answers_exit_1_saying_why(self):
        code, err, doc = self.run_script((1, "Slurm accounting storage is disabled\n"),
                                         (1, "Invalid job id specified\n"), "41")
        self.assertEqual(code, 1)
        self.assertIsNone(doc)
        self.assertIn("accounting storage is disabled", err)
        self.assertIn("Invalid job id", err)

    def test_a_job_id_is_a_number(self):
        code, err, _ = self.run_script((0, SACCT), (0, SCONTROL), "41; rm -rf /")
        self.assertEqual(code, 2)
        self.assertIn("ARRAY_JOB_ID must be a job number", err)


if __name__ == "__main__":
    unittest.main()
