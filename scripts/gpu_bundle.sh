#!/usr/bin/env bash
# Packs the already-built binaries of a CUDA build into a relocatable tarball for a GPU
# machine where nothing can be installed (issue 11; the run-book is docs/GPU.md):
#   bin/      runner, the GPU test binaries (CTest label gpu), mpb_bench, mpbench-env
#   lib/      every shared library they need except glibc's and CUDA's/NVIDIA's
#             (yaml-cpp, oneDNN, OpenCL's loader, OpenMP, Google Benchmark, libstdc++, libgcc_s)
#   experiments/, scripts/*.py, bench/*.py, docs/GPU.md, MANIFEST.md
#   ledger.jsonl  the lease ledger (results/gpu/ledger.jsonl): `bin/gpu-session next` reads it
#             against MANIFEST.md's CUDA sources hash (scripts/gpu_ledger.py cuda-hash)
# The binaries get RUNPATH $ORIGIN/../lib and the libraries RUNPATH $ORIGIN; copies are
# stripped. CUDA (cudart 13, cuBLAS/cuBLASLt, cuDNN 9, NVRTC) comes from the target:
# lib/cuda-needed.txt lists the sonames the binaries NEED, and bin/mpbench-env finds them.
# Usage: scripts/gpu_bundle.sh [--build-dir build] [--out mpbench-gpu-bundle.tar.gz]
#   Nothing is rebuilt: it fails when a binary is missing, the build has CUDA off, or its
#   CUDA architectures do not include 80;86;89;90 (SASS) and Blackwell's 100;120 (PTX). Needs patchelf (scripts/install_deps.sh --tests),
#   binutils (strip, readelf, objcopy), python3.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$src/build
out=$PWD/mpbench-gpu-bundle.tar.gz
budget_mib=60
while (($#)); do
  case $1 in
    --build-dir) build=${2:?--build-dir needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a file name}; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_bundle: unknown argument '$1' (usage: gpu_bundle.sh [--build-dir DIR] [--out FILE.tar.gz])" >&2; exit 2 ;;
  esac
done
die() { echo "gpu_bundle: $*" >&2; exit 1; }
[[ -d $build ]] || die "no build directory '$build'"
build=$(cd "$build" && pwd)
[[ $out = /* ]] || out=$PWD/$out
[[ -d $(dirname "$out") ]] || die "the output's directory $(dirname "$out") does not exist"

for tool in patchelf strip readelf objcopy python3 tar gzip ldd; do
  command -v "$tool" >/dev/null || die "'$tool' not found$([[ $tool == patchelf ]] && echo ' (Debian package patchelf; scripts/install_deps.sh --tests installs it)')"
done

# ---- the build: CUDA on, for the four architectures ----------------------------------
cache=$build/CMakeCache.txt
[[ -f $cache ]] || die "$build has no CMakeCache.txt: not a CMake build directory"
cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -n 1; }
cuda_opt=$(cache_get MPB_CUDA)
archs=$(cache_get MPB_CUDA_ARCHITECTURES)
build_type=$(cache_get CMAKE_BUILD_TYPE)
[[ ${cuda_opt^^} != OFF ]] || die "the build has MPB_CUDA=OFF: reconfigure with -DMPB_CUDA=ON and the CUDA 13 toolkit, then build"
[[ -n $archs ]] || die "the build has no MPB_CUDA_ARCHITECTURES: CUDA was not configured (MPB_CUDA=$cuda_opt)"
for sm in 80 86 89 90; do
  [[ ";$archs;" == *";$sm;"* ]] || die "the build's CUDA architectures are '$archs'; the bundle needs 80;86;89;90 (cmake -DMPB_CUDA_ARCHITECTURES='80;86;89;90', then build)"
done

# ---- the binaries ---------------------------------------------------------------------
# The GPU tests are the executables of the CTest entries labelled gpu (tests/CMakeLists.txt).
mapfile -t gpu_tests < <(cd "$build" && ctest -L gpu -N --show-only=json-v1 2>/dev/null | python3 -c '
import json, sys
try:
    tests = json.load(sys.stdin)["tests"]
except Exception:
    sys.exit(0)
for c in sorted({t["command"][0] for t in tests if t.get("command")}):
    print(c)' || true)
if ((${#gpu_tests[@]} == 0)); then
  mapfile -t gpu_tests < <(ls "$build"/tests/test_gpu* "$build"/tests/test_ops_cuda 2>/dev/null | grep -v -E '\.cmake$|\[' || true)
fi
((${#gpu_tests[@]})) || die "no GPU test binaries in $build (CTest label gpu): build them (cmake --build $build)"
binaries=("$build/runner" "${gpu_tests[@]}" "$build/bench/mpb_bench")
for b in "${binaries[@]}"; do
  [[ -f $b ]] || die "missing binary $b: build it first (cmake --build $build --target $(basename "$b"))"
  [[ -x $b && -s $b ]] && readelf -h "$b" >/dev/null 2>&1 ||
    die "$b is empty or not a complete ELF executable (still linking? retry when the build is done)"
done
# The CUDA code in the runner itself, not only the cache: SASS for every architecture.
fatbin=$(python3 "$src/scripts/bundle/fatbin_archs.py" "$build/runner")
sass=$(sed -n 's/^sass //p' <<<"$fatbin")
for sm in 80 86 89 90; do
  [[ " $sass " == *" $sm "* ]] || die "$build/runner holds SASS for '${sass:-nothing}', not sm_$sm: rebuild it for 80;86;89;90"
done
# Blackwell (sm_100 B200, sm_120 RTX 50xx) as PTX that the driver JIT-compiles on first load
# (cmake/Cuda.cmake's MPB_CUDA_PTX_ARCHITECTURES; the bundle is a CUDA 13 build, which has both).
ptx=$(sed -n 's/^ptx //p' <<<"$fatbin")
for sm in 100 120; do
  [[ " $ptx " == *" $sm "* ]] || die "$build/runner holds PTX for '${ptx:-nothing}', not compute_$sm: configure with MPB_CUDA_PTX_ARCHITECTURES '100;120' (the default) and CUDA 12.8+, then build"
done
readelf -d "$build/runner" | grep -q 'NEEDED.*libcudart' || die "$build/runner does not link the CUDA runtime: the CUDA backend is not in it"

# ---- stage ----------------------------------------------------------------------------
stage=$(mktemp -d "${TMPDIR:-/tmp}/mpb-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/mpbench-gpu
mkdir -p "$root/bin" "$root/lib" "$root/docs" "$root/scripts" "$root/bench"

# glibc's libraries, and CUDA's/NVIDIA's (they come from the target).
is_glibc() {
  case $1 in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libmvec.so*|libpthread.so*|libdl.so*|librt.so*|libutil.so*|libresolv.so*|libanl.so*|libnsl.so*|libBrokenLocale.so*) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case $1 in
    libcuda.so*|libcudart*|libcublas*|libcudnn*|libnvrtc*|libnvidia-*|libnccl*|libcufft*|libcurand*|libcusparse*|libcusolver*|libnvJitLink*|libnvToolsExt*|libnvtx*|libcupti*|libnvperf*|libnvblas*|libcufile*|libnpp*|libnvjpeg*) return 0 ;;
  esac
  return 1
}
excluded() { is_glibc "$1" || is_cuda "$1"; }
needed_of() { readelf -d "$1" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]/\1/p'; }

declare -A bundled=()      # soname -> source path
declare -A cuda_needed=()  # CUDA/NVIDIA sonames NEEDED by the binaries or the bundled libraries
queue=("${binaries[@]}")
while ((${#queue[@]})); do
  obj=${queue[0]}; queue=("${queue[@]:1}")
  resolved=$(ldd "$obj" 2>/dev/null || true)
  while read -r so; do
    [[ -n $so ]] || continue
    if excluded "$so"; then
      is_cuda "$so" && cuda_needed[$so]=1
      continue
    fi
    [[ -n ${bundled[$so]:-} ]] && continue
    path=$(awk -v n="$so" '$1 == n && $2 == "=>" {print $3; exit}' <<<"$resolved")
    [[ -n $path && $path != not && -f $path ]] || die "$(basename "$obj") needs $so, which does not resolve on this machine"
    bundled[$so]=$path
    queue+=("$path")
  done < <(needed_of "$obj")
done

for so in "${!bundled[@]}"; do
  cp -L "${bundled[$so]}" "$root/lib/$so"
  chmod 0755 "$root/lib/$so"
  strip --strip-unneeded "$root/lib/$so"
  # The library's own dependencies (libdnnl -> libOpenCL, libgomp) from the same lib/.
  if [[ -n $(needed_of "$root/lib/$so" | while read -r n; do [[ -n ${bundled[$n]:-} ]] && echo y; done) ]]; then
    patchelf --set-rpath '$ORIGIN' "$root/lib/$so"
  fi
done
for b in "${binaries[@]}"; do
  dst=$root/bin/$(basename "$b")
  cp "$b" "$dst"
  strip --strip-unneeded "$dst"
  patchelf --set-rpath '$ORIGIN/../lib' "$dst"   # replaces the build's RUNPATH (/usr/local/cuda/lib)
done
install -m 0755 "$src/scripts/bundle/mpbench-env" "$root/bin/mpbench-env"
install -m 0755 "$src/scripts/bundle/gpu-session" "$root/bin/gpu-session"   # the run-book in lease-sized phases
# The CUDA/NVIDIA sonames the target must provide, one per line: bin/mpbench-env checks these.
printf '%s\n' "${!cuda_needed[@]}" | sed '/^$/d' | sort >"$root/lib/cuda-needed.txt"
cp -r "$src/experiments" "$root/experiments"
cp "$src"/scripts/*.py "$src"/scripts/runner_vocabulary.json "$root/scripts/"
# The entry points above are thin: the code is the mpbench package beside them.
(cd "$src/scripts" && find mpbench -name '*.py' -print0 | xargs -0 cp --parents -t "$root/scripts/")
cp "$src"/bench/*.py "$root/bench/" 2>/dev/null || true
cp "$src/docs/GPU.md" "$root/docs/GPU.md"
# The ledger as committed: which phases have passed at which CUDA sources (empty: none yet).
if [[ -f $src/results/gpu/ledger.jsonl ]]; then cp "$src/results/gpu/ledger.jsonl" "$root/ledger.jsonl"; else : >"$root/ledger.jsonl"; fi
# The ledger's keys: each source group's hash (scripts/mpbench/gpu/sources.py), and the
# device group's alone as the run's "CUDA sources" (what LEDGER.md shows).
source_hashes=$(python3 "$src/scripts/gpu_ledger.py" source-hashes "$src") || die "scripts/gpu_ledger.py source-hashes failed"
cuda_sources=$(sed -n 's/.*device=\([0-9a-f]*\).*/\1/p' <<<"$source_hashes")
[[ -n $cuda_sources ]] || die "scripts/gpu_ledger.py source-hashes gave no device hash: $source_hashes"

# Check: nothing but CUDA, glibc and the bundle's lib/ (LD_LIBRARY_PATH unset).
for f in "$root"/bin/* "$root"/lib/*; do
  head -c 4 "$f" | grep -q ELF || continue
  while read -r so _ path _; do
    excluded "$so" && continue
    path=$(readlink -f "$path" 2>/dev/null || echo "$path")
    [[ $path == "$root/lib/"* ]] || die "after packing, $(basename "$f") resolves $so to $path, not to the bundle's lib/"
  done < <(env -u LD_LIBRARY_PATH ldd "$f" | awk '$2 == "=>"')
done

# ---- MANIFEST.md ----------------------------------------------------------------------
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
dirty=""
[[ -n $(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null) ]] && dirty=" (with uncommitted changes: the binaries were built from a dirty tree)"
compiler=$(cache_get CMAKE_CXX_COMPILER)
cxx_version=$("$compiler" --version 2>/dev/null | head -n 1 || echo "$compiler")
nvcc_version=$(cat "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' | head -n 1)
describe() {
  case $1 in
    runner) echo "the benchmark runner: doctor, experiments (docs/CONFIG.md), merge" ;;
    mpb_bench) echo "Google Benchmark targets: GEMMs, ops, MLP steps (CPU backend; --benchmark_filter=...)" ;;
    test_ops_cuda) echo "GoogleTest: the op-check table on the CUDA backend against the CPU backend (label gpu)" ;;
    test_gpu) echo "GoogleTest: CUDA device tests, step counters, telemetry (label gpu; skip without a GPU)" ;;
    *) echo "GoogleTest binary with CTest label gpu" ;;
  esac
}
{
  echo "# mpbench GPU bundle"
  echo
  echo "- commit: \`$commit\`$dirty"
  echo "- CUDA sources: \`$cuda_sources\` (the device group: backends/cuda and everything it includes, as packed)"
  echo "- sources: \`$source_hashes\` (scripts/mpbench/gpu/sources.py; the ledger keeps a step passed while the groups it runs keep these hashes)"
  echo "- packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), from $build"
  echo "- build type: ${build_type:-unset}; compiler: $cxx_version; CUDA compiler: nvcc ${nvcc_version:-?}"
  echo "- CUDA architectures (MPB_CUDA_ARCHITECTURES): $archs; bin/runner holds SASS for sm_${sass// /, sm_} and PTX for $(sed -n 's/^ptx //p' <<<"$fatbin")"
  echo "- needs on the target: x86-64 Linux with glibc >= $(ldd --version | head -n 1 | awk '{print $NF}') (the build machine's), an NVIDIA driver for CUDA 13 (580+), and $(paste -sd ' ' "$root/lib/cuda-needed.txt" | sed 's/ /, /g') (lib/cuda-needed.txt; bin/mpbench-env finds them)"
  echo
  echo "## Contents"
  echo
  echo "| file | what |"
  echo "|---|---|"
  for b in "${binaries[@]}"; do echo "| bin/$(basename "$b") | $(describe "$(basename "$b")") |"; done
  echo "| bin/mpbench-env | finds the CUDA libraries here and sets LD_LIBRARY_PATH (\`bin/mpbench-env -- CMD\`, or \`eval \"\$(bin/mpbench-env)\"\`) |"
  echo "| bin/gpu-session | the run-book in lease-sized phases: \`bin/gpu-session first OUT\` on a first lease, \`next OUT\` after (--help) |"
  echo "| ledger.jsonl | the lease ledger at packing time (results/gpu/ledger.jsonl): what \`gpu-session next\` reads |"
  echo "| lib/cuda-needed.txt | the CUDA/NVIDIA sonames bin/* and lib/* need from the target (bin/mpbench-env reads it) |"
  for so in $(printf '%s\n' "${!bundled[@]}" | sort); do echo "| lib/$so | from ${bundled[$so]} |"; done
  echo "| experiments/ | the experiment files |"
  echo "| scripts/*.py, bench/*.py | report.py, compare.py, ... and the PyTorch references (python3, numpy, pandas, matplotlib; torch) |"
  echo "| docs/GPU.md | the run-book (at its top) and the CUDA path's notes |"
  echo
  echo "The binaries have RUNPATH \`\$ORIGIN/../lib\`, the libraries \`\$ORIGIN\`; lib/ holds no CUDA or NVIDIA library and no glibc."
  echo
  echo "## Run-book (from this directory; docs/GPU.md has the whole of it)"
  echo
  echo '```'
  echo 'bin/mpbench-env                                                # what CUDA it finds; exit 1 if something is missing'
  echo 'bin/mpbench-env -- bin/runner doctor --device cuda             # preflight: 0 blockers expected'
  for b in "${gpu_tests[@]}"; do echo "bin/mpbench-env -- bin/$(basename "$b") 2>&1 | tee $(basename "$b").txt"; done
  echo '# compute-sanitizer comes with the CUDA toolkit (bin/mpbench-env says whether there is one)'
  for t in "memcheck test_ops_cuda" "memcheck test_gpu" "racecheck test_ops_cuda" "synccheck test_ops_cuda"; do
    set -- $t
    echo "bin/mpbench-env -- compute-sanitizer --tool $1 --error-exitcode 1 bin/$2 2>&1 | tee $1-$2.txt"
  done
  echo 'bin/mpbench-env -- bin/runner experiments/quickstart.yaml --device cuda --out results'
  echo 'python3 scripts/report.py results/quickstart'
  echo 'bin/mpbench-env -- bin/runner experiments/3090_bert.yaml --device cuda --dry-run --assume-gpu h100   # then run it'
  echo '```'
  echo
  echo "## sha256"
  echo
  echo '```'
  (cd "$root" && find bin lib -type f | sort | xargs sha256sum)
  echo '```'
} >"$root/MANIFEST.md"
cp "$root/MANIFEST.md" "$root/README.md"

# ---- pack -----------------------------------------------------------------------------
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out.tmp" mpbench-gpu
mv "$out.tmp" "$out"
size=$(stat -c %s "$out")
mib=$(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}')
echo "gpu_bundle: $out: $mib MiB (${#binaries[@]} binaries, ${#bundled[@]} libraries; unpacked $(du -sm "$root" | cut -f1) MiB)"
(cd "$root" && du -k bin/* lib/* | sort -rn | head -n 6 | awk '{printf "  %6.1f MiB  %s\n", $1 / 1024, $2}')
if ((size > budget_mib * 1048576)); then
  echo "gpu_bundle: warning: over the ${budget_mib} MiB budget by $(awk -v s="$size" -v b="$budget_mib" 'BEGIN {printf "%.1f", s / 1048576 - b}') MiB (the largest files are above)" >&2
fi
