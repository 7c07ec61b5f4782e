#!/usr/bin/env python3
"""Writes float16.safetensors: NumPy's float16 conversions, for tests/core/test_float16.cpp.

  f16_to_f32   F32[65536]  NumPy's float32 value of every f16 bit pattern 0..65535 (NaN payloads
                           kept: NumPy shifts the 10 payload bits up, as rml does)
  f32_to_f16   F16[3 * 31744]
                           NumPy's float16 of, for each positive finite f16 value h (0x0000..0x7bff):
                           the float32 midpoint between h and the next f16 value (a tie; 65520 above
                           the largest), the float32 just below it and the one just above it
                           (the test derives the same inputs and also checks their negations)
  nan_in       F32[8], nan_to_f16 F16[8]
                           quiet NaNs with payloads and NumPy's float16 of them

Run: /usr/bin/python3 tests/data/float16/gen_float16.py  (deterministic)
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from gen_fixtures import write_safetensors  # noqa: E402


def main():
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    to_f32 = every.astype(np.float32)
    h = np.arange(0x7C00, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    nxt = np.arange(1, 0x7C01, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    nxt[-1] = 65536.0  # past the largest finite value, where rounding goes to inf
    mid = ((h + nxt) / 2).astype(np.float32)  # exact: 12 significant bits
    below = np.nextafter(mid, np.float32(0))
    above = np.nextafter(mid, np.float32(np.inf))
    inputs = np.stack([mid, below, above], axis=1).ravel()
    with np.errstate(over="ignore"):
        to_f16 = inputs.astype(np.float16)
    nan_bits = np.array([0x7FC00000, 0xFFC00000, 0x7FC02000, 0x7FFFE000, 0x7FD55555, 0xFFE00001, 0x7FC01FFF,
                         0x7FFFFFFF], dtype=np.uint32)
    nan_in = nan_bits.view(np.float32)
    write_safetensors(os.path.join(HERE, "float16.safetensors"),
                      [("f16_to_f32", to_f32), ("f32_to_f16", to_f16), ("nan_in", nan_in),
                       ("nan_to_f16", nan_in.astype(np.float16))])


if __name__ == "__main__":
    main()
