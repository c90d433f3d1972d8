#!/usr/bin/python3
"""cmake/WriteProvenance.cmake: the build-time record of commit, dirty tree and flags.

The manifest's git.dirty and build.* come from the header this script writes
(runner/io/build_info.cpp); run in CMake's script mode on throw-away git
repositories: clean, a tracked file edited, only an untracked file, no repository.
Exit 77 (skipped) where cmake or git is missing.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.normpath(os.path.join(HERE, "..", ".."))
if not os.path.isdir(os.path.join(SOURCE_DIR, "cmake")):
    SOURCE_DIR = os.environ.get("MPB_SOURCE_DIR", SOURCE_DIR)
SCRIPT = os.path.join(SOURCE_DIR, "cmake", "WriteProvenance.cmake")
CMAKE, GIT = shutil.which("cmake"), shutil.which("git")


def git(repo, *args):
    subprocess.run([GIT, "-c", "user.email=test@example.com", "-c", "user.name=test", *args],
                   cwd=repo, check=True, capture_output=True)


class WriteProvenance(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="mpb-provenance-")
        self.tmp = self._tmp.name
        self.repo = os.path.join(self.tmp, "repo")
        os.makedirs(self.repo)
        git(self.repo, "init", "-q")
        with open(os.path.join(self.repo, "a.cpp"), "w") as f:
            f.write("int a;\n")
        git(self.repo, "add", "a.cpp")
        git(self.repo, "commit", "-qm", "first")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, source_dir=None, flags=" -O3 -DNDEBUG"):
        """Runs the script; returns the header's #defines as a dict of their raw values."""
        out = os.path.join(self.tmp, "gen", "mpb_provenance.h")
        subprocess.run([CMAKE, f"-DSOURCE_DIR={source_dir or self.repo}", f"-DOUT={out}", f"-DGIT={GIT}",
                        "-DBUILD_TYPE=Release", f"-DCXX_FLAGS={flags}", "-DOPTIONS=MPB_NATIVE=ON", "-P", SCRIPT],
                       check=True, capture_output=True)
        with open(out) as f:
            text = f.read()
        return dict(re.findall(r"^#define (\w+) (.*)$", text, re.M))

    def test_clean_tree(self):
        d = self.write()
        self.assertRegex(d["MPB_BUILD_GIT_COMMIT"], r'^"[0-9a-f]{12}"$')
        self.assertEqual(d["MPB_BUILD_GIT_DIRTY"], "0")
        self.assertEqual(d["MPB_BUILD_GIT_WHY"], '""')
        self.assertEqual(d["MPB_BUILD_TYPE"], '"Release"')
        self.assertEqual(d["MPB_BUILD_CXX_FLAGS"], '"-O3 -DNDEBUG"')

    def test_edited_tracked_file_is_dirty(self):
        with open(os.path.join(self.repo, "a.cpp"), "a") as f:
            f.write("int b;\n")
        self.assertEqual(self.write()["MPB_BUILD_GIT_DIRTY"], "1")

    def test_untracked_file_alone_is_clean(self):
        with open(os.path.join(self.repo, "scratch.txt"), "w") as f:
            f.write("notes\n")
        self.assertEqual(self.write()["MPB_BUILD_GIT_DIRTY"], "0")

    def test_outside_a_repository_is_unknown_with_the_reason(self):
        plain = os.path.join(self.tmp, "plain")
        os.makedirs(plain)
        d = self.write(source_dir=plain)
        self.assertEqual(d["MPB_BUILD_GIT_DIRTY"], "-1")
        self.assertEqual(d["MPB_BUILD_GIT_COMMIT"], '"unknown"')
        self.assertIn("not a git checkout", d["MPB_BUILD_GIT_WHY"])

    def test_quotes_and_backslashes_stay_one_c_string(self):
        d = self.write(flags='-DNAME="x" -I C:\\inc')
        self.assertEqual(d["MPB_BUILD_CXX_FLAGS"], '"-DNAME=\\"x\\" -I C:\\\\inc"')

    def test_unchanged_text_is_not_rewritten(self):
        # An unchanged header keeps its time stamp, so a rebuild recompiles nothing.
        self.write()
        out = os.path.join(self.tmp, "gen", "mpb_provenance.h")
        before = os.stat(out).st_mtime_ns
        os.utime(out, ns=(before - 10**9, before - 10**9))
        self.write()
        self.assertEqual(os.stat(out).st_mtime_ns, before - 10**9)


if __name__ == "__main__":
    if not CMAKE or not GIT:
        print(f"skipped: needs cmake and git on PATH (cmake: {CMAKE}, git: {GIT})")
        sys.exit(77)
    unittest.main()
