#!/usr/bin/python3
"""scripts/mpbench_output.py: the one rule every script's writers keep
(issue 33, defect 1), and the --out directories ab_compare.py and report.py
check before their work (defect 6: ab_compare.py --out run twice used to
overwrite the earlier rounds). Special files are made in a temporary
directory (mkfifo, mknod, symlinks), never the machine's /dev nodes.
"""

import os
import stat
import subprocess
import sys
import threading
import unittest

from script_test_helpers import SCRIPTS, TempDirTest, run_script

from mpbench import output as mo


class Rule(TempDirTest):
    def at(self, *parts):
        return os.path.join(self.tmp, *parts)

    def refusal(self, path):
        with self.assertRaises(mo.OutputPathError) as cm:
            mo.check_output_path(path)
        return str(cm.exception)

    def test_regular_and_new_files_are_replaced_atomically(self):
        self.assertEqual(mo.check_output_path(self.at("new.json")), mo.REPLACE)
        with open(self.at("old.json"), "w") as f:
            f.write("old")
        mo.write_output(self.at("old.json"), "new\n")
        with open(self.at("old.json")) as f:
            self.assertEqual(f.read(), "new\n")
        self.assertFalse(os.path.exists(self.at("old.json.tmp")))
        self.assertEqual(mo.check_output_path("-"), mo.STDOUT)

    def test_directory_and_missing_parent_are_refused_and_nothing_is_written(self):
        os.mkdir(self.at("d"))
        self.assertIn("is a directory", self.refusal(self.at("d")))
        with self.assertRaises(mo.OutputPathError):
            mo.write_output(self.at("d"), "x")
        self.assertFalse(os.path.exists(self.at("d.tmp")))  # compare.py once left a 12 KB DIR.tmp
        self.assertIn("does not exist", self.refusal(self.at("no", "such", "x.json")))
        self.assertFalse(os.path.exists(self.at("no")))
        with open(self.at("file"), "w") as f:
            f.write("x")
        self.assertIn("is not a directory", self.refusal(self.at("file", "x.json")))

    def test_loops_dangling_links_and_links_to_directories_are_named(self):
        os.symlink(self.at("b"), self.at("a"))
        os.symlink(self.at("a"), self.at("b"))
        self.assertIn("symlink loop (ELOOP", self.refusal(self.at("a")))
        os.symlink(self.at("missing"), self.at("dangling"))
        self.assertIn("does not exist", self.refusal(self.at("dangling")))
        os.mkdir(self.at("d"))
        os.symlink(self.at("d"), self.at("to_dir"))
        self.assertIn("symlink to a directory", self.refusal(self.at("to_dir")))

    def test_a_fifo_stays_a_fifo_and_its_reader_gets_the_content(self):
        fifo = self.at("pipe")
        os.mkfifo(fifo)
        got = []

        def read():
            with open(fifo) as f:
                got.append(f.read())
        reader = threading.Thread(target=read, daemon=True)  # a replaced FIFO leaves it waiting: fail, not hang
        reader.start()
        mo.write_output(fifo, '{"a": 1}\n')
        reader.join(timeout=30)
        self.assertEqual(got, ['{"a": 1}\n'])
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_a_planted_tmp_link_is_never_followed(self):
        # Issue 43, item 1: PATH.tmp -> victim must not receive the write,
        # through write_output and through compare.py --json.
        with open(self.at("victim"), "w") as f:
            f.write("precious\n")
        os.symlink(self.at("victim"), self.at("t.json.tmp"))
        mo.write_output(self.at("t.json"), "new\n")
        with open(self.at("victim")) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertFalse(os.path.islink(self.at("t.json")))
        with open(self.at("t.json")) as f:
            self.assertEqual(f.read(), "new\n")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["t.json", "t.json.tmp", "victim"])

    def test_a_symlink_stays_a_link_and_its_file_gets_the_content(self):
        with open(self.at("target"), "w") as f:
            f.write("a much longer old content")
        os.symlink(self.at("target"), self.at("link"))
        mo.write_output(self.at("link"), "new\n")
        self.assertTrue(os.path.islink(self.at("link")))
        with open(self.at("target")) as f:
            self.assertEqual(f.read(), "new\n")

    def test_a_link_to_proc_self_fd_1_reaches_standard_output(self):
        os.symlink("/proc/self/fd/1", self.at("stdout"))
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from mpbench import output as mo; "
                "print('table'); mo.write_output(sys.argv[2], '{\"j\": 1}\\n')")
        p = subprocess.run([sys.executable, "-c", code, SCRIPTS, self.at("stdout")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, 'table\n{"j": 1}\n')  # in order: print()'s buffer goes first
        self.assertEqual(os.readlink(self.at("stdout")), "/proc/self/fd/1")

    def test_a_character_device_stays_a_device(self):
        if os.geteuid() != 0:
            self.skipTest("mknod of a character device needs root (CI runs as root)")
        dev = self.at("null")
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        mo.write_output(dev, "{}\n")
        self.assertTrue(stat.S_ISCHR(os.lstat(dev).st_mode))
        full = self.at("full")  # (1, 7): every write fails with ENOSPC
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        with self.assertRaises(OSError):
            mo.write_output(full, "{}\n")
        self.assertTrue(stat.S_ISCHR(os.lstat(full).st_mode))
        disk = self.at("disk")
        os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))  # never opened: refused by its type
        self.assertIn("block device", self.refusal(disk))

    def test_an_unwritable_parent_is_refused(self):
        if os.geteuid() == 0:
            self.skipTest("root writes into a mode-0500 directory: only a non-root user can check this")
        os.mkdir(self.at("ro"), 0o500)
        self.assertIn("not writable", self.refusal(self.at("ro", "x.json")))


class OutDirectories(TempDirTest):
    def test_ab_compare_refuses_a_used_out_directory_before_running(self):
        out = os.path.join(self.tmp, "ab")
        os.makedirs(os.path.join(out, "base", "r01_c01"))  # an earlier comparison's rounds
        fake = os.path.join(self.tmp, "runner.sh")  # would leave a mark if it ran
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\ntouch {self.tmp}/ran\nexit 1\n")
        os.chmod(fake, 0o755)
        p = run_script("ab_compare.py", os.path.join(self.tmp, "x.yaml"), "--base", fake, "--new", fake,
                       "--out", out)
        self.assertExit(p, 2)
        self.assertIn("is not empty", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "ran")), "the runner ran before the refusal")
        p = run_script("ab_compare.py", os.path.join(self.tmp, "x.yaml"), "--base", fake, "--new", fake,
                       "--json", self.tmp)
        self.assertExit(p, 2)
        self.assertIn("is a directory", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "ran")))

    def test_report_refuses_an_out_that_is_a_file(self):
        rs = self.make_set("set", repeats=3, steps=20)
        target = os.path.join(self.tmp, "a_file")
        with open(target, "w") as f:
            f.write("keep me")
        p = run_script("report.py", rs, "--out", target)
        self.assertExit(p, 2)
        self.assertIn("is not a directory", p.stderr)
        with open(target) as f:
            self.assertEqual(f.read(), "keep me")


if __name__ == "__main__":
    unittest.main()
