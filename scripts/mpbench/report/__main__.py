"""python3 -m mpbench.report: the same as scripts/report.py."""
import sys

sys.argv[0] = "report.py"   # usage and error lines name the command, as scripts/report.py's do
from mpbench.report.build import main  # noqa: E402

sys.exit(main())
