#!/usr/bin/env bash
# Installs what mpbench needs on a fresh Debian/Ubuntu machine, from Debian's packages only.
# Skips apt entirely when everything is already present, so re-running it is cheap.
# Usage: install_deps.sh [--fuzz | --with-slurm]
#   --fuzz: also clang, libFuzzer and llvm-symbolizer (scripts/fuzz_config.sh asks for them)
#   --with-slurm: also Slurm's controller, node daemon, clients and munge, for the
#     real-Slurm test (tests/slurm/test_slurm.py, CTest label slurm; CI uses it)
# The README's commands need neither.
set -euo pipefail

packages=(
  build-essential cmake git pkg-config
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libdnnl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  ocl-icd-opencl-dev opencl-c-headers  # Debian's oneDNN CMake package (dnnl-config.cmake) calls find_package(OpenCL)
  python3 python3-numpy python3-pandas python3-matplotlib python3-scipy python3-torch
  libopenblas0-pthread  # an optimised BLAS for PyTorch/numpy: the speed comparison's baseline is then fair
  chromium
)
case ${1:-} in
  "") ;;
  --fuzz)
    # clang-14 and its runtime libraries (libclang_rt.fuzzer: libFuzzer; ASan/UBSan for
    # clang), and llvm-14 for llvm-symbolizer (file:line in sanitizer reports).
    packages+=(clang-14 libclang-rt-14-dev llvm-14) ;;
  --with-slurm)
    # Debian's Slurm 22.05 and munge; the test starts its own daemons, so the
    # services Debian enables are not needed (in a container they do not start).
    packages+=(slurmctld slurmd slurm-client munge) ;;
  *)
    echo "usage: install_deps.sh [--fuzz | --with-slurm]" >&2
    exit 2 ;;
esac

find_missing() {
  missing=()
  local p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
}

find_missing
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # apt-get can exit 0 when interrupted part-way: check that everything is there now.
  find_missing
  if ((${#missing[@]})); then
    echo "install_deps: still not installed: ${missing[*]}" >&2
    exit 1
  fi
else
  echo "install_deps: all packages present"
fi
