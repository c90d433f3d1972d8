#!/usr/bin/python3
"""Entry point: the code is mpbench.fuzz (scripts/mpbench/fuzz.py; python3 -m mpbench.fuzz runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.fuzz import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
