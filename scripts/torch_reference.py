#!/usr/bin/env python3
"""Entry point: the code is mpbench.reference.torch_model (scripts/mpbench/reference/torch_model.py; python3 -m mpbench.reference.torch_model runs it too)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # scripts/, where the mpbench package is
from mpbench.reference.torch_model import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv))
