"""What the source-rule checks share (check_layering.py, check_device_kinds.py,
check_sizes.py): the repository root from argv or from this folder, the walk
over the source files of some top-level folders, and the command line of a
check that lists violations (one line each, a count or an all-clear, exit 1
on any)."""
import os
import sys


def repo_root():
    """The folder named on the command line, else the repository this file is in."""
    return sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source_files(root, folders, pattern):
    """(folder, rel, path) of every file below root/<folder> whose name `pattern` matches.

    Folders in the order given, each directory's files sorted by name, so every
    check reports in the same order; rel is relative to root (the OS's separator),
    path is root-joined."""
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if pattern.search(name):
                    path = os.path.join(dirpath, name)
                    yield folder, os.path.relpath(path, root), path


def run(violations, counted, all_clear):
    """violations(root) -> [line]; counted: '3 <counted>' when some; all_clear: the line when none."""
    found = violations(repo_root())
    for v in found:
        print(v)
    print(f"{len(found)} {counted}" if found else all_clear)
    return 1 if found else 0


def main(violations, counted, all_clear):
    """A check's entry point: run(), its result the exit status."""
    sys.exit(run(violations, counted, all_clear))
