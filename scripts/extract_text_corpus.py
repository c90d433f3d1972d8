#!/usr/bin/env python3
"""Extracts the English prose of the Python documentation (Debian's python3-doc,
PSF License Version 2: redistribution with the licence notice allowed; see
/usr/share/doc/python3.*/copyright) into one plain-text corpus for
`data.kind: text` (docs/CONFIG.md).

Reads the reStructuredText sources Sphinx ships beside the HTML
(/usr/share/doc/python3.X/html/_sources/**/*.rst.txt) and keeps the prose:
code blocks (after '::' and in code directives), directive bodies that are
not prose (tables of contents, index entries, option lists), section
underlines and markup are dropped; inline roles (:func:`len`) keep their
text. Each source file is one document; documents are separated by a form
feed on a line of its own, which is how the runner splits the corpus into
training and held-out documents (models/text_corpus.h). Files are read in
sorted path order, so the output is the same on every machine with the
same python3-doc.

Usage: extract_text_corpus.py [--source DIR] OUT
  DIR: the _sources folder (default: the newest /usr/share/doc/python3.*/html/_sources)
Exit 2 when DIR has no sources or OUT cannot be written.
"""
import argparse
import glob
import os
import re
import sys

from mpbench.output import OutputPathError, write_output

# The folders of prose (the C API and distutils references are mostly
# signatures; the library reference is prose around its signatures).
PROSE_DIRS = ("tutorial", "howto", "faq", "reference", "library", "using", "whatsnew", "extending", "installing")
# Directives whose body is prose; every other directive's body is dropped.
PROSE_DIRECTIVES = {"note", "warning", "seealso", "versionadded", "versionchanged", "deprecated",
                    "important", "tip", "attention", "caution", "impl-detail", "admonition"}
ROLE = re.compile(r":[a-zA-Z:+-]+:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")
LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_+")
MARKUP = re.compile(r"``|\*\*|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)|`_*|\|")
UNDERLINE = re.compile(r"^([=\-~^\"'`#*+.:_])\1{2,}\s*$")


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def prose_lines(rst):
    out = []
    skip_deeper_than = None  # drop lines indented deeper than this (a code block or a dropped directive's body)
    for raw in rst.splitlines():
        line = raw.rstrip().replace("\t", "    ")
        if skip_deeper_than is not None:
            if not line.strip() or indent_of(line) > skip_deeper_than:
                continue
            skip_deeper_than = None
        stripped = line.strip()
        if UNDERLINE.match(stripped):
            continue
        m = re.match(r"\.\.\s+([\w:-]+)::(.*)$", stripped)
        if m:
            name = m.group(1)
            if name in PROSE_DIRECTIVES:
                text = m.group(2).strip()
                if text:
                    out.append(text)
                # its options (":version: 3.2") are dropped below as field lines
            else:
                skip_deeper_than = indent_of(line)
            continue
        if stripped.startswith(".."):  # comments, targets, substitutions
            skip_deeper_than = indent_of(line)
            continue
        if re.match(r":[\w -]+:(\s|$)", stripped):  # field lists and directive options
            continue
        if stripped.startswith(">>>") or stripped.startswith("..."):
            continue
        if stripped.endswith("::"):
            # "text::" keeps "text:" and starts a literal block; a bare "::" is dropped.
            text = stripped[:-2].rstrip()
            if text:
                out.append(" " * indent_of(line) + text + ":")
            skip_deeper_than = indent_of(line)
            continue
        out.append(line)
    return out


def clean(text):
    text = LINK.sub(r"\1", text)
    text = ROLE.sub(r"\1", text)
    text = MARKUP.sub("", text)
    return text


def document(rst):
    paragraphs, current = [], []
    for line in prose_lines(rst):
        if not line.strip():
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(clean(line.strip()))
    if current:
        paragraphs.append(" ".join(current))
    # Paragraphs of a few words are headings and list stubs; they stay (a heading is prose too).
    return "\n".join(p for p in paragraphs if p.strip())


def default_source():
    # python3.X only (not python3.X-dev and the like, which link to the same files).
    found = [p for p in glob.glob("/usr/share/doc/python3.*/html/_sources") if re.search(r"/python3\.\d+/html/", p)]
    found.sort(key=lambda p: int(re.search(r"python3\.(\d+)", p).group(1)))
    return found[-1] if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", help="the _sources folder (default: the newest python3-doc's)")
    ap.add_argument("out")
    a = ap.parse_args()
    source = a.source or default_source()
    if not source or not os.path.isdir(source):
        print("extract_text_corpus: no Python documentation sources (install python3-doc: scripts/install_deps.sh --corpus)",
              file=sys.stderr)
        return 2
    files = sorted(f for d in PROSE_DIRS for f in glob.glob(os.path.join(source, d, "**", "*.rst.txt"), recursive=True))
    docs = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = document(fh.read())
        if text.strip():
            docs.append(text)
    if not docs:
        print(f"extract_text_corpus: no .rst.txt sources under {source}", file=sys.stderr)
        return 2
    try:  # a fresh temp file, never a planted a.out + ".tmp" link (issue 43)
        write_output(a.out, "\n\f\n".join(docs) + "\n")
    except (OSError, OutputPathError) as e:
        print(f"extract_text_corpus: cannot write {a.out}: {e}", file=sys.stderr)
        return 2
    print(f"extract_text_corpus: {len(docs)} documents, {os.path.getsize(a.out)} bytes from {source} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
