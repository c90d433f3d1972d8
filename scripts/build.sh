#!/usr/bin/env bash
# Installs what is missing (Debian packages), then configures and builds mpbench.
# Usage: scripts/build.sh [TARGET...]   (no target: everything, tests and benchmarks included;
#        scripts/quickstart.sh builds only `runner`)
# Environment: MPB_BUILD_DIR (default: build), MPB_CUDA (AUTO|ON|OFF, default AUTO),
# MPB_WERROR (ON|OFF, default OFF), MPB_CUDA_ARCHITECTURES (default 80;86;89;90; Blackwell's
# 100;120 are added as PTX where nvcc has them: cmake/CudaArchitectures.cmake).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_BUILD_DIR:-$root/build}
targets=("$@")

source "$root/scripts/lib/stage.sh"   # stage "NAME: what" COMMAND..., mmss SECONDS

stage "installing: Debian packages that are missing (scripts/install_deps.sh)" \
  bash "$root/scripts/install_deps.sh"
stage "configuring: cmake, build directory $build (MPB_CUDA=${MPB_CUDA:-AUTO})" \
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DMPB_CUDA="${MPB_CUDA:-AUTO}" -DMPB_WERROR="${MPB_WERROR:-OFF}" \
  -DMPB_CUDA_ARCHITECTURES="${MPB_CUDA_ARCHITECTURES:-80;86;89;90}"
if ((${#targets[@]})); then
  stage "building: ${targets[*]} ($(nproc) jobs)" \
    cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
else
  stage "building: everything, tests and benchmarks included ($(nproc) jobs)" \
    cmake --build "$build" -j"$(nproc)"
fi
