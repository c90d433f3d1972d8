#!/usr/bin/env bash
# The README's two commands on a fresh, minimal Debian 12 (bookworm), as a newcomer runs
# them: debootstrap --variant=minbase builds a new root in a temporary directory, and inside
# it, with chroot and as root, runs each COMMAND argument in turn (bash -c, in the
# checkout's copy), by default
#   'bash scripts/quickstart.sh --filter <one cell>'      then      'bash scripts/test.sh'
# (.ci/run names them itself), and then scripts/gpu_bundle.sh, whose bundle must run (runner selftest --device cpu, the
# quickstart's cell) in a second new root with nothing installed (tests/bundle/bundle_bare_root.sh).
# with the CUDA backend forced on (this machine's /usr/local/cuda is bind-mounted, read-only)
# and every warning an error, as in CI. Nothing is there but minbase and what the scripts
# install, so a package missing from scripts/install_deps.sh makes this test fail; so does
# a test that skips although it is not a GPU test (the Python tests skip, exit 77, when
# torch or chromium is missing).
#
# The checkout's working tree is copied into the new root (tracked files as they are now,
# uncommitted changes included, and untracked files that git does not ignore: no build/,
# no results/). The build and the results stay inside the new root, which is removed at
# the end, with everything mounted there unmounted first, on success, failure or Ctrl-C.
#
# Needs root (re-runs itself with sudo), debootstrap (installed with apt when missing) and
# the Debian mirror that this machine's apt sources name (no host is written here).
#
# A command that runs scripts/quickstart.sh must leave the quickstart's report; one that runs
# scripts/test.sh must skip no test but GPU, Slurm and ISA ones (below).
#
# Usage: fresh_machine_test.sh [COMMAND...]
# Environment:
#   MPB_FRESH_MIRROR           Debian mirror (default: the one serving bookworm in
#                              /etc/apt/sources.list or /etc/apt/sources.list.d/*)
#   MPB_FRESH_SECURITY_MIRROR  security mirror (default: the one serving bookworm-security
#                              there; none: no security suite)
#   MPB_FRESH_FILTER           the quickstart cell(s) of the default commands and of the
#                              bundle's run (default: one fp32 cell)
#   MPB_FRESH_CACHE            cache directory (default: ~/.cache/mpbench; empty: no cache).
#                              Holds the debootstrap tarball (rebuilt after
#                              MPB_FRESH_CACHE_DAYS, default 7, days) and the .deb files apt
#                              downloaded. Only downloads are cached: the root is new each
#                              run, and apt reads fresh package lists.
#   MPB_FRESH_TMPDIR           where the temporary root goes (default: /var/tmp)
#   MPB_FRESH_KEEP_BINARIES    a directory to copy the runner and mpb_bench built inside to
#                              (.ci/run runs its later steps with them)
set -euo pipefail

checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
suite=bookworm
variant=minbase
filter=${MPB_FRESH_FILTER:-precision=fp32,fusion=off,loss_scale=none}
commands=("$@")
((${#commands[@]})) || commands=("bash scripts/quickstart.sh --filter $filter" "bash scripts/test.sh")

if ((EUID != 0)); then
  if command -v sudo >/dev/null; then
    exec sudo -E bash "$checkout/scripts/fresh_machine_test.sh" "$@"
  fi
  echo "fresh_machine_test: needs root (mount, chroot, debootstrap)" >&2
  exit 1
fi

t_start=$(date +%s)
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
say() { printf '\n#### fresh_machine_test [%s] %s\n' "$(mmss $(($(date +%s) - t_start)))" "$*"; }

# ---- the mirror, from this machine's apt sources ------------------------------------------
source "$checkout/scripts/lib/apt_mirror.sh"   # find_mirror SUITE

mirror=${MPB_FRESH_MIRROR:-$(find_mirror "$suite" || true)}
if [[ -z $mirror ]]; then
  echo "fresh_machine_test: no apt source for Debian $suite in /etc/apt/sources.list or" \
    "/etc/apt/sources.list.d/; set MPB_FRESH_MIRROR" >&2
  exit 1
fi
security=${MPB_FRESH_SECURITY_MIRROR:-$(find_mirror "$suite-security" || true)}
[[ $security == none ]] && security=

# ---- tools on this machine ------------------------------------------------------------------
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
[[ -f /usr/share/keyrings/debian-archive-keyring.gpg ]] || need+=(debian-archive-keyring)
if ((${#need[@]})); then
  say "installing ${need[*]} on this machine"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# ---- clean-up: unmount everything, then remove the root --------------------------------------
tmproot=
mounts=()
cleanup() {
  local rc=$? i p pids=()
  trap - EXIT INT TERM HUP
  set +e
  if [[ -n $tmproot && -d $tmproot ]]; then
    # Processes still running inside the root (after Ctrl-C, say) would keep mounts busy.
    for p in /proc/[0-9]*; do
      [[ $(readlink "$p/root" 2>/dev/null) == "$tmproot"/* ]] && pids+=("${p#/proc/}")
    done
    if ((${#pids[@]})); then
      kill -TERM "${pids[@]}" 2>/dev/null
      sleep 2
      kill -KILL "${pids[@]}" 2>/dev/null
    fi
  fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" ||
      echo "fresh_machine_test: could not unmount ${mounts[i]}" >&2
  done
  if [[ -n $tmproot && -d $tmproot ]]; then
    # Never rm -rf through a mount point (a bind-mounted /dev or cache would be emptied).
    if findmnt -rn -o TARGET | awk -v r="$tmproot" 'index($0, r "/") == 1 || $0 == r { f = 1 } END { exit !f }'; then
      echo "fresh_machine_test: something is still mounted under $tmproot; not removing it" >&2
      ((rc)) || rc=1
    else
      rm -rf --one-file-system "$tmproot"
      echo "fresh_machine_test: unmounted and removed $tmproot;" \
        "$(mmss $(($(date +%s) - t_start))) in all"
    fi
  fi
  ((rc == 0)) || echo "fresh_machine_test: FAILED (exit $rc) after $(mmss $(($(date +%s) - t_start)))" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounts+=("$2")
  mount --make-private "$2"
  [[ ${3:-} == ro ]] && mount -o remount,bind,ro "$2"
  return 0
}

tmproot=$(mktemp -d "${MPB_FRESH_TMPDIR:-/var/tmp}/mpbench-fresh.XXXXXX")
chmod 755 "$tmproot"

# ---- debootstrap ------------------------------------------------------------------------------
cache=${MPB_FRESH_CACHE-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mpbench}
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
# bootstrap DIR: a new minbase root in DIR, from the cached tarball when there is one.
bootstrap() {
  local dir=$1 tarball scratch
  if [[ -n $cache ]]; then
    mkdir -p "$cache/apt-archives/partial"
    tarball="$cache/debootstrap-$suite-$variant-$arch-$(tr -c 'A-Za-z0-9.\n' _ <<<"$mirror").tar.gz"
    if [[ -f $tarball ]] && [[ -n $(find "$tarball" -mtime +"${MPB_FRESH_CACHE_DAYS:-7}") ]]; then
      echo "the cached debootstrap tarball is older than ${MPB_FRESH_CACHE_DAYS:-7} days: making a new one"
      rm -f "$tarball"
    fi
    if [[ ! -f $tarball ]]; then
      scratch=$(mktemp -d "$tmproot/tarball.XXXXXX")
      debootstrap --variant="$variant" --arch="$arch" --make-tarball="$tarball.part" \
        "$suite" "$scratch" "$mirror"
      mv "$tarball.part" "$tarball"
      rm -rf "$scratch"
    fi
    if debootstrap --variant="$variant" --arch="$arch" --unpack-tarball="$tarball" \
      "$suite" "$dir" "$mirror"; then
      return 0
    fi
    echo "debootstrap from the cached tarball failed: removing it, bootstrapping from the mirror"
    rm -f "$tarball"
    rm -rf --one-file-system "$dir"
  fi
  debootstrap --variant="$variant" --arch="$arch" "$suite" "$dir" "$mirror"
}
say "debootstrap --variant=$variant $suite from $mirror into $tmproot"
t=$(date +%s)
bootstrap "$tmproot/root"
t_debootstrap=$(($(date +%s) - t))
root=$tmproot/root

# ---- the new machine: apt sources, DNS, no services, the checkout -----------------------------
{
  echo "deb $mirror $suite main"
  echo "deb $mirror $suite-updates main"
  [[ -z $security ]] || echo "deb $security $suite-security main"
} >"$root/etc/apt/sources.list"
rm -f "$root/etc/resolv.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"  # a chroot starts no daemons
chmod 755 "$root/usr/sbin/policy-rc.d"

mkdir -p "$root/src"
if git -c safe.directory='*' -C "$checkout" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -c safe.directory='*' -C "$checkout" ls-files -z --cached --others --exclude-standard |
    (cd "$checkout" && while IFS= read -r -d '' f; do
      [[ -e $f || -L $f ]] && printf '%s\0' "$f"  # a tracked file deleted in the work tree: gone
    done) |
    tar -C "$checkout" --null --files-from=- -cf - | tar -C "$root/src" -xf -
else
  tar -C "$checkout" --exclude='./build*' --exclude=./results -cf - . | tar -C "$root/src" -xf -
fi
echo "copied the working tree of $checkout into the new root ($(find "$root/src" -type f | wc -l) files)"

bind /proc "$root/proc"
bind /sys "$root/sys"
mkdir -p "$root/dev"
mount --rbind /dev "$root/dev"  # /dev/pts and /dev/shm too
mounts+=("$root/dev")
mount --make-rslave "$root/dev"  # unmounting it must not unmount the host's
cuda=OFF
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  bind /usr/local/cuda "$root/usr/local/cuda" ro
  cuda=ON
else
  echo "no CUDA toolkit at /usr/local/cuda on this machine: building without the CUDA backend"
fi
if [[ -n $cache ]]; then
  bind "$cache/apt-archives" "$root/var/cache/apt/archives"
fi

# ---- the README's two commands, inside -------------------------------------------------------
cat >"$root/fresh_machine_inner.sh" <<'EOF'
#!/bin/bash
# Runs each argument as a command line, in /src, and checks what the README says it leaves.
set -euo pipefail
cd /src
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
: >/var/tmp/mpb-fresh-times
for cmd in "$@"; do
  t0=$(date +%s)
  printf '\n#### inside: %s\n' "$cmd"
  bash -c "$cmd" 2>&1 | tee /var/tmp/mpb-command.log
  case $cmd in
  *scripts/quickstart.sh*)
    if [[ ! -s $MPB_RESULTS_DIR/quickstart/report/index.html ]]; then
      echo "fresh_machine_test: '$cmd' wrote no $MPB_RESULTS_DIR/quickstart/report/index.html" >&2
      exit 1
    fi
    ;;
  *scripts/test.sh*)
    # A test that skips here without being a GPU test lacks something install_deps.sh should
    # install. (The Slurm test skips too: the plain install leaves Slurm out on purpose,
    # --with-slurm adds it; so does an ISA path this CPU lacks: label isa, or a GTest suite
    # named *OnThisCpu, whose tests compare with an instruction the CPU may lack, e.g.
    # AVX512_BF16 on a Zen 3.)
    ctest --test-dir "$MPB_BUILD_DIR" -N -L 'gpu|slurm|isa' | sed -nE 's/^ *Test +#[0-9]+: //p' |
      sort >/var/tmp/gpu-tests
    sed -nE 's/^[[:space:]]*[0-9]+ - (.*) \(Skipped\)$/\1/p' /var/tmp/mpb-command.log |
      { grep -v 'OnThisCpu\.' || true; } | sort >/var/tmp/skipped
    unexpected=$(comm -23 /var/tmp/skipped /var/tmp/gpu-tests)
    if [[ -n $unexpected ]]; then
      echo "fresh_machine_test: tests that are not GPU tests skipped on the fresh machine" \
        "(a package missing from scripts/install_deps.sh?):" >&2
      echo "$unexpected" >&2
      exit 1
    fi
    ;;
  esac
  printf '%s: %s\n' "$cmd" "$(mmss $(($(date +%s) - t0)))" >>/var/tmp/mpb-fresh-times
done
EOF

say "chroot: $(printf '%s; ' "${commands[@]}")(MPB_CUDA=$cuda MPB_WERROR=ON)"
t=$(date +%s)
envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
  MPB_CUDA="$cuda" MPB_WERROR=ON MPB_BUILD_DIR=/var/tmp/mpb-build MPB_RESULTS_DIR=/var/tmp/mpb-results)
for v in TERM CI http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [[ -n ${!v:-} ]] && envs+=("$v=${!v}")
done
# The site's TLS trust, like its DNS and proxies above, belongs to the network, not to the
# machine: where HTTPS is intercepted by a proxy whose CA this machine trusts, Debian's
# ca-certificates (which install_deps.sh installs) cannot verify PyPI. The bundle pip uses
# here goes into the new root and pip is pointed at it; nothing else in the root changes.
site_ca=${PIP_CERT:-${SSL_CERT_FILE:-${REQUESTS_CA_BUNDLE:-}}}
if [[ -z $site_ca ]]; then
  site_ca=$(sed -nE 's/^[[:space:]]*cert[[:space:]]*=[[:space:]]*//p' /etc/pip.conf 2>/dev/null | head -n 1)
fi
if [[ -n $site_ca && -f $site_ca ]]; then
  cp -L "$site_ca" "$root/etc/mpbench-site-ca-bundle.crt"
  envs+=(PIP_CERT=/etc/mpbench-site-ca-bundle.crt)
  echo "pip in the new root trusts this machine's CA bundle ($site_ca)"
fi
chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash /fresh_machine_inner.sh "${commands[@]}" </dev/null
t_commands=$(($(date +%s) - t))
if [[ -n $cache ]]; then
  chroot "$root" apt-get autoclean -qq || true  # drop cached .debs the mirror no longer has
fi

say "times inside: $(paste -sd ';' "$root/var/tmp/mpb-fresh-times" | sed 's/;/; /g')"

# The runner and the benchmark built there, for the steps after this one (.ci/run: the selftest,
# the benchmarks, the results fuzzer and the Slurm test run them instead of a second build of the
# same sources with the same flags). Neither links a library of the build directory.
if [[ -n ${MPB_FRESH_KEEP_BINARIES:-} ]]; then
  mkdir -p "$MPB_FRESH_KEEP_BINARIES"
  cp "$root/var/tmp/mpb-build/runner" "$root/var/tmp/mpb-build/bench/mpb_bench" "$MPB_FRESH_KEEP_BINARIES/"
  say "kept runner and mpb_bench in $MPB_FRESH_KEEP_BINARIES"
fi

# ---- the GPU bundle on a machine with nothing installed (issue 11) -------------------------------
# The bundle built in the first root, unpacked in a second, bare minbase root: no compiler, no
# -dev package, no yaml-cpp, oneDNN or libgomp; CUDA's libraries only, from the bind-mounted
# toolkit, in the loader's cache as a CUDA install puts them. tests/bundle/bundle_bare_root.sh
# runs there, from another directory and with LD_LIBRARY_PATH unset: runner selftest
# --device cpu, and the quickstart's cell.
t_bundle=skipped
if [[ $cuda == ON ]]; then
  say "the GPU bundle: scripts/gpu_bundle.sh in the first root, run in a bare second root"
  t=$(date +%s)
  chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -c \
    'cd /src && bash scripts/gpu_bundle.sh --build-dir "$MPB_BUILD_DIR" --out /var/tmp/mpbench-gpu-bundle.tar.gz' </dev/null
  bare=$tmproot/bare
  bootstrap "$bare"
  cp "$root/var/tmp/mpbench-gpu-bundle.tar.gz" "$bare/var/tmp/"
  cp "$checkout/tests/bundle/bundle_bare_root.sh" "$bare/bundle_bare_root.sh"
  bind /proc "$bare/proc"
  mkdir -p "$bare/dev"
  mount --rbind /dev "$bare/dev"
  mounts+=("$bare/dev")
  mount --make-rslave "$bare/dev"
  bind /usr/local/cuda "$bare/usr/local/cuda" ro
  echo /usr/local/cuda/lib64 >"$bare/etc/ld.so.conf.d/988_cuda.conf"
  chroot "$bare" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 /bin/bash /bundle_bare_root.sh "$filter" </dev/null
  t_bundle=$(mmss $(($(date +%s) - t)))
fi
say "passed: debootstrap $(mmss "$t_debootstrap"), the commands $(mmss "$t_commands")," \
  "the bundle in a bare root $t_bundle, total $(mmss $(($(date +%s) - t_start)))"
