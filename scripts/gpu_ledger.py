#!/usr/bin/env python3
"""Entry point: the code is mpbench.gpu.ledger (scripts/mpbench/gpu/ledger.py; python3 -m mpbench.gpu.ledger runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.gpu.ledger import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
