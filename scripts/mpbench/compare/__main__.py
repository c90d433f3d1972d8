"""python3 -m mpbench.compare: the same as scripts/compare.py."""
import sys

sys.argv[0] = "compare.py"   # usage and error lines name the command, as scripts/compare.py's do
from mpbench.compare.gate import main  # noqa: E402

sys.exit(main())
