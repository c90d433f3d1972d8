"""scripts/report_tables.machine_rows: the manifest's libraries block now holds
objects beside the version strings (header_vs_runtime, warnings, loaded:
docs/RESULTS.md, issue 30 items 5 and 8). The report's "libraries" row keeps
to the version strings, and each header-vs-runtime warning gets its own row
rather than vanishing or printing as a Python dict.
"""

import types
import unittest

import script_test_helpers  # noqa: F401  (puts scripts/ on sys.path)
from mpbench.report.tables import machine_rows


def result_set(manifest):
    """The parts of a result set machine_rows reads (scripts/mpbench_results.py)."""
    return types.SimpleNamespace(experiment="x", manifest=manifest, run_order=lambda: None)


class LibraryRows(unittest.TestCase):
    def test_versions_in_one_row_warnings_in_their_own(self):
        manifest = {"libraries": {
            "onednn": "2.6.3", "cudnn": "9.19.0", "cublas": None,
            "header_vs_runtime": {"cudnn": {"header": "9.19.0", "runtime": "9.1.0", "status": "runtime_older"}},
            "warnings": ["cuDNN: runtime 9.1.0 is older than the headers 9.19.0"],
            "loaded": ["/usr/local/cuda/lib64/libcudnn.so.9"]}}
        rows = dict(machine_rows(result_set(manifest)))
        self.assertEqual(rows["libraries"], "onednn 2.6.3, cudnn 9.19.0")
        self.assertEqual(rows["library warning"], "cuDNN: runtime 9.1.0 is older than the headers 9.19.0")

    def test_an_older_manifest_reads_as_before(self):
        rows = dict(machine_rows(result_set({"libraries": {"onednn": "2.6.3"}})))
        self.assertEqual(rows["libraries"], "onednn 2.6.3")
        self.assertNotIn("library warning", rows)


if __name__ == "__main__":
    unittest.main()
