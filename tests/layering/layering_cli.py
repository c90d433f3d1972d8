"""The command line the source-rule checks share (check_layering.py,
check_device_kinds.py): the repository root from argv or from this folder,
one line per violation, a count or an all-clear, exit 1 on any violation."""
import os
import sys


def run(violations, counted, all_clear):
    """violations(root) -> [line]; counted: '3 <counted>' when some; all_clear: the line when none."""
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = violations(root)
    for v in found:
        print(v)
    print(f"{len(found)} {counted}" if found else all_clear)
    return 1 if found else 0
