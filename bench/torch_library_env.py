"""Which CUDA libraries each side of bench/torch_bert_gpu.py loads (issue 30 item 8).

bin/mpbench-env puts the directories holding the runner's CUDA libraries
(often /usr/local/cuda/lib64) first on LD_LIBRARY_PATH. The dynamic loader
searches LD_LIBRARY_PATH before a library's RUNPATH, so a PyTorch started
under it can load the toolkit's libcublas/libcudnn instead of the ones its
wheel ships, and its numbers would be of another library. So PyTorch runs
with those directories stripped (torch_environment), the runner gets them
back (runner_environment), and each side records what it actually mapped
(mapped_libraries over /proc/<pid>/maps; the runner's manifest says the same
for it). LD_LIBRARY_PATH is read once, when a process starts: stripping
os.environ later changes nothing for the process itself, hence the re-exec
in reexec_with_torch_environment.

Pure functions over dicts and text (tests/scripts/test_torch_library_env.py);
no torch import here.
"""

import os
import sys

# Set by scripts/bundle/mpbench-env: the directories it put in front of LD_LIBRARY_PATH.
ADDED_DIRS_VAR = "MPB_ENV_ADDED_LIB_DIRS"
# The LD_LIBRARY_PATH the script was started with, kept for the runner: "set:" + its
# value, or "unset" (an environment value cannot hold a NUL to mark that otherwise).
RUNNER_PATH_VAR = "MPB_RUNNER_LD_LIBRARY_PATH"
UNSET = "unset"
# Set in the re-executed process, so it does not re-execute again.
DONE_VAR = "MPB_TORCH_ENV_DONE"
# The libraries whose copy decides the speed question, and the runtime beside them.
LIBRARY_PREFIXES = ("libcudnn", "libcublas", "libcudart", "libnvrtc")


def is_toolkit_dir(d):
    """A CUDA toolkit's library directory (/usr/local/cuda/lib64,
    /usr/local/cuda-13.0/targets/x86_64-linux/lib, ...): never PyTorch's own."""
    d = os.path.normpath(d)
    parts = d.split(os.sep)
    return len(parts) > 3 and parts[1] == "usr" and parts[2] == "local" and (
        parts[3] == "cuda" or parts[3].startswith("cuda-"))


def torch_environment(env):
    """(env for PyTorch, [stripped directories]): LD_LIBRARY_PATH without the
    directories mpbench-env added (ADDED_DIRS_VAR) and without any CUDA toolkit
    directory; removed when nothing is left. The started-with value is kept in
    RUNNER_PATH_VAR for the runner, and DONE_VAR is set."""
    out = dict(env)
    original = env.get("LD_LIBRARY_PATH")
    added = {os.path.normpath(d) for d in env.get(ADDED_DIRS_VAR, "").split(":") if d}
    kept, stripped = [], []
    for d in (original or "").split(":"):
        if not d:
            continue
        (stripped if os.path.normpath(d) in added or is_toolkit_dir(d) else kept).append(d)
    if kept:
        out["LD_LIBRARY_PATH"] = ":".join(kept)
    else:
        out.pop("LD_LIBRARY_PATH", None)
    out[RUNNER_PATH_VAR] = "set:" + original if original is not None else UNSET
    out[DONE_VAR] = "1"
    return out, stripped


def runner_environment(env):
    """The environment for the runner: LD_LIBRARY_PATH as the script was
    started with it (mpbench-env's), when torch_environment kept it."""
    out = dict(env)
    if RUNNER_PATH_VAR in env:
        saved = out.pop(RUNNER_PATH_VAR)
        if saved.startswith("set:"):
            out["LD_LIBRARY_PATH"] = saved[len("set:"):]
        else:
            out.pop("LD_LIBRARY_PATH", None)
    out.pop(DONE_VAR, None)
    return out


def mapped_libraries(maps_text, prefixes=LIBRARY_PREFIXES):
    """The paths in /proc/<pid>/maps text whose file name starts with one of
    `prefixes`, sorted, each once (a library maps several segments). A
    "(deleted)" suffix (the file replaced since it was mapped) stays in the
    path, as the kernel writes it."""
    found = set()
    for line in maps_text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue  # anonymous, [heap], [stack], [vdso]
        path = fields[5].rstrip()
        name = os.path.basename(path.split(" (deleted)")[0])
        if name.startswith(tuple(prefixes)):
            found.add(path)
    return sorted(found)


def process_libraries(pid="self"):
    """mapped_libraries of a live process; [] where /proc is unreadable."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return mapped_libraries(f.read())
    except OSError:
        return []


def reexec_with_torch_environment():
    """Run this script again with torch_environment when that changes
    LD_LIBRARY_PATH (before torch is imported); otherwise record the runner's
    path and return the stripped directories (none)."""
    if os.environ.get(DONE_VAR) == "1":
        return
    env, stripped = torch_environment(os.environ)
    if stripped:
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    os.environ.update({RUNNER_PATH_VAR: env[RUNNER_PATH_VAR], DONE_VAR: "1"})


def stripped_dirs():
    """What the re-exec stripped: the runner's path less the current one."""
    saved = os.environ.get(RUNNER_PATH_VAR, UNSET)
    now = set(os.environ.get("LD_LIBRARY_PATH", "").split(":"))
    started = saved[len("set:"):] if saved.startswith("set:") else ""
    return [d for d in started.split(":") if d and d not in now]


def runner_libraries(manifest):
    """The runner's side from its manifest.json: the versions it was built
    against and loaded (libraries.header_vs_runtime), its warnings, and the
    paths it mapped (libraries.loaded, where the manifest has it)."""
    libs = manifest.get("libraries", {})
    return {"header_vs_runtime": libs.get("header_vs_runtime"),
            "warnings": libs.get("warnings", []),
            "loaded": libs.get("loaded")}


def cudnn_version_string(v):
    """torch.backends.cudnn.version()'s integer as "9.1.0": cuDNN 9's
    major*10000 + minor*100 + patch, cuDNN 8's major*1000 + minor*100 + patch
    (the rule of core/library_version.h)."""
    unit = 10000 if v >= 90000 else 1000
    return f"{v // unit}.{v % unit // 100}.{v % 100}"
