"""safetensors files (the format: docs/REFERENCE.md), read and written with numpy alone.

torch_model writes the reference's tensors with these, and check (check_reference.py) reads the
runner's and the reference's files without needing torch; the safetensors package is not needed.
"""

import json
import math
import struct

import numpy as np

from mpbench import output as mo

_NP_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
_ST_DTYPES = {np.dtype(v).str.lstrip("<|="): k for k, v in _NP_DTYPES.items()}


class SafetensorsError(Exception):
    pass


def read_safetensors(path):
    """Returns (tensors: {name: np.ndarray}, metadata: {str: str}); BF16 is widened to float32."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise SafetensorsError(f"{path}: not a safetensors file ({len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise SafetensorsError(f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError(f"{path}: the header is not valid JSON: {e}") from None
    buf = memoryview(data)[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        shape = tuple(e["shape"])
        if not 0 <= begin <= end <= len(buf):
            raise SafetensorsError(f"{path}: tensor {name!r}: data_offsets outside the buffer")
        raw = buf[begin:end]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in _NP_DTYPES:
            a = np.frombuffer(raw, dtype=np.dtype(_NP_DTYPES[e["dtype"]]).newbyteorder("<"))
        else:
            raise SafetensorsError(f"{path}: tensor {name!r}: unsupported dtype {e['dtype']}")
        if a.size != math.prod(shape):
            raise SafetensorsError(f"{path}: tensor {name!r}: {a.size} elements for shape {list(shape)}")
        tensors[name] = a.reshape(shape).copy()
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: np.ndarray} (float64/32/16, int*, uint*, bool) as safetensors."""
    items = []
    for name, a in tensors.items():
        a = np.asarray(a)
        if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn a scalar into shape [1])
            a = a.copy(order="C")
        key = a.dtype.str.lstrip("<|=")
        if key not in _ST_DTYPES:
            raise SafetensorsError(f"tensor {name!r}: dtype {a.dtype} has no safetensors name")
        items.append((name, _ST_DTYPES[key], a.astype(a.dtype.newbyteorder("<"), copy=False)))
    # Largest elements first, so every tensor is aligned to its element size.
    items.sort(key=lambda t: -t[2].dtype.itemsize)
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, dt, a in items:
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    mo.write_output(path, b"".join([struct.pack("<Q", len(text)), text, *(a.tobytes() for _, _, a in items)]))
