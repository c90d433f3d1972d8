#!/usr/bin/env python3
"""Entry point: the code is mpbench.compare.ab (scripts/mpbench/compare/ab.py; python3 -m mpbench.compare.ab runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.interpreter import require  # noqa: E402

require()   # numpy, scipy, matplotlib: else re-run with /usr/bin/python3 (or $MPB_PYTHON), or exit 2
from mpbench.compare.ab import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
