"""mpbench's Python side: reading result sets, the statistics, the report, the comparisons.

One package, modules by job (docs/ARCHITECTURE.md has the map):
  results/     the result-set contract (docs/RESULTS.md): loading, schema, cells, values, vocabulary
  stats        every statistic the scripts compute (t intervals, the gate's tests, block medians)
  output       how every script writes a file (the output rule)
  report/      report.py: labels, tables, plots, pages, notes
  compare/     compare.py's gate, the generation table, ab_compare.py's A/B rounds
  reference/   the PyTorch reference run (torch_reference.py) and its checker (check_reference.py)
  gpu/         the GPU session ledger and its phase summaries
  ops_table    bench_ops's op table;  fuzz   the result-file fuzzer
  tiny_experiment  a tiny CPU MLP experiment (YAML + runner call) for fixtures and tests

The command-line scripts in scripts/ are thin entry points that put scripts/ on sys.path and call
a module's main(); each module with a main() also runs as `python3 -m mpbench.X` from scripts/,
from the repository root (its `mpbench` is a link here), with PYTHONPATH=scripts, or anywhere
after `pip install -e scripts` (scripts/pyproject.toml).
"""

import os

SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))   # scripts/ (realpath: the root mpbench link)
SOURCE_DIR = os.path.dirname(SCRIPTS_DIR)                                     # the checkout
