#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (CTest).
# GPU tests (label `gpu`) skip cleanly on a machine without a CUDA device.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
