#!/usr/bin/python3
"""Fails when C++ learns a device's kind or a capability by comparing text.

A device's kind is DeviceKind and what it can run is Support (both in
core/device_capabilities.h): code compares the enums. Text becomes a kind in
one place, runner/machine/device_factory.cpp (parse_device_kind: --device and
the experiment's `device:`), and the enums become text only through
device_kind_name / support_level_name. So outside that file no C++ source
compares a kind with "cpu"/"cuda", nor a capability with
"native"/"emulated"/"unsupported" (comments are not read).

Usage: check_device_kinds.py [SOURCE_DIR]  (default: the repository).
"""

import os
import re

import layering_cli

FOLDERS = ["core", "ops", "backends", "models", "config", "train", "opcheck", "runner", "bench", "tests"]
FACTORY = os.path.join("runner", "machine", "device_factory.cpp")
SOURCE = re.compile(r"\.(h|hpp|cpp|cu|cuh|inc)$")
KIND = r'"(?:cpu|cuda)"'
SUPPORT = r'"(?:native|emulated|unsupported)"'
RULES = [
    # kind == "cuda", info().kind != "cpu", "cpu" == kind
    (re.compile(r'\bkind\w*(?:\(\))?\s*[!=]=\s*' + KIND), "compares a device kind with text (use DeviceKind)"),
    (re.compile(KIND + r'\s*[!=]=\s*[\w.>()-]*\bkind\b'), "compares a device kind with text (use DeviceKind)"),
    # gemm_support(g) == "unsupported", fp8.rfind("unsupported", 0) == 0
    (re.compile(r'[!=]=\s*' + SUPPORT), "compares a capability with text (use Device::supports)"),
    (re.compile(SUPPORT + r'\s*[!=]='), "compares a capability with text (use Device::supports)"),
    (re.compile(r'\.(?:rfind|find|compare)\(\s*' + SUPPORT), "searches a capability's text (use Device::supports)"),
]


def code_of(line):
    """The line without a // comment (a "//" inside a string literal is kept)."""
    in_string = False
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and in_string:
            i += 2
            continue
        if ch == '"':
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def violations(root):
    found = []
    for _, rel, path in layering_cli.source_files(root, FOLDERS, SOURCE):
        if rel == FACTORY:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                code = code_of(line)
                for pattern, why in RULES:
                    if pattern.search(code):
                        found.append(f"{rel}:{lineno}: {why}: {line.strip()}")
                        break
    return found


if __name__ == "__main__":
    layering_cli.main(violations, "text comparison(s) of device kinds or capabilities",
                      "device kinds and capabilities: compared as enums everywhere but the factory")
