#!/usr/bin/env bash
# scripts/gpu_bundle.sh on the current build: packs a bundle into one temporary
# directory, unpacks it in another and checks that it runs from anywhere with
# LD_LIBRARY_PATH unset: bin/runner's RUNPATH is $ORIGIN/../lib; every library of
# bin/* and lib/* that is neither glibc's nor CUDA's/NVIDIA's resolves inside the
# bundle's lib/ (CUDA's may resolve from the machine: the target provides them);
# `runner doctor --device cpu --selftest-seconds 1`, `runner selftest --device cpu --quick` and `runner --dry-run
# experiments/quickstart.yaml` work from a third directory; bin/mpbench-env runs;
# bin/gpu-session's first phase runs and leaves its summary and tarball.
# (Where CUDA is not in the loader's cache, LD_LIBRARY_PATH holds CUDA's directories only.)
# Usage: test_gpu_bundle.sh SOURCE_DIR BUILD_DIR   (CTest: bundle.test_gpu_bundle, label bundle)
set -euo pipefail
src=${1:?usage: test_gpu_bundle.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: test_gpu_bundle.sh SOURCE_DIR BUILD_DIR}
unset LD_LIBRARY_PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpb-bundle-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/pack" "$tmp/unpack" "$tmp/elsewhere"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== packing"
(cd "$tmp/pack" && bash "$src/scripts/gpu_bundle.sh" --build-dir "$build" --out bundle.tar.gz)
tar -C "$tmp/unpack" -xzf "$tmp/pack/bundle.tar.gz"
b=$tmp/unpack/mpbench-gpu
for f in bin/runner bin/mpb_bench bin/mpbench-env MANIFEST.md docs/GPU.md experiments/quickstart.yaml scripts/report.py; do
  [[ -e $b/$f ]] || fail "the bundle lacks $f"
done
ls "$b"/bin/test_* >/dev/null 2>&1 || fail "the bundle holds no GPU test binary"
grep -qx "libcudart.so.13" "$b/lib/cuda-needed.txt" || fail "lib/cuda-needed.txt does not list libcudart.so.13"
[[ -e $b/bench/torch_bert_model.py ]] || fail "the bundle lacks bench/torch_bert_model.py (torch_bert_gpu.py imports it)"

echo "== RUNPATH"
runpath=$(readelf -d "$b/bin/runner" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[[ $runpath == '$ORIGIN/../lib' ]] || fail "bin/runner's RUNPATH is '$runpath', not \$ORIGIN/../lib"
readelf -d "$b/bin/runner" | grep -q '(RPATH)' && fail "bin/runner has an RPATH (it would override LD_LIBRARY_PATH)"

# CUDA's libraries come from the machine. Where the loader cannot find them without help
# (the fresh-machine test's chroot: /usr/local/cuda is bind-mounted but not in its ld.so
# cache), LD_LIBRARY_PATH names only the CUDA directories bin/mpbench-env finds: every
# other library must still resolve inside the bundle.
if ldd "$b/bin/runner" | grep -E '^\s*lib(cuda|cublas|cudnn|nvrtc)[^ ]* => not found' >/dev/null; then
  eval "$("$b/bin/mpbench-env" --quiet)" || true
  echo "note: CUDA is outside the loader's cache here; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} (mpbench-env's CUDA directories only)"
  [[ -n ${LD_LIBRARY_PATH:-} ]] || fail "the CUDA libraries do not resolve and mpbench-env found none"
fi

echo "== ldd"
for f in "$b"/bin/* "$b"/lib/*; do
  head -c 4 "$f" | grep -q ELF || continue
  out=$(ldd "$f")
  while read -r so arrow path _; do
    [[ $arrow == "=>" ]] || continue
    case $so in
      libc.so*|libm.so*|libmvec.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) continue ;;
      libcuda.so*|libcudart*|libcublas*|libcudnn*|libnvrtc*|libnvidia-*|libnccl*) continue ;;
    esac
    [[ $path != not ]] || fail "$(basename "$f"): $so not found"
    real=$(readlink -f "$path")
    [[ $real == "$b/lib/"* ]] || fail "$(basename "$f"): $so resolves to $real, outside the bundle's lib/"
  done <<<"$out"
done
for so in "$b"/lib/*; do
  case $(basename "$so") in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcud*|libcublas*|libnvrtc*|libnvidia-*|libnccl*)
    fail "the bundle carries $(basename "$so"), which must come from the target" ;;
  esac
done

echo "== runs from another directory"
cd "$tmp/elsewhere"
"$b/bin/runner" doctor --device cpu --selftest-seconds 1 || fail "runner doctor --device cpu failed"
"$b/bin/runner" selftest --device cpu --quick >selftest.txt || fail "runner selftest --device cpu --quick failed: $(cat selftest.txt)"
"$b/bin/runner" --dry-run "$b/experiments/quickstart.yaml" >dry.txt || fail "runner --dry-run failed"
grep -q total dry.txt || fail "the dry run printed no total: $(cat dry.txt)"
"$b/bin/mpbench-env" >env.txt || echo "(mpbench-env: a CUDA library is missing here; fine for this test)"
grep -q '^export LD_LIBRARY_PATH=' env.txt || fail "mpbench-env printed no export line"
"$b/bin/mpbench-env" --quiet -- "$b/bin/runner" --help >/dev/null || fail "mpbench-env -- runner --help failed"
"$b/bin/mpb_bench" --benchmark_list_tests=true >/dev/null || fail "bin/mpb_bench does not start"
"$b/bin/test_gpu" --gtest_list_tests >/dev/null || fail "bin/test_gpu does not start"

echo "== bin/gpu-session (the run-book's first phase; without a GPU its CUDA steps fail or skip)"
rc=0
"$b/bin/gpu-session" nonsense "$tmp/session" >usage.txt 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "gpu-session with an unknown phase exited $rc, not 2: $(cat usage.txt)"
# With CUDA_VISIBLE_DEVICES empty, CUDA sees no GPU on any machine (this test's TIMEOUT is far
# below a real phase): the phase must fail, and say that the GPU tests skipped.
rc=0
CUDA_VISIBLE_DEVICES= "$b/bin/gpu-session" tests "$tmp/session" --budget 60 >session.txt 2>&1 || rc=$?
sum=$tmp/session/tests-summary.txt
[[ -f $sum && -f $tmp/session/tests.tar.gz ]] || fail "gpu-session tests left no summary and tarball: $(cat session.txt)"
for s in mpbench-env doctor gpu-never-run ops-never-run selftest test_ops_cuda test_gpu; do
  grep -q "^$s " "$sum" || fail "the summary has no row for step $s: $(cat "$sum")"
done
listing=$(tar tzf "$tmp/session/tests.tar.gz")
grep -qx 'tests/selftest.txt' <<<"$listing" || fail "the tarball lacks tests/selftest.txt: $listing"
[[ $rc == 1 ]] || fail "gpu-session tests exited $rc without a GPU, not 1: $(cat "$sum")"
# gtest's own count ("[  SKIPPED ] N tests, listed below:"), from a run of its own
n_skipped=$(CUDA_VISIBLE_DEVICES= "$b/bin/test_gpu" 2>&1 | sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\},.*/\1/p')
[[ $n_skipped -gt 0 ]] || fail "bin/test_gpu skipped no test without a GPU"
grep -E "^test_gpu +ok, $n_skipped skipped" "$sum" >/dev/null ||
  fail "the summary does not say that $n_skipped GPU tests skipped: $(cat "$sum")"
grep -E '^selftest +FAILED' "$sum" >/dev/null || fail "selftest --device cuda without a GPU did not fail: $(cat "$sum")"
echo "PASS"
