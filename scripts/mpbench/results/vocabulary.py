"""The words result files use, as the runner defines them: precision names in display
order, memory categories in stacking order, the per-cell keys a matrix may vary.

Why a module of its own: the runner is the one source of these lists (core/precision's
named precisions, core/memory_tracker's categories, config/schema's keys). It writes
them into every manifest.json as `vocabulary` (docs/RESULTS.md); the scripts read them
from there instead of restating them. Result sets written before the manifest carried
a vocabulary get `runner_vocabulary.json` beside this file: a snapshot of
`runner describe --json` that a CTest (tests/scripts/check_vocabulary_snapshot.py)
keeps equal to the built runner's output.
"""

import json
import os
from dataclasses import dataclass

from mpbench import SCRIPTS_DIR

SNAPSHOT_PATH = os.path.join(SCRIPTS_DIR, "runner_vocabulary.json")
SCHEMA = "mpbench.vocabulary/1"


@dataclass(frozen=True)
class Vocabulary:
    precisions: tuple          # named precisions in display order (fp32 first)
    memory_categories: tuple   # peak-memory categories, stacking order bottom to top ("total" is separate)
    axes: tuple                # per-cell keys a matrix may vary, in docs/CONFIG.md order

    @classmethod
    def from_json(cls, data, where):
        """A vocabulary object (manifest.vocabulary or the snapshot); ValueError naming `where`."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"{where}: expected a vocabulary object with schema {SCHEMA!r}")
        lists = {}
        for key in ("precisions", "memory_categories", "axes"):
            value = data.get(key)
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: vocabulary.{key} must be a non-empty list of strings")
            lists[key] = tuple(value)
        return cls(**lists)

    def precision_sort_key(self, precision):
        """Named precisions in the runner's order; policy strings and others alphabetically after."""
        if precision in self.precisions:
            return (0, self.precisions.index(precision), "")
        return (1, 0, precision)


_snapshot = None


def snapshot():
    """The committed `runner describe --json` (for result sets from before manifest.vocabulary)."""
    global _snapshot
    if _snapshot is None:
        with open(SNAPSHOT_PATH, encoding="utf-8") as f:
            _snapshot = Vocabulary.from_json(json.load(f), SNAPSHOT_PATH)
    return _snapshot


def vocabulary_of(manifest):
    """manifest.vocabulary when the runner wrote one, else the snapshot."""
    data = manifest.get("vocabulary") if isinstance(manifest, dict) else None
    if data is None:
        return snapshot()
    return Vocabulary.from_json(data, "manifest.json")
