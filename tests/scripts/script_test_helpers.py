"""Shared plumbing for the tests of scripts/report.py and scripts/compare.py.

Why a module: every test needs the same three things (where the scripts are,
a synthetic result set in a temporary directory, and a way to run a script
as a user would, as a subprocess with its exit code) and they should be
written once. Result sets are real runs of the built runner on tiny CPU
experiments, with named edits for what a CPU run cannot show
(scripts/mpbench/fixtures.py): there is one runner, the C++ one.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.normpath(os.path.join(HERE, "..", ".."))
if not os.path.isdir(os.path.join(SOURCE_DIR, "scripts")):      # tests copied elsewhere
    SOURCE_DIR = os.environ.get("MPB_SOURCE_DIR", SOURCE_DIR)
SCRIPTS = os.path.join(SOURCE_DIR, "scripts")
sys.path.insert(0, SCRIPTS)

from mpbench import fixtures  # noqa: E402
from mpbench.results import slugify  # noqa: E402

# The scripts run on the interpreter running the tests (CTest: Debian's /usr/bin/python3).
PYTHON = sys.executable or "/usr/bin/python3"
SKIP_EXIT_CODE = 77


def run_script(name, *args, timeout=120):
    """Run scripts/<name> with args; returns CompletedProcess (text stdout/stderr, returncode)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    return subprocess.run([PYTHON, os.path.join(SCRIPTS, name), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


class TempDirTest(unittest.TestCase):
    """A test case with a fresh temporary directory (self.tmp) removed afterwards."""

    tmp_prefix = "mpb-test-"
    set_defaults = {}          # make_set's keywords unless a call gives them

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix=self.tmp_prefix)
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def make_set(self, name, **kwargs):
        """A result directory self.tmp/<name>: a copy of a real tiny run (kwargs: fixtures.result_set's)."""
        return fixtures.result_set(os.path.join(self.tmp, name), **dict(self.set_defaults, **kwargs))

    def assertExit(self, proc, code):
        """assertEqual on the exit code, showing the script's output when it fails."""
        self.assertEqual(proc.returncode, code,
                         f"exit {proc.returncode}, expected {code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def cell_path(result_dir, cell_id):
    return os.path.join(result_dir, "cells", slugify(cell_id) + ".json")


def edit_json(path, edit):
    """Load a JSON file, let `edit(data)` change it in place, write it back; returns path."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    edit(data)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path


def edit_cell(result_dir, cell_id, edit):
    """Load one cell's JSON, let `edit(dict)` change it in place, write it back."""
    return edit_json(cell_path(result_dir, cell_id), edit)


def edit_manifest(result_dir, edit):
    return edit_json(os.path.join(result_dir, "manifest.json"), edit)


def all_cell_ids(result_dir):
    with open(os.path.join(result_dir, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)["cells"]
