#!/usr/bin/python3
"""Fails on a runner function over 80 lines or a source file over 600 lines.

Issue 32's size rules: a function in runner/ longer than MAX_FUNCTION_LINES
(counted from the line its signature starts on to its closing brace, lambdas
inside it included) is a list of phases that wants names; a non-test source
file (.h/.cpp/.cu/.cuh/.py) under one of SOURCE_FOLDERS longer than
MAX_FILE_LINES has more than one job. tests/ are not checked.

ALLOWED names what is over a limit on purpose (or not yet split), each with
its reason; an entry no longer over its limit is reported (remove it: the
list only shrinks) but does not fail, so a split landing in parallel breaks
nothing. Usage: check_sizes.py [SOURCE_DIR]  (default: the repository).
"""

import os
import re
import sys

import layering_cli

MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 600
FUNCTION_FOLDERS = ["runner"]
SOURCE_FOLDERS = ["core", "ops", "backends", "models", "config", "train", "opcheck", "runner", "scripts", "bench"]
SOURCE = re.compile(r"\.(h|cpp|cu|cuh|py)$")
CXX = re.compile(r"\.(h|cpp|cu|cuh)$")

# "path" for a file over MAX_FILE_LINES, "path:function" for a runner function
# over MAX_FUNCTION_LINES -> why it may be.
ALLOWED = {
    # Being split by job in parallel (issue 32); each entry goes when its split lands.
}

# The text before a '{' that opens a function body: ends in ')' plus
# qualifiers, a trailing return type, or a constructor's initialiser list.
FUNCTION_TAIL = re.compile(
    r"\)\s*(?:const|noexcept(?:\s*\([^)]*\))?|override|final|mutable|&|&&|\s)*(?:->\s*[\w:<>,\s*&]+)?\s*$")
CTOR_INIT = re.compile(r"\)\s*:(?!:)")
NAME = re.compile(r"([~\w:]+(?:operator\s*[^\s(]+)?)\s*\(")


def strip_comments_and_strings(text):
    """The C++ text with comments, string and char literals and preprocessor
    lines blanked (line breaks kept, so line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            while i < n and text[i] != "\n":  # a directive, with its continuation lines
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if raw:
            end = text.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()):  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """(name, first line, last line) of every function body at namespace or
    class scope in C++ source `text` (1-based lines)."""
    code = strip_comments_and_strings(text)
    found = []
    # Each open brace: "ns" (namespace, extern "C", class body) may hold
    # functions; "func" is a body being measured; "other" (initialisers,
    # enums) holds none.
    stack = []
    statement_start = 0  # where the text before the next '{' begins
    line = 1
    func_start = None
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
            continue
        if c == ";" and (not stack or stack[-1] == "ns"):
            statement_start = i + 1
        elif c == "{":
            if stack and stack[-1] != "ns":
                stack.append("inner")
                continue
            head = code[statement_start:i]
            flat = " ".join(head.split())
            if re.search(r"\bnamespace\b|\bextern\s*\"\"", flat):
                stack.append("ns")
            elif FUNCTION_TAIL.search(flat) or (CTOR_INIT.search(flat) and flat.endswith("}")):
                stack.append("func")
                first = head[:len(head) - len(head.lstrip())]
                func_start = (line - head.count("\n") + first.count("\n"), flat)
            elif CTOR_INIT.search(flat) and re.search(r"[\w>]\s*$", flat):
                stack.append("init")  # a member's brace initialiser: x_{1}
                continue
            elif re.search(r"\b(class|struct|union)\b", flat) and "=" not in flat:
                stack.append("ns")
            else:
                stack.append("other")
            statement_start = i + 1
        elif c == "}":
            if not stack:
                continue
            kind = stack.pop()
            if kind == "func" and func_start is not None:
                names = NAME.findall(func_start[1])
                name = names[0] if names else func_start[1][:40]
                found.append((name, func_start[0], line))
                func_start = None
            if kind in ("inner", "init"):
                continue
            statement_start = i + 1
    return found


def problems(root):
    """The size rules broken under `root`, as (key, message), and the allowed keys seen over their limit."""
    broken = []
    for folder, rel, path in layering_cli.source_files(root, SOURCE_FOLDERS, SOURCE):
        rel = rel.replace(os.sep, "/")
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            broken.append((rel, f"{rel}: {lines} lines (at most {MAX_FILE_LINES}: split it by job)"))
        if folder in FUNCTION_FOLDERS and CXX.search(path):
            for name, first, last in functions(text):
                length = last - first + 1
                if length > MAX_FUNCTION_LINES:
                    broken.append((f"{rel}:{name}", f"{rel}:{first}: {name} is {length} lines "
                                   f"(at most {MAX_FUNCTION_LINES}: name its steps)"))
    return broken


def main():
    broken = problems(layering_cli.repo_root())
    failed = False
    for key, message in broken:
        if key in ALLOWED:
            continue
        print(message)
        failed = True
    seen = {key for key, _ in broken}
    for key in sorted(set(ALLOWED) - seen):
        print(f"note: {key} is within its limit now; remove it from ALLOWED in {__file__}")
    for key in sorted(set(ALLOWED) & seen):
        print(f"allowed: {key} ({ALLOWED[key]})")
    if not failed:
        print(f"sizes: no runner function over {MAX_FUNCTION_LINES} lines, no source file over {MAX_FILE_LINES} "
              f"lines outside ALLOWED ({len(ALLOWED)} entries)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
