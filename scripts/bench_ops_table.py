#!/usr/bin/env python3
"""Entry point: the code is mpbench.ops_table (scripts/mpbench/ops_table.py; python3 -m mpbench.ops_table runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.interpreter import require  # noqa: E402

require()   # numpy, scipy, matplotlib: else re-run with /usr/bin/python3 (or $MPB_PYTHON), or exit 2
from mpbench.ops_table import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv))
