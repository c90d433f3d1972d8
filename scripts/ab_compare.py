#!/usr/bin/python3
"""Entry point: the code is mpbench.compare.ab (scripts/mpbench/compare/ab.py; python3 -m mpbench.compare.ab runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.compare.ab import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
