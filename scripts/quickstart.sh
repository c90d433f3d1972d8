#!/usr/bin/env bash
# Installs what is missing, builds, runs the default experiment and writes its report.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_BUILD_DIR:-$root/build}
bash "$root/scripts/build.sh"
cd "$root"
"$build/runner" experiments/quickstart.yaml --out results "$@"
/usr/bin/python3 scripts/report.py results/quickstart
echo "report: results/quickstart/report/index.html"
