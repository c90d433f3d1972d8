#!/usr/bin/python3
"""Entry point: the code is mpbench.report.build (scripts/mpbench/report/build.py; python3 -m mpbench.report runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.report.build import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
