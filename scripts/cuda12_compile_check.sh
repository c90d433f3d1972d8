#!/usr/bin/env bash
# Compiles the CUDA backend against CUDA 12.4 and cuDNN 9.1 (issue 30): people with an
# RTX 3090/4090 or an A100 mostly run CUDA 12.x with a driver older than 580, which cannot
# load CUDA 13 binaries, so the backend must also build with 12.x. This proves it without
# a GPU and without installing anything system-wide:
#   1. downloads (once; kept in the cache) the pinned CUDA 12.4 wheels from PyPI (headers,
#      libraries, ptxas, libdevice, cuDNN 9.1, NVTX, CCCL, NVRTC), the pinned cudnn_frontend
#      wheel the normal build uses, and Debian trixie's nvidia-cuda-toolkit 12.4.131 .deb:
#      the nvcc wheels hold only ptxas and libnvvm, not the nvcc driver, cicc, cudafe++,
#      fatbinary or nvlink, and Debian's package is the only other registry that has them;
#   2. lays them out as a toolkit (bin/ nvcc ptxas..., nvvm/, include/, lib64/) with its own
#      nvcc.profile, in the cache;
#   3. configures its own build directory (never the shared build/) with that nvcc,
#      MPB_CUDA=ON, MPB_WERROR=ON (host and device warnings are errors) and SASS for
#      sm_80, sm_86 and sm_90, and builds mpb_cuda: every .cu and .cpp of backends/cuda
#      (the only files that include CUDA headers; ops/dtype_io.h's CUDA parts are
#      compiled through them), plus mpb_core below it;
#   4. links every object of libmpb_cuda.a into an executable against CUDA 12.4's
#      cudart, cuBLAS/cuBLASLt, NVRTC and cuDNN 9.1, so an API that 12.x lacks fails here
#      even when its header happened to declare it.
# Usage: scripts/cuda12_compile_check.sh
# Environment: MPB_CUDA12_CACHE (default ~/.cache/mpbench/cuda12), MPB_CUDA12_BUILD_DIR
# (default build-cu12), MPB_CUDA12_ARCHITECTURES (default 80-real;86-real;90-real),
# MPB_CUDA12_DEBIAN_MIRROR (default: the mirror serving bookworm in this machine's apt sources),
# MPB_BUILD_LOCK (a file: the compile steps run under `flock` on it, for shared machines).
# Downloads about 1.1 GB the first time (docs/TESTING.md has the sizes and times).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${MPB_CUDA12_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mpbench/cuda12}
build=${MPB_CUDA12_BUILD_DIR:-$root/build-cu12}
archs=${MPB_CUDA12_ARCHITECTURES:-80-real;86-real;90-real}
source "$root/scripts/lib/stage.sh"   # stage "NAME: what" COMMAND..., mmss SECONDS
source "$root/scripts/lib/apt_mirror.sh"   # find_mirror SUITE
die() { echo "cuda12_compile_check: $*" >&2; exit 1; }
# locked COMMAND...: COMMAND (a shell function too) holding MPB_BUILD_LOCK where one is set.
locked() { if [[ -n ${MPB_BUILD_LOCK:-} ]]; then (flock 9 && "$@") 9>>"$MPB_BUILD_LOCK"; else "$@"; fi; }

# ---- what is downloaded: pinned versions and SHA-256s -----------------------------------
# CUDA 12.4 is the oldest 12.x the backend promises (docs/GPU.md): an API that appeared
# later in 12.x fails here. cuDNN 9.1.0 is PyTorch 2.4/2.5's (cu12 builds), the oldest
# cuDNN 9 a CUDA 12 user is likely to have beside PyTorch.
toolkit_version=12.4.131
requirements=$(cat <<'EOF'
nvidia-cuda-nvcc-cu12==12.4.131 --hash=sha256:e4c9a35435c3b0e36c6397c5696334c9ea6650e524736cbd1c5d345ea099bb04
nvidia-cuda-runtime-cu12==12.4.127 --hash=sha256:64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5
nvidia-cublas-cu12==12.4.5.8 --hash=sha256:2fc8da60df463fdefa81e323eef2e36489e1c94335b5358bcb38360adf75ac9b
nvidia-cudnn-cu12==9.1.0.70 --hash=sha256:165764f44ef8c61fcdfdfdbe769d687e06374059fbb388b6c89ecb0e28793a6f
nvidia-nvtx-cu12==12.4.127 --hash=sha256:781e950d9b9f60d8241ccea575b32f5105a5baf4c2351cab5256a24869f12a1a
nvidia-cuda-cccl-cu12==12.4.127.post1 --hash=sha256:2027fa5fc75fbee703bf24e8275a40a605cf94a3e8fef8a7187897d49b34facb
nvidia-cuda-nvrtc-cu12==12.4.127 --hash=sha256:a178759ebb095827bd30ef56598ec182b85547f1508941a3d560eb7ea1fbf338
nvidia-cudnn-frontend==1.32.0 --hash=sha256:c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
EOF
)
# The 12.4 runtime wheel has only libcudart.so.12. CMake's compiler check links a test
# program with the static runtime (CMakeDetermineCompilerABI forces it) and, without it,
# learns no implicit include directories (then /usr/include comes back as -isystem and
# libstdc++'s #include_next <math.h> fails). The 12.9 runtime wheel is the nearest with
# libcudart_static.a: used for that test program only (cudart 12.9 runs code built by
# 12.4); mpb_cuda and the link check below use 12.4's libcudart.so. Its libcudadevrt.a
# (the device runtime, for relocatable device code) is refused by 12.4's nvlink ("newer
# than toolkit"), and this project builds no relocatable device code
# (CUDA_SEPARABLE_COMPILATION OFF), so the tree gets an empty libcudadevrt.a for the
# `-lcudadevrt` that nvcc and CMake add to every link.
static_runtime_requirement="nvidia-cuda-runtime-cu12==12.9.79 --hash=sha256:25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3"
deb_name=nvidia-cuda-toolkit
deb_version=12.4.131~12.4.1-2
deb_file=nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb
deb_sha256=cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319

for tool in python3 unzip dpkg-deb apt-get cmake g++ ar sha256sum; do
  command -v "$tool" >/dev/null || die "'$tool' not found"
done
python3 -m pip --version >/dev/null 2>&1 || die "python3 has no pip (Debian package python3-pip)"
mkdir -p "$cache/wheels" "$cache/wheels-static-runtime" "$cache/debs"
# This machine's CUDA 13 must not leak into the CUDA 12 build (LIBRARY_PATH names its stubs).
unset LIBRARY_PATH CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH CUDA_HOME CUDA_PATH

# ---- 1. downloads ------------------------------------------------------------------------
download_wheels() {
  # --require-hashes: pip checks each file, cached or new, against the pins above.
  printf '%s\n' "$requirements" >"$cache/requirements.txt"
  printf '%s\n' "$static_runtime_requirement" >"$cache/requirements-static-runtime.txt"
  local pip=(python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check --require-hashes
             --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --python-version 3.11
             --implementation cp --abi cp311 --abi none)
  "${pip[@]}" -d "$cache/wheels" -r "$cache/requirements.txt"
  "${pip[@]}" -d "$cache/wheels-static-runtime" -r "$cache/requirements-static-runtime.txt"
}
download_deb() {
  local deb=$cache/debs/$deb_file apt=$cache/apt-trixie
  if [[ ! -f $deb ]]; then
    # Its own apt state: the machine's sources and package lists are not touched.
    mkdir -p "$apt/lists/partial" "$apt/archives/partial"
    # trixie from the mirror that serves this machine's bookworm (no host is written here).
    local mirror=${MPB_CUDA12_DEBIAN_MIRROR:-$(find_mirror bookworm || true)}
    [[ -n $mirror ]] || die "no apt source for Debian bookworm in /etc/apt/sources.list(.d); set MPB_CUDA12_DEBIAN_MIRROR"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie non-free" >"$apt/sources.list"
    local opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
                -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt" -o Dir::State::status=/dev/null
                -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" -qq update
    (cd "$cache/debs" && apt-get "${opts[@]}" -qq download "$deb_name=$deb_version") ||
      die "apt-get download $deb_name=$deb_version from Debian trixie failed (a newer Debian revision? update the pin)"
  fi
  [[ $(sha256sum <"$deb" | cut -d' ' -f1) == "$deb_sha256" ]] ||
    { rm -f "$deb"; die "$deb does not have the pinned SHA-256 $deb_sha256 (removed; run again)"; }
}
stage "downloading: CUDA $toolkit_version wheels (PyPI) into $cache/wheels" download_wheels
stage "downloading: Debian trixie's $deb_name $deb_version (nvcc, cicc, cudafe++, fatbinary, nvlink)" download_deb
echo "cache: $(du -sh "$cache/wheels" | cut -f1) of wheels, $(du -sh "$cache/debs" | cut -f1) of .deb"

# ---- 2. the toolkit tree -----------------------------------------------------------------
toolkit=$cache/toolkit-$toolkit_version
assemble_toolkit() {
  local tmp=$toolkit.tmp w pkg
  rm -rf "$tmp" && mkdir -p "$tmp"/{bin,include,lib64,nvvm/bin,x}
  for w in "$cache"/wheels/nvidia_*cu12*.whl; do
    # cuDNN 9's libcudnn.so.9 loads its sub-libraries (libcudnn_engines_*, 1 GB unpacked)
    # at run time only: linking needs the shim alone.
    local skip=('*/__init__.py')
    [[ $(basename "$w") == nvidia_cudnn_cu12-* ]] && skip+=('nvidia/cudnn/lib/libcudnn_*')
    unzip -q -o "$w" 'nvidia/*' -x "${skip[@]}" -d "$tmp/x"
  done
  for pkg in "$tmp"/x/nvidia/*/; do
    [[ -d $pkg/include ]] && cp -a "$pkg/include/." "$tmp/include/"
    [[ -d $pkg/lib ]] && find "$pkg/lib" -maxdepth 1 -name '*.so*' -exec cp -a {} "$tmp/lib64/" \;
  done
  unzip -q -o -j "$cache"/wheels-static-runtime/nvidia_cuda_runtime_cu12-12.9.79-*.whl \
    'nvidia/cuda_runtime/lib/libcudart_static.a' -d "$tmp/lib64"
  ar rc "$tmp/lib64/libcudadevrt.a"
  cp -a "$tmp/x/nvidia/cuda_nvcc/bin/ptxas" "$tmp/bin/"
  cp -a "$tmp/x/nvidia/cuda_nvcc/nvvm/." "$tmp/nvvm/"
  dpkg-deb -x "$cache/debs/$deb_file" "$tmp/x/deb"
  local d=$tmp/x/deb/usr
  cp -a "$d/lib/nvidia-cuda-toolkit/bin/nvcc" "$d/lib/nvidia-cuda-toolkit/bin/crt" "$tmp/bin/"
  cp -a "$d/lib/nvidia-cuda-toolkit/bin/cicc" "$tmp/nvvm/bin/"
  cp -a "$d/bin/cudafe++" "$d/bin/fatbinary" "$d/bin/nvlink" "$d/bin/bin2c" "$d/bin/nvprune" "$d/bin/cuobjdump" "$tmp/bin/"
  # nvcc reads nvcc.profile beside itself; this one points at the tree (Debian's points at /usr).
  cat >"$tmp/bin/nvcc.profile" <<'EOF'
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS +=
PTXAS_FLAGS +=
EOF
  # The wheels hold only versioned sonames; the linker (-lcudart) wants the plain names.
  (cd "$tmp/lib64" && for so in lib*.so.[0-9]*; do
     base=${so%%.so.*}.so
     [[ -e $base ]] || ln -s "$so" "$base"
   done)
  rm -rf "$tmp/x"
  echo "$stamp" >"$tmp/stamp"
  rm -rf "$toolkit" && mv "$tmp" "$toolkit"
}
# The tree is remade when a pin or the way it is laid out changes.
stamp=$({ printf '%s\n' "$requirements" "$static_runtime_requirement" "$deb_sha256"; declare -f assemble_toolkit; } |
        sha256sum | cut -d' ' -f1)
if [[ ! -f $toolkit/stamp || $(cat "$toolkit/stamp") != "$stamp" ]]; then
  stage "unpacking: the wheels and the .deb into $toolkit" assemble_toolkit
fi
nvcc=$toolkit/bin/nvcc
"$nvcc" --version | grep -q "release ${toolkit_version%.*}" || die "$nvcc is not CUDA ${toolkit_version%.*}: $("$nvcc" --version | tail -n 2)"
frontend_wheel=$(ls "$cache"/wheels/nvidia_cudnn_frontend-1.32.0-*.whl)

# ---- 3. configure and compile ------------------------------------------------------------
# The wheels have no libcudart_static.a: the shared runtime (what PyTorch's CUDA 12 wheels
# ship too). CUDAToolkit_ROOT makes FindCUDAToolkit and the cuDNN lookup use the tree,
# not /usr/local/cuda (CUDA 13) on the same machine.
configure() {
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$toolkit" \
    -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared -DCMAKE_CUDA_FLAGS="-cudart shared" \
    -DMPB_CUDA=ON -DMPB_WERROR=ON -DMPB_CUDA_ARCHITECTURES="$archs" \
    -DMPB_CUDNN_FRONTEND=ON -DMPB_CUDNN_FRONTEND_WHEEL="$frontend_wheel" \
    -DMPB_CUDNN_LIBRARY="$toolkit/lib64/libcudnn.so" -DMPB_BUILD_BENCH=OFF -DMPB_BUILD_TESTS=OFF >"$build/cuda12_configure.log" 2>&1 ||
    { cat "$build/cuda12_configure.log"; die "configuring $build with CUDA $toolkit_version failed"; }
  grep -q "CUDA backend ON.*cuDNN SDPA attention ON" "$build/cuda12_configure.log" || { cat "$build/cuda12_configure.log"; die "the CUDA backend is not on in $build"; }
  grep -E "CUDA architectures|has no compute_|cudnn_frontend|CUDA backend" "$build/cuda12_configure.log"
}
stage "configuring: $build with nvcc $toolkit_version, archs $archs" configure
stage "compiling: mpb_cuda (every CUDA translation unit) with CUDA $toolkit_version, warnings as errors" \
  locked cmake --build "$build" -j"$(nproc)" --target mpb_cuda

# ---- 4. link ------------------------------------------------------------------------------
link_check() {
  printf 'int main() { return 0; }\n' >"$build/cuda12_link_check.cpp"
  g++ -o "$build/cuda12_link_check" "$build/cuda12_link_check.cpp" \
    -Wl,--whole-archive "$build/libmpb_cuda.a" -Wl,--no-whole-archive "$build/libmpb_core.a" \
    -L"$toolkit/lib64" -Wl,-rpath-link,"$toolkit/lib64" -lcudnn -lcublasLt -lcublas -lnvrtc -lcudart -lpthread -ldl
  echo "linked: every object of libmpb_cuda.a against $(cd "$toolkit/lib64" && ls libcudart.so.* libcublasLt.so.* libcudnn.so.? libnvrtc.so.* | paste -sd ' ')"
}
stage "linking: libmpb_cuda.a's every object against CUDA $toolkit_version and cuDNN 9.1" locked link_check
echo "cuda12_compile_check: OK (CUDA $toolkit_version, archs $archs)"
