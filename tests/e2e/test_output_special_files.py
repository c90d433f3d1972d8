#!/usr/bin/python3
"""Every --json writer leaves a special file what it was (issue 33, defect 1).

Run as root, `--json /dev/full` once turned the device into a regular file
and `--json /dev/stdout` replaced the symlink, so the JSON never reached the
pipe. Here each writer (runner doctor, runner selftest, compare.py,
compare.py --generations) writes to special files made in a temporary
directory, never the machine's own /dev nodes:

- a FIFO: it stays a FIFO and its reader gets the JSON;
- a symlink to /proc/self/fd/1: it stays a link and the JSON reaches the
  writer's standard output (a pipe here);
- a character device (mknod 1,3, a null device; root only, as CI runs: the
  part is skipped, saying so, otherwise): it stays a character device;
- a directory: refused with exit 2 before any work (doctor prints nothing of
  its checks, compare.py leaves no DIR.*tmp);
- a regular PATH with a symlink planted at PATH.tmp (issue 43): the link's
  target keeps its content, PATH becomes a regular file with the JSON
  (doctor and the compare.py writers; selftest writes through doctor's code).

And --json - writes to standard output. About 100 s, nearly all of it three
runs of `runner selftest --quick` (its --json has no cheaper run). The rule itself, case by case, is
tests/runner/io/test_output_path.cpp (C++) and tests/scripts/test_output_paths.py
(Python).
"""

import glob
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading

from e2e_helpers import RUNNER, SOURCE_DIR, report

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
from mpbench import fixtures  # noqa: E402

PYTHON = sys.executable or "/usr/bin/python3"
# doctor's cheapest run: no op checks, a short load watch, tiny ceiling GEMMs.
DOCTOR = ["doctor", "--device", "cpu", "--selftest-seconds", "0", "--load-seconds", "0.05",
          "--gemm-size", "64", "--gemm-reps", "1"]


def writers(tmp):
    """(name, argv before --json PATH, the JSON's schema or None)."""
    base = fixtures.result_set(os.path.join(tmp, "base"), experiment="s", repeats=3, steps=20)   # the runner's
    new = fixtures.result_set(os.path.join(tmp, "new"), experiment="s", repeats=3, steps=20)
    compare = [PYTHON, os.path.join(SOURCE_DIR, "scripts", "compare.py")]
    return [
        ("runner doctor", [RUNNER, *DOCTOR, "--out", tmp], "mpbench.doctor/1"),
        ("runner selftest", [RUNNER, "selftest", "--device", "cpu", "--quick"], "mpbench.selftest/1"),
        ("compare.py", [*compare, base, new], None),
        ("compare.py --generations", [*compare, "--generations", base, new, "--plot", os.path.join(tmp, "g.png")],
         None),
    ]


def run(argv, timeout=600):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def json_in(text):
    """The JSON object that starts on a line of its own in `text`, or None."""
    start = text.find("\n{")
    start = 0 if text.startswith("{") else (start + 1 if start >= 0 else -1)
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
        return obj
    except ValueError:
        return None


def check_json(fails, what, obj, schema):
    if not isinstance(obj, dict):
        fails.append(f"{what}: no JSON object arrived")
    elif schema and obj.get("schema") != schema:
        fails.append(f"{what}: schema {obj.get('schema')!r}, expected {schema!r}")


def kind(path):
    return stat.S_IFMT(os.lstat(path).st_mode)


def check_fifo(fails, tmp, name, argv, schema):
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    got = {}

    def read():
        with open(fifo) as f:
            got["text"] = f.read()
    reader = threading.Thread(target=read, daemon=True)  # a replaced FIFO leaves it waiting
    reader.start()
    p = run([*argv, "--json", fifo])
    reader.join(timeout=60)
    what = f"{name} --json FIFO"
    if p.returncode not in (0, 1) or reader.is_alive():
        fails.append(f"{what}: exit {p.returncode}, reader done {not reader.is_alive()}:\n{p.stdout}\n{p.stderr}")
        if reader.is_alive():
            open(fifo, "w").close()  # let the reader finish
        return
    if kind(fifo) != stat.S_IFIFO:
        fails.append(f"{what}: the FIFO was replaced")
    check_json(fails, what, json_in(got.get("text", "")), schema)
    os.unlink(fifo)


def check_stdout_link(fails, tmp, name, argv, schema):
    link = os.path.join(tmp, "stdout")
    os.symlink("/proc/self/fd/1", link)
    p = run([*argv, "--json", link])
    what = f"{name} --json LINK (-> /proc/self/fd/1)"
    if p.returncode not in (0, 1):
        fails.append(f"{what}: exit {p.returncode}:\n{p.stdout}\n{p.stderr}")
    if not os.path.islink(link) or os.readlink(link) != "/proc/self/fd/1":
        fails.append(f"{what}: the symlink was replaced")
    check_json(fails, what, json_in(p.stdout), schema)
    os.unlink(link)
    if name != "runner selftest":  # its 30 s run writes through doctor's code: one run fewer
        p = run([*argv, "--json", "-"])
        check_json(fails, f"{name} --json -", json_in(p.stdout), schema)


def check_char_device(fails, tmp, name, argv):
    dev = os.path.join(tmp, "null")
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    p = run([*argv, "--json", dev])
    if p.returncode not in (0, 1):
        fails.append(f"{name} --json CHARDEV: exit {p.returncode}:\n{p.stdout}\n{p.stderr}")
    if kind(dev) != stat.S_IFCHR or glob.glob(dev + ".*tmp"):
        fails.append(f"{name} --json CHARDEV: the device was replaced (or DEV.tmp left)")
    os.unlink(dev)


def check_planted_tmp_link(fails, tmp, name, argv, schema):
    """Issue 43, item 1: a symlink planted at PATH.tmp is never followed; the
    victim keeps its content and PATH ends a regular file with the JSON."""
    victim, target = os.path.join(tmp, "victim"), os.path.join(tmp, "t.json")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, target + ".tmp")
    p = run([*argv, "--json", target])
    what = f"{name} --json PATH with PATH.tmp -> victim"
    with open(victim) as f:
        if f.read() != "precious\n":
            fails.append(f"{what}: the victim was overwritten")
    if p.returncode not in (0, 1) or os.path.islink(target) or not os.path.isfile(target):
        fails.append(f"{what}: exit {p.returncode}, PATH a link or missing:\n{p.stdout}\n{p.stderr}")
    else:
        with open(target) as f:
            check_json(fails, what, json_in(f.read()), schema)
    for path in (victim, target, target + ".tmp"):
        if os.path.lexists(path):
            os.unlink(path)


def check_directory(fails, tmp, name, argv):
    target = os.path.join(tmp, "a_directory")
    os.mkdir(target)
    p = run([*argv, "--json", target], timeout=60)
    what = f"{name} --json DIR"
    if p.returncode != 2 or "is a directory" not in p.stderr:
        fails.append(f"{what}: exit {p.returncode}, expected 2 naming the directory:\n{p.stdout}\n{p.stderr}")
    if glob.glob(target + ".*tmp"):
        fails.append(f"{what}: left {glob.glob(target + '.*tmp')}")
    # Before any work: doctor and selftest print their first line only when they start.
    for started in ("mpbench doctor:", "mpbench selftest on", "regressed", "Generations"):
        if started in p.stdout:
            fails.append(f"{what}: the work ran before the refusal ({started!r} printed):\n{p.stdout}")
    os.rmdir(target)
    p = run([*argv, "--json", os.path.join(tmp, "no", "such", "x.json")], timeout=60)
    if p.returncode != 2 or "does not exist" not in p.stderr:
        fails.append(f"{name} --json MISSING/PARENT: exit {p.returncode}, expected 2:\n{p.stdout}\n{p.stderr}")


def check_closed_pipe(fails, argv):
    """--json - into a pipe whose reader is gone (issue 43 item 12: `runner selftest --json FIFO`
    whose reader closed early was killed by SIGPIPE, rc 141, without a word): exit 2 naming EPIPE."""
    r, w = os.pipe()
    os.close(r)  # the reader has gone before the runner writes
    try:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([*argv, "--json", "-"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=600, env=env)
    finally:
        os.close(w)
    last = (p.stderr.strip().splitlines() or [""])[-1]
    if p.returncode != 2 or "Broken pipe" not in last or not last.startswith("error: "):
        fails.append(f"runner doctor --json - into a closed pipe: exit {p.returncode} (expected 2 and an error "
                     f"naming the broken pipe):\n{p.stderr}")


def main():
    fails = []
    root = os.geteuid() == 0
    check_closed_pipe(fails, [RUNNER, *DOCTOR, "--out", tempfile.gettempdir()])
    with tempfile.TemporaryDirectory(prefix="mpb_special_") as tmp:
        for name, argv, schema in writers(tmp):
            check_directory(fails, tmp, name, argv)
            check_fifo(fails, tmp, name, argv, schema)
            check_stdout_link(fails, tmp, name, argv, schema)
            if name != "runner selftest":  # writes through doctor's code (write_file_atomic): one 30 s run fewer
                check_planted_tmp_link(fails, tmp, name, argv, schema)
            if root:
                check_char_device(fails, tmp, name, argv)
    if not root:
        print("note: not root: the character-device part is skipped (mknod needs root; CI runs as root)")
    return report(fails)


if __name__ == "__main__":
    sys.exit(main())
