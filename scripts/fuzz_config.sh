#!/usr/bin/env bash
# Fuzzes the experiment-file loader for SECONDS (default 120) with libFuzzer: builds
# tests/fuzz/fuzz_config with clang (MPB_FUZZ=ON: ASan + UBSan + coverage, into
# build-fuzz; only the loader, the schema and core are compiled), then runs it on a
# temporary copy of tests/fuzz/corpus with tests/fuzz/config.dict. What it finds (a
# crash, a sanitizer report, a non-ConfigError exception, an error without file:line:col:
# tests/fuzz/fuzz_config.cpp) is saved as tests/fuzz/findings/crash-* (not committed) and
# fails the script. The committed corpus never grows; docs/TESTING.md says how to fuzz
# longer and keep what it finds.
# Usage: scripts/fuzz_config.sh [SECONDS [LIBFUZZER_FLAG...]]   e.g. 3600 -jobs=2 -workers=2
# Environment: MPB_FUZZ_BUILD_DIR (default: build-fuzz).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${1:-120}
shift || true
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: fuzz_config.sh [SECONDS [LIBFUZZER_FLAG...]]" >&2; exit 2; }

source "$root/scripts/lib/stage.sh"   # stage "NAME: what" COMMAND..., mmss SECONDS

stage "installing: Debian packages that are missing, clang and libFuzzer too (scripts/install_deps.sh --fuzz)" \
  bash "$root/scripts/install_deps.sh" --fuzz
stage "configuring: cmake, build directory $build (clang-14, MPB_FUZZ=ON)" \
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPB_FUZZ=ON -DMPB_CUDA=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
stage "building: fuzz_config ($(nproc) jobs)" \
  cmake --build "$build" -j"$(nproc)" --target fuzz_config

work=$(mktemp -d "${TMPDIR:-/tmp}/mpb-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$root/tests/fuzz/corpus" "$work/corpus"
findings=$root/tests/fuzz/findings
mkdir -p "$findings"
symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
[[ -x $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# -max_len: the largest example is about 2 KB. -timeout: one input (two loads of at
# most 256 cells) taking 30 s is a finding too. `timeout`: the run stops even if
# libFuzzer hangs on its way out (its memory profile after an out-of-memory can take
# longer than the run).
stage "fuzzing: ${seconds}s from $(ls "$work/corpus" | wc -l) seed inputs (findings go to $findings/)" \
  timeout --kill-after=10 $((seconds + 300)) \
  "$build/tests/fuzz/fuzz_config" "$work/corpus" -dict="$root/tests/fuzz/config.dict" \
  -max_total_time="$seconds" -max_len=4096 -timeout=30 -print_final_stats=1 \
  -artifact_prefix="$findings/" "$@"
printf '\nfuzz_config: no findings; done in %s\n' "$(mmss $(($(date +%s) - MPB_T0)))"
