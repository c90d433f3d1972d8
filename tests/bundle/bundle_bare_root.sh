#!/bin/bash
# The bundle on a machine with nothing installed (written into the bare root by
# scripts/fresh_machine_test.sh). $1: the quickstart cell filter.
set -euo pipefail
unset LD_LIBRARY_PATH
ldconfig  # CUDA's directory, as a CUDA install lists it in /etc/ld.so.conf.d
fail() { echo "fresh_machine_test (bundle): $*" >&2; exit 1; }
for tool in c++ g++ cmake python3; do
  ! command -v "$tool" >/dev/null || fail "the bare root has $tool: not a machine with nothing installed"
done
dev=$(dpkg-query -W -f '${Package}\n' | grep -E -- '-dev$' || true)
[[ -z $dev ]] || fail "the bare root has -dev packages: $dev"
mkdir -p /opt /var/tmp/elsewhere
tar -C /opt -xzf /var/tmp/mpbench-gpu-bundle.tar.gz
b=/opt/mpbench-gpu
cd /var/tmp/elsewhere
"$b/bin/mpbench-env" || echo "(mpbench-env: a CUDA library is missing here, the driver at least: expected without a GPU)"
"$b/bin/runner" selftest --device cpu
"$b/bin/runner" "$b/experiments/quickstart.yaml" --device cpu --out results --filter "$1"
ls results/quickstart/cells/*.json >/dev/null || fail "the quickstart wrote no cell"
echo "the bundle ran in the bare root"
