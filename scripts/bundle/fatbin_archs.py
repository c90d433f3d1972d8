#!/usr/bin/env python3
"""Prints the SM architectures of the CUDA code embedded in an ELF binary, one line
per kind: `sass 80 86 89 90` and `ptx 80 86 89 90` (nothing when it holds none).

Reads the .nv_fatbin section (extracted with objcopy, binutils) without cuobjdump,
which a runtime-only CUDA install lacks. The fatbin container: a 16-byte header
(magic 0xBA55ED50, version, header size, payload size), then entries, each with
kind (1 = PTX, 2 = ELF/SASS) at offset 0, its header size at 4, payload size at 8
and the SM number at 28. Usage: fatbin_archs.py BINARY
"""
import os
import struct
import subprocess
import sys
import tempfile


def archs(binary):
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", binary, raw],
                       check=True, stderr=subprocess.DEVNULL)
        data = open(raw, "rb").read() if os.path.exists(raw) else b""
    found = {"sass": set(), "ptx": set()}
    off = 0
    while off + 16 <= len(data):
        magic, _version, header, size = struct.unpack_from("<IHHQ", data, off)
        if magic != 0xBA55ED50:
            off += 8  # containers are 8-byte aligned
            continue
        p, end = off + header, off + header + size
        while p + 32 <= end:
            kind, _, eheader, esize = struct.unpack_from("<HHIQ", data, p)
            arch = struct.unpack_from("<I", data, p + 28)[0]
            if kind in (1, 2):
                found["ptx" if kind == 1 else "sass"].add(arch)
            if eheader == 0:
                break
            p += eheader + esize
        off = end
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for kind, sms in archs(sys.argv[1]).items():
        if sms:
            print(kind, *sorted(sms))


if __name__ == "__main__":
    main()
