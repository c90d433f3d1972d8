#!/usr/bin/python3
"""Fails when two ISA builds of the CPU kernels define the same code symbol.

backends/cpu/kernels/ is compiled once per ISA (scalar, avx2, avx512,
avx512_bf16) into one binary. A function both builds define, an inline one
from a header say, is a weak symbol, and the linker keeps one copy for every
caller: if it keeps the AVX-512 one, the scalar and AVX2 paths execute AVX-512
instructions and crash on a CPU without them. The kernels avoid that by living
in their own namespace (MPB_CPU_ISA_NS), by the inline namespace of the scalar
cores (core/isa_namespace.h) and by building error messages outside
(backends/cpu/kernel_errors.cpp). This test proves it on the objects built:
every code symbol (nm types T, W, i) defined in one ISA's objects must be
absent from every other's; shared data (typeinfo, personality references) is
harmless and allowed.

This holds for optimised builds (-O2/-O3), where the std::vector members the
kernels use are inlined. An unoptimised or -Og build (the sanitizer build)
keeps them out of line, one weak copy per ISA, so tests/CMakeLists.txt runs
this check only outside MPB_SANITIZE. Making it hold at every optimisation
level would take the kernels' scratch buffers out of std::vector (or a
partial link that localises each build's symbols).

Usage: check_isa_symbols.py ISA=OBJ[:OBJ...] [ISA=OBJ...]
"""

import subprocess
import sys

CODE = {"T", "W", "i"}  # global code, weak code, indirect functions (local t never links across objects)


def code_symbols(objects):
    out = subprocess.run(["nm", "--defined-only", *objects], check=True, capture_output=True, text=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in CODE:
            syms.add(parts[2])
    return syms


def main(argv):
    builds = {}
    for arg in argv[1:]:
        isa, _, objs = arg.partition("=")
        builds[isa] = [o for o in objs.split(":") if o]
    if len(builds) < 2:
        print("check_isa_symbols: fewer than two ISA builds given; nothing to compare")
        return 77
    syms = {isa: code_symbols(objs) for isa, objs in builds.items()}
    for isa, s in syms.items():
        if not s:
            print(f"check_isa_symbols: no code symbols in the {isa} objects: wrong paths?")
            return 1
    shared = {}
    isas = sorted(syms)
    for i, a in enumerate(isas):
        for b in isas[i + 1:]:
            for sym in syms[a] & syms[b]:
                shared.setdefault(sym, set()).update({a, b})
    if shared:
        demangled = subprocess.run(["c++filt"], input="\n".join(sorted(shared)), capture_output=True,
                                   text=True).stdout.splitlines()
        print(f"check_isa_symbols: {len(shared)} code symbols defined by more than one ISA build "
              "(the linker may run one ISA's copy for all):")
        for sym, name in zip(sorted(shared), demangled):
            print(f"  {name}   [{', '.join(sorted(shared[sym]))}]")
        return 1
    counts = ", ".join(f"{isa} {len(syms[isa])}" for isa in isas)
    print(f"check_isa_symbols: no code symbol shared between the ISA builds (code symbols: {counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
