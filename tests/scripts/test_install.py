#!/usr/bin/python3
"""`cmake --install` (issue 41): the built runner and the user-facing scripts land in a prefix and
run from there, outside the checkout. Installs the build directory of the runner under test
(MPB_RUNNER, as CTest sets it; else build/runner) into a temporary prefix, then runs the installed
runner (--version, a dry run of an installed experiment) and the installed report.py on a real
tiny result set, with no PYTHONPATH and another working directory."""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_test_helpers import SKIP_EXIT_CODE, SOURCE_DIR, TempDirTest  # noqa: E402

RUNNER = os.environ.get("MPB_RUNNER") or os.path.join(SOURCE_DIR, "build", "runner")


def clean_env():
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    env.pop("PYTHONPATH", None)
    return env


class Install(TempDirTest):
    def setUp(self):
        super().setUp()
        self.prefix = os.path.join(self.tmp, "prefix")
        proc = subprocess.run(["cmake", "--install", os.path.dirname(RUNNER), "--prefix", self.prefix],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.share = os.path.join(self.prefix, "share", "mpbench")

    def run_here(self, args, timeout=300):
        """Runs args from a directory outside the checkout, without PYTHONPATH."""
        return subprocess.run(args, cwd=self.tmp, env=clean_env(), capture_output=True, text=True,
                              timeout=timeout)

    def test_the_runner_and_an_experiment(self):
        runner = os.path.join(self.prefix, "bin", "runner")
        proc = self.run_here([runner, "--version"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("mpbench", proc.stdout + proc.stderr)
        experiment = os.path.join(self.share, "experiments", "quickstart.yaml")
        proc = self.run_here([runner, experiment, "--dry-run", "--device", "cpu"])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("precision=", proc.stdout + proc.stderr)

    def test_the_scripts_use_their_installed_package(self):
        scripts = os.path.join(self.share, "scripts")
        for name in ("report.py", "compare.py", "ab_compare.py"):
            self.assertTrue(os.access(os.path.join(scripts, name), os.X_OK), name)
        self.assertFalse(any("__pycache__" in d for d, _, _ in os.walk(scripts)))
        proc = self.run_here([sys.executable, "-c", f"import sys; sys.path.insert(0, {scripts!r}); import mpbench; "
                              "print(mpbench.__file__)"])
        self.assertTrue(os.path.realpath(proc.stdout.strip()).startswith(os.path.realpath(self.prefix)), proc.stdout)
        results = self.make_set("set", numerics=False, include=[])
        out = os.path.join(self.tmp, "report")
        proc = self.run_here([sys.executable, os.path.join(scripts, "report.py"), results, "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertTrue(os.path.getsize(os.path.join(out, "index.html")) > 1000)
        proc = self.run_here([sys.executable, os.path.join(scripts, "compare.py"), "--help"])
        self.assertEqual(proc.returncode, 0, proc.stderr)


if __name__ == "__main__":
    if shutil.which("cmake") is None or not os.path.isfile(os.path.join(os.path.dirname(RUNNER),
                                                                       "cmake_install.cmake")):
        print("no cmake, or the runner is not in a CMake build directory: skipping", file=sys.stderr)
        sys.exit(SKIP_EXIT_CODE)
    unittest.main()
