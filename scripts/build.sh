#!/usr/bin/env bash
# Installs what is missing (Debian packages), then configures and builds mpbench.
# Environment: MPB_BUILD_DIR (default: build), MPB_CUDA (AUTO|ON|OFF, default AUTO),
# MPB_WERROR (ON|OFF, default OFF), MPB_CUDA_ARCHITECTURES (default 80;86;89;90).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_BUILD_DIR:-$root/build}

bash "$root/scripts/install_deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DMPB_CUDA="${MPB_CUDA:-AUTO}" -DMPB_WERROR="${MPB_WERROR:-OFF}" \
  -DMPB_CUDA_ARCHITECTURES="${MPB_CUDA_ARCHITECTURES:-80;86;89;90}"
cmake --build "$build" -j"$(nproc)"
