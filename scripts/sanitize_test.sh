#!/usr/bin/env bash
# The C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs it after
# the normal test suite): the CPU backend only (MPB_CUDA=OFF), no benchmarks, built
# into build-asan with MPB_SANITIZE=ON (cmake/Sanitize.cmake: -Og, every target), then
# CTest's unit tests (label unit: GoogleTest, the fuzz corpus replay, layering) and the
# e2e tests that run the sanitized runner binary (interrupt and resume, SIGKILL and
# resume, result-directory safety, the watchdog). Left out: test_e2e (it trains the whole quickstart: 6 minutes under
# ASan, twice as long as everything else together) and the three timing tests (hog, regression
# gate, A/B gate). docs/TESTING.md says how to run test_e2e here.
# Any ASan or UBSan report fails the test that made it; so does a leak (LeakSanitizer;
# tests/sanitizers/lsan.supp). Warnings are not errors here: the normal build checks
# them, and GCC warns falsely under the sanitizers.
# Arguments go to ctest, e.g. -R Numerics. Environment: MPB_ASAN_BUILD_DIR (default:
# build-asan).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MPB_ASAN_BUILD_DIR:-$root/build-asan}

source "$root/scripts/lib/stage.sh"   # stage "NAME: what" COMMAND..., mmss SECONDS

stage "installing: Debian packages that are missing (scripts/install_deps.sh)" \
  bash "$root/scripts/install_deps.sh"
stage "configuring: cmake, build directory $build (MPB_SANITIZE=ON, MPB_CUDA=OFF, no benchmarks)" \
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMPB_SANITIZE=ON -DMPB_CUDA=OFF \
  -DMPB_BUILD_BENCH=OFF -DMPB_WERROR=OFF
stage "building: tests and the runner with ASan + UBSan ($(nproc) jobs)" \
  cmake --build "$build" -j"$(nproc)"

# halt_on_error / abort: the first report fails the test (UBSan's recovery is compiled
# out too). detect_leaks is LeakSanitizer, on by default; the suppressions file says
# which leaks are not ours and why.
export ASAN_OPTIONS="abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# Idle OpenMP threads sleep instead of spinning (libgomp spins by default): with two
# tests at a time on two cores, the spinning threads made the tests five times slower.
# Still two threads per test, so the parallel code runs in parallel under ASan.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
stage "testing: ctest -L unit and the e2e runs of the runner, under ASan + UBSan ($(nproc) jobs)" \
  ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -L 'unit|e2e' \
  -E '^(test_e2e|py\.test_(interleaving_hog|regression_gate|ab_gate))$' "$@"
printf '\nsanitize_test: done in %s\n' "$(mmss $(($(date +%s) - MPB_T0)))"
