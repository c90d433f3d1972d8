#!/usr/bin/python3
"""The Python package installs and runs as issue 41 asks: `python3 -m mpbench.report` from the
repository root (the root's mpbench link to scripts/mpbench), and `pip install -e scripts`
(scripts/pyproject.toml) into a fresh virtual environment, run from another directory."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_test_helpers import SOURCE_DIR  # noqa: E402


def clean_env():
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    return env


class Packaging(unittest.TestCase):
    def test_module_runs_from_the_repository_root(self):
        proc = subprocess.run([sys.executable, "-m", "mpbench.report", "--help"], cwd=SOURCE_DIR,
                              env=clean_env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("usage: report.py", proc.stdout)
        # the package knows the checkout through the link, not the link's directory
        proc = subprocess.run([sys.executable, "-c", "import mpbench; print(mpbench.SOURCE_DIR)"],
                              cwd=SOURCE_DIR, env=clean_env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(os.path.realpath(proc.stdout.strip()), os.path.realpath(SOURCE_DIR))

    def test_pip_install_editable(self):
        with tempfile.TemporaryDirectory(prefix="mpb-venv-") as tmp:
            venv = os.path.join(tmp, "venv")
            made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                                  capture_output=True, text=True, timeout=120)
            if made.returncode != 0:
                self.skipTest(f"no venv module here: {made.stderr.strip()[-200:]}")
            python = os.path.join(venv, "bin", "python")
            # --no-build-isolation --no-deps: setuptools and the dependencies are the system's, no network
            pip = subprocess.run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e",
                                  os.path.join(SOURCE_DIR, "scripts")], cwd=tmp, env=clean_env(),
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            proc = subprocess.run([python, "-c", "import mpbench.report.build, mpbench; print(mpbench.SOURCE_DIR)"],
                                  cwd=tmp, env=clean_env(), capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(os.path.realpath(proc.stdout.strip()), os.path.realpath(SOURCE_DIR))


class Interpreter(unittest.TestCase):
    """A Python without numpy first on PATH (issue 43, "Also"): the entry scripts re-run themselves
    with one that has the dependencies (mpbench/interpreter.py), or say what is missing, exit 2."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="mpb-bare-")
        self.addCleanup(self._tmp.cleanup)
        bare = os.path.join(self._tmp.name, "bare")          # no site packages: no numpy
        made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", bare], capture_output=True,
                              text=True, timeout=120)
        if made.returncode != 0:
            self.skipTest(f"no venv module here: {made.stderr.strip()[-200:]}")
        self.python = os.path.join(bare, "bin", "python")
        if subprocess.run([self.python, "-c", "import numpy"], capture_output=True).returncode == 0:
            self.skipTest("the bare venv sees numpy")

    def run_report(self, **env):
        return subprocess.run([self.python, os.path.join(SOURCE_DIR, "scripts", "report.py"), "--help"],
                              env=dict(clean_env(), MPB_PYTHON=sys.executable, **env), capture_output=True,
                              text=True, timeout=120)

    def test_reruns_with_an_interpreter_that_has_the_dependencies(self):
        proc = self.run_report()
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("usage: report.py", proc.stdout)

    def test_says_what_is_missing_when_none_has_them(self):
        proc = self.run_report(MPB_PYTHON_REEXEC="1")       # as if already re-executed: no second hop
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("report.py: error: this Python", proc.stderr)
        self.assertIn("has no numpy", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)


if __name__ == "__main__":
    unittest.main()
