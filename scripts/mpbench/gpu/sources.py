"""What each step of a lease runs, as hashes of source groups: the ledger's key.

A lent GPU is short (15 minutes a session), so a lease must not redo what an earlier one
proved. A step's result stays good while what it runs on the device is unchanged: a
group is a set of root files plus every file they include (`#include "..."`, resolved
against the including file's folder, then the source root, as CMake's include path
does), and its hash moves only when one of those files changes. So a change to a test,
a doc or a host-side refactor leaves `device` (the CUDA translation units and what they
include) as it was, and only the steps that read the changed group run again.

  device     the CUDA backend (backends/cuda: every .cu/.cpp/.h/.cuh) with everything it
             includes (the MPB_HD scalar cores in ops/, core/ headers), and the CMake
             modules that set its flags and architectures
  gpu_tests  the GPU test programs (tests/gpu, tests/ops, opcheck) with what they include
  host       what the runner is built from besides the backend (runner, train, models,
             config, core, backends/cpu, ops) and the experiments its cells run
  torch      the PyTorch side of the comparisons (bench/torch_*.py)
"""

import hashlib
import os
import re

INCLUDE = re.compile(rb'^\s*#\s*include\s*"([^"]+)"', re.M)
C_LIKE = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".inc")

# group -> (folders whose files are roots, single files that are roots)
GROUPS = {
    "device": (("backends/cuda",), ("cmake/Cuda.cmake", "cmake/CudaArchitectures.cmake", "cmake/Warnings.cmake")),
    "gpu_tests": (("tests/gpu", "tests/ops", "opcheck"), ()),
    "host": (("runner", "train", "models", "config", "core", "backends/cpu", "ops", "experiments"),
             ("CMakeLists.txt",)),
    "torch": ((), ()),  # bench/torch_*.py, found by pattern below
}


def _files_under(src, folder):
    out = []
    for root, dirs, names in os.walk(os.path.join(src, folder)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.relpath(os.path.join(root, n), src) for n in names if not n.endswith(".pyc")]
    return out


def roots(src, group):
    """The root files of GROUP (paths relative to SRC), sorted."""
    folders, files = GROUPS[group]
    found = [f for d in folders for f in _files_under(src, d)]
    found += [f for f in files if os.path.isfile(os.path.join(src, f))]
    if group == "torch":
        bench = os.path.join(src, "bench")
        found += [os.path.join("bench", n) for n in (os.listdir(bench) if os.path.isdir(bench) else [])
                  if n.startswith("torch_") and n.endswith(".py")]
    return sorted(set(found))


def includes(src, rel, text):
    """The repository files REL's `#include "..."` lines name (relative paths), resolved
    against REL's folder first, then SRC; system and generated headers are not ours."""
    out = []
    here = os.path.dirname(rel)
    for m in INCLUDE.finditer(text):
        name = m.group(1).decode(errors="replace")
        for cand in (os.path.normpath(os.path.join(here, name)), os.path.normpath(name)):
            if not cand.startswith("..") and os.path.isfile(os.path.join(src, cand)):
                out.append(cand)
                break
    return out


def closure(src, start):
    """START and every repository file it includes, transitively: {path: content}."""
    seen = {}
    todo = list(start)
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        with open(os.path.join(src, rel), "rb") as f:
            seen[rel] = f.read()
        if rel.endswith(C_LIKE):
            todo += [r for r in includes(src, rel, seen[rel]) if r not in seen]
    return seen


def group_hash(src, group):
    """sha256 over (path, sha256 of content) of GROUP's closure, sorted by path; 16 hex digits."""
    h = hashlib.sha256()
    for rel, data in sorted(closure(src, roots(src, group)).items()):
        h.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return h.hexdigest()[:16]


def all_hashes(src):
    """{group: hash} for every group."""
    return {g: group_hash(src, g) for g in GROUPS}
