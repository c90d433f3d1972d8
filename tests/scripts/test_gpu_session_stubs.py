#!/usr/bin/python3
"""bin/gpu-session's own rules, run in a bundle of stub programs (no GPU, no build needed):

- a step over its limit is "TIMEOUT", and with less than 20 s of the budget left the
  remaining steps are "not run (budget)" (optional ones "not run (budget, optional)"),
  the phase exits 1 and still leaves its two files, well inside the budget;
- a log over 4 MiB keeps its first 2 and last 1 MiB, so the tarball stays small;
- a phase where every step passes exits 0, and `next` then goes on to the lease once the
  summary is in the ledger;
- the lease (with an ncu stub that writes a report and prints planted CSVs) leads its page
  with the gate and the timeline's top kernels; once in the ledger, the next lease at the
  same sources reuses every step and records them as reused, and after a test-only change
  it runs the gate again and nothing else.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import unittest

from script_test_helpers import SOURCE_DIR, TempDirTest

STUBS = ("mpbench-env", "runner", "test_gpu", "test_ops_cuda", "nvidia-smi", "compute-sanitizer", "python3", "ncu")
SOURCES = "device=dddddddddddddddd,gpu_tests=tttttttttttttttt,host=hhhhhhhhhhhhhhhh,torch=pppppppppppppppp"
# ncu: a profile run touches its report (-o NAME -> NAME.ncu-rep); an export prints a planted raw CSV
NCU = r"""case " $* " in
  *" --import "*) echo '"ID","Kernel Name","gpu__time_duration.sum"'; echo '"","","nsecond"'
    case " $* " in *nvtx-rename*) echo '"0","encoder.layer.0 forward","1000"'; echo '"1","cls head forward","500"';;
      *) echo '"0","gemm_bf16_tn","1000"'; echo '"1","xent_sparse","500"';; esac;;
  *) while [ $# -gt 0 ]; do [ "$1" = -o ] && touch "$2.ncu-rep"; shift; done;;
esac"""


class Stubs(TempDirTest):
    def bundle(self, behaviour, sources=SOURCES):
        """A bundle whose programs are stubs; BEHAVIOUR maps a stub's name to a shell line."""
        b = os.path.join(self.tmp, "mpbench-gpu")
        for d in ("bin", "scripts", "bench", "stubs"):
            os.makedirs(os.path.join(b, d))
        shutil.copy(os.path.join(SOURCE_DIR, "scripts", "bundle", "gpu-session"), os.path.join(b, "bin"))
        for name in ("gpu_ledger.py", "gpu_session_summary.py"):
            shutil.copy(os.path.join(SOURCE_DIR, "scripts", name), os.path.join(b, "scripts"))
        # The entry points run the package, which scripts/gpu_bundle.sh copies beside them.
        shutil.copytree(os.path.join(SOURCE_DIR, "scripts", "mpbench"), os.path.join(b, "scripts", "mpbench"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        real_python = sys.executable or "/usr/bin/python3"
        for name in STUBS:
            where = "stubs" if name in ("nvidia-smi", "compute-sanitizer", "python3", "ncu") else "bin"
            # python3: PyTorch's steps pass; the summary and the ledger run on the real one
            default = (f'case "$1" in bench/*|-c) exit 0;; esac; exec {real_python} "$@"' if name == "python3"
                       else "exit 0")
            if name == "mpbench-env":
                default = 'case "$1" in --quiet) echo "export MPB_STUB=1";; esac; exit 0'
            if name == "ncu":
                default = NCU
            with open(os.path.join(b, where, name), "w") as f:
                f.write("#!/bin/sh\n" + behaviour.get(name, default) + "\n")
            os.chmod(os.path.join(b, where, name), 0o755)
        with open(os.path.join(b, "MANIFEST.md"), "w") as f:
            f.write(f"- commit: `c0ffee`\n- CUDA sources: `0123456789abcdef` (stub)\n- sources: `{sources}` (stub)\n")
        open(os.path.join(b, "ledger.jsonl"), "w").close()
        return b

    def session(self, b, *args):
        env = dict(os.environ, PATH=os.path.join(b, "stubs") + os.pathsep + os.environ["PATH"])
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(b, "bin", "gpu-session"), *args], capture_output=True, text=True,
                           timeout=120, env=env)
        return p, time.monotonic() - t0

    def test_timeout_then_the_budget_runs_out(self):
        b = self.bundle({"mpbench-env": 'case "$1" in --quiet) exit 0;; esac; sleep 30'})
        out = os.path.join(self.tmp, "out")
        p, wall = self.session(b, "first", out, "--budget", "21")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertLess(wall, 21 + 15, "the phase ran past its budget (kill-after 10 s included)")
        with open(os.path.join(out, "first-summary.txt")) as f:
            text = f.read()
        self.assertRegex(text, r"(?m)^mpbench-env +TIMEOUT \(10 s\)")
        self.assertRegex(text, r"(?m)^bert-cell +not run \(budget\)")
        self.assertRegex(text, r"(?m)^torch-cell +not run \(budget, optional\)")
        self.assertTrue(os.path.exists(os.path.join(out, "first.tar.gz")))
        record = json.loads(text.split("ledger-json: ", 1)[1].splitlines()[0])
        codes = {s["name"]: s["code"] for s in record["steps"]}
        self.assertEqual((codes["mpbench-env"], codes["bert-cell"], codes["torch-cell"]),
                         ("timeout", "not-run", "optional"))

    def test_a_big_log_is_cut(self):
        b = self.bundle({"test_ops_cuda": "head -c 6000000 /dev/zero | tr '\\0' x; echo; echo THE-END"})
        out = os.path.join(self.tmp, "out")
        p, _ = self.session(b, "first", out)
        with tarfile.open(os.path.join(out, "first.tar.gz")) as t:
            log = t.extractfile("first/test_ops_cuda.txt").read()
        self.assertLess(len(log), 3 * 1048576 + 4096)
        self.assertIn(b"gpu-session cut", log)
        self.assertTrue(log.rstrip().endswith(b"THE-END"), log[-100:])

    def add_to_ledger(self, b, summary):
        ledger_dir = os.path.join(self.tmp, "ledger")
        add = subprocess.run([sys.executable, os.path.join(b, "scripts", "gpu_ledger.py"), "add", summary,
                              "--dir", ledger_dir], capture_output=True, text=True, timeout=60)
        self.assertEqual(add.returncode, 0, add.stderr)
        shutil.copy(os.path.join(ledger_dir, "ledger.jsonl"), os.path.join(b, "ledger.jsonl"))

    def test_all_passed_exits_0_and_next_goes_on_to_the_lease(self):
        b = self.bundle({})
        out = os.path.join(self.tmp, "out")
        p, _ = self.session(b, "next", out)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("phase: first", p.stderr)
        self.add_to_ledger(b, os.path.join(out, "first-summary.txt"))
        p, _ = self.session(b, "which")
        self.assertIn("phase: lease", p.stdout, p.stderr)

        # The lease: every step passes; its page leads with the gate and the timeline.
        out2 = os.path.join(self.tmp, "out2")
        p, _ = self.session(b, "next", out2)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(out2, "lease-summary.txt")) as f:
            page = f.read()
        self.assertIn("gate: gate-test_gpu ok, gate-test_ops_cuda ok", page)
        self.assertIn("amp_bf16 fused timeline (one step under ncu): 2 kernels, 0.00 ms of kernel time", page)
        self.assertRegex(page, r"gemm_bf16_tn +1x +1\.0 us +66\.7%")
        self.assertIn("by part: forward 0.00 ms (67%), head 0.00 ms (33%)", page)
        self.add_to_ledger(b, os.path.join(out2, "lease-summary.txt"))

        # The same sources again: nothing to run; every step recorded as reused.
        out3 = os.path.join(self.tmp, "out3")
        p, _ = self.session(b, "next", out3)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(out3, "lease-summary.txt")) as f:
            record = json.loads(f.read().split("ledger-json: ", 1)[1].splitlines()[0])
        self.assertEqual({s["code"] for s in record["steps"]}, {"reused"})

        # A test-only change: the gate runs again, nothing else.
        with open(os.path.join(b, "MANIFEST.md"), "w") as f:
            f.write("- commit: `c0ffee`\n- CUDA sources: `0123456789abcdef` (stub)\n- sources: `"
                    + SOURCES.replace("t" * 16, "e" * 16) + "` (stub)\n")
        out4 = os.path.join(self.tmp, "out4")
        p, _ = self.session(b, "next", out4)
        with open(os.path.join(out4, "lease-summary.txt")) as f:
            record = json.loads(f.read().split("ledger-json: ", 1)[1].splitlines()[0])
        ran = {s["name"] for s in record["steps"] if s["code"] != "reused"}
        self.assertEqual(ran, {"gate-test_gpu", "gate-test_ops_cuda", "memcheck-ops", "racecheck"}, p.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=1)
