#!/usr/bin/env bash
# Installs what mpbench needs on a fresh Debian/Ubuntu machine, from Debian's packages:
# by default what building it, running an experiment and writing its report need; the
# heavy packages only some commands use come with a flag (issue 41: quickstart no longer
# installs a browser, PyTorch and the Python documentation for everyone).
# Skips apt and pip entirely when everything is already present, so re-running it is cheap.
# Usage: install_deps.sh [--tests | --corpus | --fuzz | --with-slurm]
#   --tests: also what the test suite uses (scripts/test.sh passes it): chromium (the
#     report's screenshot tests), PyTorch with an optimised BLAS (the PyTorch references),
#     the text corpus (below), patchelf (the GPU bundle test), and ml-dtypes from PyPI
#     (the independent FP8 reference of tests/numerics/test_fp8_ml_dtypes.py; without it
#     that test skips and nothing else changes)
#   --corpus: also the offline English corpus, python3-doc's prose extracted to
#     /usr/local/share/mpbench/python-docs.txt (experiments/convergence.yaml reads it)
#   --fuzz: also clang, libFuzzer and llvm-symbolizer (scripts/fuzz_config.sh asks for them)
#   --with-slurm: also Slurm's controller, node daemon, clients and munge, for the
#     real-Slurm test (tests/slurm/test_slurm.py, CTest label slurm; CI uses it)
# The README's first command (scripts/quickstart.sh) needs none of them.
set -euo pipefail

packages=(
  build-essential cmake git pkg-config
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libdnnl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  ocl-icd-opencl-dev opencl-c-headers  # Debian's oneDNN CMake package (dnnl-config.cmake) calls find_package(OpenCL)
  python3 python3-numpy python3-pandas python3-matplotlib python3-scipy
  libsentencepiece-dev  # data.kind text's subword tokenizer (models/subword_tokenizer.h)
)
corpus_packages=(python3-doc)  # the offline English corpus: the Python docs' prose (PSF License), extracted below
want_corpus=0 want_ml_dtypes=0
case ${1:-} in
  "") ;;
  --tests)
    packages+=(
      chromium  # tests/scripts/test_report_browser.py: the report in a headless browser
      python3-torch libopenblas0-pthread  # the PyTorch references; an optimised BLAS keeps the speed comparison fair
      patchelf  # scripts/gpu_bundle.sh sets the bundle's RUNPATH ($ORIGIN/../lib) with it (tests/bundle)
      python3-pip ca-certificates  # for ml-dtypes below (pip verifies PyPI's certificate: a minimal Debian has no CA bundle)
      python3-venv  # tests/scripts/test_packaging.py: pip install -e scripts into a fresh venv
      python3-mpmath  # tests/numerics/test_stats_mpmath.py: the t distribution against 50-digit values
      "${corpus_packages[@]}")
    want_corpus=1 want_ml_dtypes=1 ;;
  --corpus)
    packages+=("${corpus_packages[@]}")
    want_corpus=1 ;;
  --fuzz)
    # clang-14 and its runtime libraries (libclang_rt.fuzzer: libFuzzer; ASan/UBSan for
    # clang), and llvm-14 for llvm-symbolizer (file:line in sanitizer reports).
    packages+=(clang-14 libclang-rt-14-dev llvm-14) ;;
  --with-slurm)
    # Debian's Slurm 22.05 and munge; the test starts its own daemons, so the
    # services Debian enables are not needed (in a container they do not start).
    packages+=(slurmctld slurmd slurm-client munge) ;;
  *)
    echo "usage: install_deps.sh [--tests | --corpus | --fuzz | --with-slurm]" >&2
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

# The offline English corpus for data.kind text (docs/CONFIG.md): python3-doc's
# reStructuredText sources as plain prose, one document per page, documents
# separated by form feeds. MPB_CORPUS_DIR overrides where it goes. Rebuilt only
# when missing, so re-running this script is cheap; extraction takes about a second.
corpus_dir=${MPB_CORPUS_DIR:-/usr/local/share/mpbench}
corpus=$corpus_dir/python-docs.txt
if ((!want_corpus)); then
  :
elif [[ ! -s $corpus ]]; then
  sudo_cmd=()
  [[ $(id -u) -ne 0 && ! -w $(dirname "$corpus_dir") ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" mkdir -p "$corpus_dir"
  "${sudo_cmd[@]}" /usr/bin/python3 "$(dirname "$0")/extract_text_corpus.py" "$corpus"
else
  echo "install_deps: corpus present: $corpus"
fi

# ml-dtypes (float8_e4m3fn, float8_e5m2) is not packaged by Debian. Pinned to
# 0.5.4 and installed without dependencies, so pip never replaces Debian's
# numpy: 0.5.4 declares numpy>=1.21 and works with Debian 12's 1.24, while
# 0.6.0, the newest, imports numpy.exceptions, which 1.24 lacks. A failure
# (no network) is a warning: only the FP8 comparison test needs it, and it
# then reports itself skipped.
if ((want_ml_dtypes)) && ! /usr/bin/python3 -c 'import ml_dtypes' 2>/dev/null; then
  echo "install_deps: installing ml-dtypes==0.5.4 from PyPI (test-only)"
  if ! /usr/bin/python3 -m pip install -q --root-user-action=ignore --break-system-packages --no-deps 'ml-dtypes==0.5.4'; then
    echo "install_deps: warning: could not install ml-dtypes; py.test_fp8_ml_dtypes will be skipped" >&2
  fi
fi
