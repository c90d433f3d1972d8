#!/usr/bin/env bash
# scripts/gpu_bundle.sh on the current build: packs a bundle into one temporary
# directory, unpacks it in another and checks that it runs from anywhere with
# LD_LIBRARY_PATH unset: bin/runner's RUNPATH is $ORIGIN/../lib; every library of
# bin/* and lib/* that is neither glibc's nor CUDA's/NVIDIA's resolves inside the
# bundle's lib/ (CUDA's may resolve from the machine: the target provides them);
# `runner doctor --device cpu --selftest-seconds 1`, `runner selftest --device cpu --quick` and `runner --dry-run
# experiments/quickstart.yaml` work from a third directory; bin/mpbench-env runs;
# `bin/gpu-session first` runs end to end inside its 450-s budget, every planned step
# with a row, and leaves its summary and tarball; `gpu_ledger.py add` takes the summary and
# `gpu-session which` picks the phase from planted ledgers.
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
for f in bin/runner bin/mpb_bench bin/mpbench-env MANIFEST.md docs/GPU.md experiments/quickstart.yaml scripts/report.py scripts/mpbench/report/build.py \
         scripts/mpbench/results/__init__.py scripts/runner_vocabulary.json; do
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

echo "== bin/gpu-session first (the first lease's phase; without a GPU its CUDA steps fail or skip fast)"
rc=0
"$b/bin/gpu-session" nonsense "$tmp/session" >usage.txt 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "gpu-session with an unknown phase exited $rc, not 2: $(cat usage.txt)"
grep -q "first lease" <("$b/bin/gpu-session" --help) || fail "gpu-session --help does not say what to run on a first lease"
# With CUDA_VISIBLE_DEVICES empty, CUDA sees no GPU on any machine. The real budget (450 s):
# the phase must end inside it, run every planned step (none "not run (budget)"), fail,
# say that the GPU tests skipped, and leave both files.
rc=0
t0=$SECONDS
CUDA_VISIBLE_DEVICES='' "$b/bin/gpu-session" first "$tmp/session" >session.txt 2>&1 || rc=$?
wall=$((SECONDS - t0))
cat "$tmp/session/first-summary.txt" 2>/dev/null || true
sum=$tmp/session/first-summary.txt
[[ -f $sum && -f $tmp/session/first.tar.gz ]] || fail "gpu-session first left no summary and tarball: $(cat session.txt)"
((wall <= 450)) || fail "gpu-session first took $wall s, over its 450-s budget"
grep -E '^gpu-session first: .*, [0-9]+ s of a 450-s budget' "$sum" >/dev/null || fail "the summary's first line is not the budget line: $(head -n 1 "$sum")"
mapfile -t planned < <("$b/bin/gpu-session" --plan | awk -F'\t' '$1 == "first" && $2 != "budget" {print $2}')
((${#planned[@]} >= 8)) || fail "gpu-session --plan lists ${#planned[@]} steps for first"
for s in "${planned[@]}"; do
  grep -q "^$s " "$sum" || fail "the summary has no row for step $s: $(cat "$sum")"
done
grep -q 'not run (budget)' "$sum" && fail "a step of first did not run for lack of budget on a machine where every step fails fast: $(cat "$sum")"
packed_commit=$(sed -n 's/^- commit: `\([^`]*\)`.*/\1/p' "$b/MANIFEST.md")  # HEAD may have moved since
grep -q "^bundle: commit $packed_commit, CUDA sources [0-9a-f]\{16\}$" "$sum" ||
  fail "the summary does not carry the commit and the CUDA sources hash: $(sed -n 2p "$sum")"
listing=$(tar tzf "$tmp/session/first.tar.gz")
for f in first/test_ops_cuda.txt first/steps.tsv first/first-summary.txt; do
  grep -qx "$f" <<<"$listing" || fail "the tarball lacks $f: $listing"
done
[[ $rc == 1 ]] || fail "gpu-session first exited $rc without a GPU, not 1: $(cat "$sum")"
# gtest's own count ("[  SKIPPED ] N tests, listed below:"), from a run of its own; the phase
# runs test_gpu in two steps (the never-run tests first, then the rest)
n_skipped=$(CUDA_VISIBLE_DEVICES='' "$b/bin/test_gpu" 2>&1 | sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\},.*/\1/p')
[[ $n_skipped -gt 0 ]] || fail "bin/test_gpu skipped no test without a GPU"
said=$(sed -n -E 's/^(gpu-never-run|test_gpu-rest) +ok, ([0-9]+) skipped.*/\2/p' "$sum" | awk '{s += $1} END {print s + 0}')
[[ $said == "$n_skipped" ]] || fail "the summary says ${said:-no} GPU tests skipped, not $n_skipped: $(cat "$sum")"
grep -E '^bert-cell +FAILED' "$sum" >/dev/null || fail "the BERT cell on --device cuda without a GPU did not fail: $(cat "$sum")"

echo "== the ledger: add the summary, then \`gpu-session which\` with planted ledgers"
python3 "$b/scripts/gpu_ledger.py" add "$sum" --dir "$tmp/ledger" >/dev/null || fail "gpu_ledger.py add refused the summary"
cp "$tmp/ledger/ledger.jsonl" "$b/ledger.jsonl"
which=$("$b/bin/gpu-session" which) || fail "gpu-session which failed: $which"
grep -qx 'phase: first' <<<"$which" || fail "after a failed first, which does not say first: $which"
# The same record with every step passed: next goes on to the lease, running all of it
# (nothing of the lease has run at these sources).
python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).readline())
for s in r["steps"]: s["code"] = "ok"
open(sys.argv[1], "w").write(json.dumps(r) + "\n")' "$b/ledger.jsonl"
which=$("$b/bin/gpu-session" which) || fail "gpu-session which failed: $which"
grep -qx 'phase: lease' <<<"$which" || fail "after a passed first, which does not say lease: $which"
grep -qx 'reuse: ' <<<"$which" || fail "a lease with nothing run yet reuses steps: $which"
# The bundle's MANIFEST.md carries the four source groups' hashes, and the summary recorded them.
grep -q '^- sources: `device=[0-9a-f]\{16\},gpu_tests=[0-9a-f]\{16\},host=[0-9a-f]\{16\},torch=[0-9a-f]\{16\}`' \
  "$b/MANIFEST.md" || fail "MANIFEST.md has no sources line: $(grep sources "$b/MANIFEST.md")"
echo "PASS"
