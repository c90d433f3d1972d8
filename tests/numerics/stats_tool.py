"""Runs tests/numerics/stats_cases (runner/measure/stats.h's t distribution and tests as
JSON) on a dict of cases, for the tests that compare it with scipy and with mpmath."""
import json
import os
import subprocess
import tempfile

TOOL = os.environ.get("MPB_STATS_CASES")


def run_stats_cases(cases):
    """stats_cases' answers for `cases` ({"cdf": [[t, df]...], "ppf": [[p, df]...], "tests": [...]}),
    or None, with the reason printed, when the tool is not given (run the tests through ctest)."""
    if not TOOL:
        print("MPB_STATS_CASES (the stats_cases tool) is not set; run through ctest")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.json")
        with open(path, "w") as f:
            json.dump(cases, f)
        return json.loads(subprocess.run([TOOL, path], check=True, capture_output=True, text=True).stdout)
