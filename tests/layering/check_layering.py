#!/usr/bin/python3
"""Fails when a source file includes a header from a layer above its own.

The layers of docs/ARCHITECTURE.md, bottom to top; each folder may include
its own headers and those of the folders it lists, nothing else:

    core      tensors, memory, the Device interface, precision, numerics
    ops       the shared scalar cores (MPB_HD), over core
    backends  backends/cpu and backends/cuda, over core and ops
    models    parameters and forward/backward as Device calls (no backend)
    config    the typed cell configuration
    train     the trainer, loss scaler and cell factory
    opcheck   the op-test table (every backend against float64)
    runner    YAML, matrices, measurement, files: may include everything

Inside runner/, the rooms are layers too, bottom to top (runner/main.cpp, the
binary's entry, sits above them all):

    io          files, atomic writes, output paths, YAML documents, build info
    experiment  the experiment file: loader, matrix, shards, run plan, vocabulary
    machine     the machine: device factory, clocks, NVML, telemetry, energy, load
    measure     statistics, ceilings, steady state, utilization, cost, memory fit
    results     cell files, manifest, result directory, watchdog, end-of-run table
    commands    run, merge, doctor, selftest, find-max-batch, reference export

Two backends may not include each other. bench/ and tests/ may include
anything. Usage: check_layering.py [SOURCE_DIR]  (default: the repository).
"""

import os
import re

import layering_cli

ALLOWED = {
    "core": {"core"},
    "ops": {"core", "ops"},
    "backends": {"core", "ops", "backends"},
    "models": {"core", "models"},
    "config": {"core", "models", "config"},
    "train": {"core", "models", "config", "train"},
    "opcheck": {"core", "ops", "backends", "opcheck"},
    "runner": {"core", "ops", "backends", "models", "config", "train", "opcheck", "runner"},
}
RUNNER_ROOMS = ["io", "experiment", "machine", "measure", "results", "commands"]
SOURCE = re.compile(r"\.(h|hpp|cpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def runner_room_violation(rel, header):
    """Why runner/<room>/x includes a runner header it may not, or None."""
    src = rel.split(os.sep)
    dst = header.split("/")
    if len(dst) != 3 or dst[1] not in RUNNER_ROOMS:
        return f"{header} is not in one of runner/'s rooms ({', '.join(RUNNER_ROOMS)})"
    if len(src) == 2:
        return None  # runner/main.cpp: above every room
    if src[1] not in RUNNER_ROOMS:
        return f"{rel} is not in one of runner/'s rooms ({', '.join(RUNNER_ROOMS)})"
    if RUNNER_ROOMS.index(dst[1]) > RUNNER_ROOMS.index(src[1]):
        below = RUNNER_ROOMS[:RUNNER_ROOMS.index(src[1]) + 1]
        return f"runner/{src[1]}/ includes {header} (a runner/{dst[1]}/ header; runner/{src[1]}/ may include {', '.join(below)})"
    return None


def violations(root):
    found = []
    for layer, rel, path in layering_cli.source_files(root, ALLOWED, SOURCE):
        allowed = ALLOWED[layer]
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m or "/" not in m.group(1):
                    continue
                target = m.group(1).split("/")[0]
                if target not in ALLOWED:
                    continue  # a library's header, not one of ours
                if target not in allowed:
                    found.append(f"{rel}:{lineno}: {layer}/ includes {m.group(1)} "
                                 f"(a {target}/ header; {layer}/ may include {', '.join(sorted(allowed))})")
                elif layer == target == "runner":
                    why = runner_room_violation(rel, m.group(1))
                    if why:
                        found.append(f"{rel}:{lineno}: {why}")
                elif (layer == target == "backends" and
                      rel.split(os.sep)[1] != m.group(1).split("/")[1]):
                    found.append(f"{rel}:{lineno}: one backend includes another's header {m.group(1)}")
    return found


if __name__ == "__main__":
    layering_cli.main(violations, "layering violation(s)", "layering: every include points down or sideways")
