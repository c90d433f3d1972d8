"""A real result set with convergence verdicts, made once per test process by
the built runner ($MPB_RUNNER, as CTest sets it): a tiny CPU MLP experiment,
3 repeats (seeds paired across cells), fusion off/on at the baseline's
learning rate (identical training: `equivalent`) and a planted learning-rate
change (lr / 10: trains less in 40 steps, so `worse`). About 5 s on 2 cores.

Why a module: the report and compare tests both start from it, and it should
run the runner only once per test file.
"""

import os
import shutil
import tempfile

from script_test_helpers import TempDirTest  # (also puts scripts/ on sys.path)
from mpbench.tiny_experiment import run_on_cpu, write_mlp_experiment  # noqa: E402

EXPERIMENT = dict(steps=40, warmup_steps=2, repeats=3, batch_size=16, width=32, input_dim=16, eval_samples=64,
                  matrix=["fusion: [off, on]", "optimizer.lr: [0.001, 0.0001]"],
                  baseline="fusion: off, optimizer.lr: 0.001")
BASELINE = "fusion=off,optimizer.lr=0.001"
SAME = "fusion=on,optimizer.lr=0.001"          # fused: the same training to rounding
PLANTED = "fusion=off,optimizer.lr=1e-4"       # the planted learning-rate change

_made = {}


def runner_path():
    """The built runner, or None outside CTest (the tests then skip, saying why)."""
    path = os.environ.get("MPB_RUNNER")
    return path if path and os.path.isfile(path) else None


def runner_result_set():
    """The directory of the fixture's result set (made on first call; removed at exit)."""
    if "dir" not in _made:
        root = tempfile.mkdtemp(prefix="mpb-conv-fixture-")
        import atexit
        atexit.register(shutil.rmtree, root, True)
        yaml_path = write_mlp_experiment(root, "conv_fixture", **EXPERIMENT)
        _made["dir"] = run_on_cpu(runner_path(), yaml_path, root)
    return _made["dir"]


def copy_set(dest):
    """A copy of the fixture's result set at `dest` (to hand-edit); returns dest."""
    shutil.copytree(runner_result_set(), dest)
    return dest


class FixtureTest(TempDirTest):
    """A test case over copies of the fixture's set (self.copy(name)); skipped, saying why,
    where no runner was built."""

    def setUp(self):
        super().setUp()
        if not runner_path():
            self.skipTest("MPB_RUNNER not set (CTest sets it to the built runner)")

    def copy(self, name):
        return copy_set(os.path.join(self.tmp, name))
