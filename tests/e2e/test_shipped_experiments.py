#!/usr/bin/python3
"""Every experiment file the project ships (experiments/*.yaml) loads and
expands: `runner FILE --dry-run --device cpu` exits 0 and lists its cells,
and a file written for a GPU (`device: cuda`) also prices its cells for an
H100 (`--assume-gpu h100`), the run-book's first look at a new file. A file
whose key was renamed, or an include that no longer validates, fails here
before a user (or a short GPU lease) finds it. Also: the README's table of
experiments names every file, so a new one is documented.
"""

import glob
import os
import re
import subprocess
import sys

from e2e_helpers import RUNNER, SOURCE_DIR, report


def dry_run(path, *extra):
    p = subprocess.run([RUNNER, path, "--dry-run", *extra], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    return p.returncode, p.stdout + p.stderr


def main():
    files = sorted(glob.glob(os.path.join(SOURCE_DIR, "experiments", "*.yaml")))
    fails = []
    if len(files) < 5:
        fails.append(f"found only {len(files)} experiment files under {SOURCE_DIR}/experiments")
    with open(os.path.join(SOURCE_DIR, "README.md")) as f:
        readme = f.read()
    for path in files:
        rel = os.path.relpath(path, SOURCE_DIR)
        code, out = dry_run(path, "--device", "cpu")
        m = re.search(r"^(\S+): (\d+) cell\(s\)", out, re.M)
        if code != 0 or not m or int(m.group(2)) < 1:
            fails.append(f"{rel}: --dry-run --device cpu exited {code}:\n{out}")
        with open(path) as f:
            for_gpu = re.search(r"^device:\s*cuda\b", f.read(), re.M) is not None
        if for_gpu:
            code, out = dry_run(path, "--assume-gpu", "h100", "--device", "cpu")
            if code != 0 or "H100" not in out:
                fails.append(f"{rel}: --dry-run --assume-gpu h100 exited {code}:\n{out}")
        if f"`{rel}`" not in readme:
            fails.append(f"{rel} is not in README.md's table of experiments")
    rc = report(fails)
    print(f"{len(files)} experiment files, {len(fails)} failure(s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
