#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs the whole test suite (CTest).
# GPU tests (label `gpu`) skip cleanly on a machine without a CUDA device.
# Arguments go to ctest, e.g. -L unit. Environment: as scripts/build.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_BUILD_DIR:-$root/build}

source "$root/scripts/lib/stage.sh"   # stage "NAME: what" COMMAND..., mmss SECONDS

# The test suite's own packages first (chromium, PyTorch, the text corpus: install_deps.sh
# --tests); build.sh then finds the build's own present.
stage "installing: Debian packages the tests use (scripts/install_deps.sh --tests)" \
  bash "$root/scripts/install_deps.sh" --tests
bash "$root/scripts/build.sh"
# Idle OpenMP threads sleep instead of spinning (libgomp spins by default): with two tests at a
# time on two cores, each test's spinning threads took the other's cores, and the suite ran 2.5x
# slower (two quickstart runs side by side: 141 s spinning, 41 s passive, 22 s for one alone).
# The timing tests run alone (RUN_SERIAL) and compare runs made under the same policy.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
stage "testing: ctest ($(nproc) jobs, OMP_WAIT_POLICY=$OMP_WAIT_POLICY)" \
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
printf '\ntest: done in %s\n' "$(mmss $(($(date +%s) - MPB_T0)))"
