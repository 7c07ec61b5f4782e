"""The safetensors writer: layout (header length, padding, alignment) and a round trip through the reader."""

import json
import struct

import numpy as np

from rml_export.safetensors import ALIGNMENT, read_safetensors, write_safetensors


def test_layout_and_round_trip(tmp_path):
    path = tmp_path / "t.safetensors"
    tensors = [("a", np.arange(5, dtype=np.float32)), ("b", np.array(-7, dtype=np.int32)),
               ("c", np.ones((2, 3), dtype=np.float32))]
    write_safetensors(path, tensors, {"k": "v"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0 and (8 + n) % ALIGNMENT == 0
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"k": "v"}
    assert header["b"] == {"dtype": "I32", "shape": [], "data_offsets": [64, 68]}
    for name, _ in tensors:
        assert header[name]["data_offsets"][0] % ALIGNMENT == 0
    back, meta = read_safetensors(path)
    assert meta == {"k": "v"}
    for name, array in tensors:
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        assert np.array_equal(back[name], array)


def test_rejects_unsupported_dtype(tmp_path):
    try:
        write_safetensors(tmp_path / "x.safetensors", [("s", np.array(["a"]))])
    except ValueError as e:
        assert "'s'" in str(e)
    else:
        raise AssertionError("a string tensor was written")


def test_bf16_scalars_round_and_widen():
    """0-d arrays (a scalar constant such as a layer norm's eps) round like PyTorch and widen back."""
    import torch
    from rml_export.safetensors import BF16Array
    for v in (1e-5, 1.0, 3.14159, -0.0, 65504.0):
        bits = BF16Array.from_float(np.float32(v)).bits
        assert bits.shape == ()
        assert int(bits) == int(torch.tensor(v).bfloat16().view(torch.int16)) & 0xFFFF
        assert float(BF16Array(bits).to_float32()) == float(torch.tensor(v).bfloat16().float())
