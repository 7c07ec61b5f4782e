"""Reading and writing safetensors files with NumPy (no third-party safetensors package).

Layout: an 8-byte little-endian header length N, N bytes of JSON
`{"<name>": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}` padded with spaces
to a multiple of 8, then the tensor bytes. Offsets are relative to the end of the header; every tensor
starts on a 64-byte boundary so a reader that maps the file can use each tensor in place.
"""

from __future__ import annotations

import json
import struct
from typing import Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

ALIGNMENT = 64

_TO_NUMPY = {"F32": np.float32, "I32": np.int32, "F64": np.float64, "I64": np.int64, "BOOL": np.bool_,
             "F16": np.float16, "I8": np.int8, "U8": np.uint8, "I16": np.int16}
_FROM_NUMPY = {np.dtype(v): k for k, v in _TO_NUMPY.items()}


class BF16Array:
    """A bfloat16 tensor, which NumPy lacks: its uint16 bit patterns (the high half of each float32)."""

    def __init__(self, bits):
        self.bits = np.asarray(bits, dtype=np.uint16)

    @staticmethod
    def from_float(values) -> "BF16Array":
        """Rounds to the nearest bfloat16, ties to even (as PyTorch and rml do); NaN stays NaN."""
        f = np.asarray(values, dtype=np.float32)
        u = f.view(np.uint32).astype(np.uint64)
        # np.uint64 operands: NumPy 1.x refuses uint64 >> (python int) on 0-d arrays (it promotes to float64).
        one, half, shift = np.uint64(1), np.uint64(0x7FFF), np.uint64(16)
        rounded = np.asarray((u + half + ((u >> shift) & one)) >> shift).astype(np.uint16)
        nan = np.isnan(f)
        rounded[nan] = ((u[nan] >> shift) | np.uint64(0x40)).astype(np.uint16)
        return BF16Array(rounded.reshape(f.shape))

    @property
    def shape(self):
        return self.bits.shape

    @property
    def size(self):
        return self.bits.size

    def to_float32(self) -> np.ndarray:
        """The values, widened exactly."""
        return np.asarray(self.bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def write_safetensors(path, tensors: Iterable[Tuple[str, np.ndarray]], metadata: Optional[Mapping[str, str]] = None):
    """Writes `tensors` (name, array) in the given order; arrays are written little-endian, row-major."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, array in tensors:
        if name in header:
            raise ValueError(f"safetensors: duplicate tensor name '{name}'")
        bf16 = isinstance(array, BF16Array)
        array = np.array(array.bits if bf16 else array, order="C", copy=False)  # (ascontiguousarray: scalars 1-D)
        dtype = "BF16" if bf16 else _FROM_NUMPY.get(array.dtype)
        if dtype is None:
            raise ValueError(f"safetensors: tensor '{name}' has unsupported dtype {array.dtype}")
        offset = (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append((offset, data))
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad so that the data section (8 + header) starts on an ALIGNMENT boundary.
    padded = (8 + len(text) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT - 8
    text += b" " * (padded - len(text))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        position = 0
        for begin, data in blobs:
            f.write(b"\0" * (begin - position))
            f.write(data)
            position = begin + len(data)


def read_safetensors(path) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Reads every tensor of a safetensors file; returns (tensors by name, metadata). BF16 tensors come back as
    BF16Array."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: truncated safetensors header")
    (length,) = struct.unpack("<Q", raw[:8])
    if 8 + length > len(raw):
        raise ValueError(f"{path}: header length {length} beyond the file")
    header = json.loads(raw[8:8 + length].decode("utf-8"))
    base = 8 + length
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        if entry["dtype"] == "BF16":
            bits = np.frombuffer(raw[base + begin:base + end], dtype="<u2").reshape(entry["shape"])
            tensors[name] = BF16Array(bits.astype(np.uint16))
            continue
        dtype = np.dtype(_TO_NUMPY[entry["dtype"]]).newbyteorder("<")
        array = np.frombuffer(raw[base + begin:base + end], dtype=dtype).reshape(entry["shape"])
        tensors[name] = array.astype(array.dtype.newbyteorder("="))
    return tensors, metadata
