#!/usr/bin/python3
"""Reading mpbench result directories (the contract in docs/RESULTS.md).

The report, the comparisons and the fuzzer import this package, so there is
exactly one name for the code that knows the file layout, the field names,
which fields are optional, and how a machine is identified. Everything else
works on `ResultSet` and `Cell` objects and never opens a result file itself.

Missing optional data is normal (numerics, checkpointing, eval accuracy,
ceilings are added by later runner issues), so accessors return None or empty
arrays instead of raising; only a structurally broken file raises
`ResultsError`, which always names the offending file.

The code lives in seven modules with one job each; this one only gathers them:
  values       JSON numbers and config settings, and their text (tables, bytes)
  cell         one cell file: `Cell`, its speed-up interval and step noise
  resultset    one run: `ResultSet`, run order, machine load, machine identity
  environment  which environment fields of two manifests differ
  load         the files on disk: finding, reading and checking them
  schema       the one schema check of a cell file or manifest: every field's type
  vocabulary   the runner's words (precisions in order, memory categories, axes)
"""

from mpbench.results.cell import Cell, SpeedupInterval, StepNoise
from mpbench.results.environment import environment_differences, environment_text
from mpbench.results.load import (CELL_SCHEMA, MANIFEST_SCHEMA, ResultsError, load_cell, load_results,
                                  read_json)
from mpbench.results.resultset import (LoadSample, ResultSet, RunNoise, RunOrder, fp32_reference,
                                       machine_identity, machine_label)
from mpbench.results.values import (FP16_MAX_LOG2, FP16_MIN_NORMAL_LOG2, FP16_MIN_SUBNORMAL_LOG2,
                                    dotted_get, finite, format_bytes, format_number,
                                    format_table, parse_map_setting, setting_string, slugify, to_array,
                                    to_float)
from mpbench.results.vocabulary import Vocabulary, vocabulary_of

__all__ = [
    "Cell", "SpeedupInterval", "StepNoise",
    "environment_differences", "environment_text",
    "CELL_SCHEMA", "MANIFEST_SCHEMA", "ResultsError", "load_cell", "load_results", "read_json",
    "LoadSample", "ResultSet", "RunNoise", "RunOrder", "fp32_reference", "machine_identity", "machine_label",
    "FP16_MAX_LOG2", "FP16_MIN_NORMAL_LOG2", "FP16_MIN_SUBNORMAL_LOG2",
    "dotted_get", "finite", "format_bytes", "format_number", "format_table", "parse_map_setting",
    "setting_string", "slugify", "to_array", "to_float",
    "Vocabulary", "vocabulary_of",
]
