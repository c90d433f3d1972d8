#!/usr/bin/env bash
# Installs what is missing, builds the runner (only: scripts/test.sh builds the rest),
# runs the default experiment and writes its report, with a banner per stage.
# Arguments go to the runner, e.g. --filter precision=fp32,fusion=off,loss_scale=none.
# Environment: as scripts/build.sh, plus MPB_RESULTS_DIR (default: results, relative
# to the repository root).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_BUILD_DIR:-$root/build}
results=${MPB_RESULTS_DIR:-results}

source "$root/scripts/lib/stage.sh"   # stage "NAME: what" COMMAND..., mmss SECONDS

bash "$root/scripts/build.sh" runner
cd "$root"
stage "running: experiments/quickstart.yaml, results in $results/quickstart" \
  "$build/runner" experiments/quickstart.yaml --out "$results" "$@"
stage "reporting: scripts/report.py $results/quickstart" \
  /usr/bin/python3 scripts/report.py "$results/quickstart"
printf '\nquickstart: done in %s; the report: %s\n' "$(mmss $(($(date +%s) - MPB_T0)))" \
  "$results/quickstart/report/index.html"
