#!/usr/bin/python3
"""Generates the zoo fixtures: each model at batch 1 and 2, exported by both routes, with PyTorch's outputs.

For model `<m>` at batch `<b>` it writes, into --out:
  <m>_b<b>.json / .safetensors            the PyTorch route (rml_export.from_torch)
  <m>_b<b>_onnx.json / .safetensors       the ONNX route (torch.onnx.export, then rml_export.from_onnx)
  <m>_b<b>.expected.safetensors           tensors `input.<i>` and `output.<i>`: the inputs in rml dtypes
                                          (int64 token ids as I32) and PyTorch's outputs (F32)
  <m>_b<b>.onnx                           only with --keep-onnx (the benchmark's ONNX Runtime peer reads it)
With --check, both exported graphs are also run by the NumPy reference interpreter and compared with PyTorch.

Usage: gen_zoo.py --out DIR [--models mlp,cnn,...|--committed|--generated] [--keep-onnx] [--check]
"""

from __future__ import annotations

import argparse
import warnings
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import models  # noqa: E402
from rml_export import from_onnx, from_torch, reference  # noqa: E402
from rml_export.safetensors import write_safetensors  # noqa: E402

OPSET = 14


def tolerance(expected: np.ndarray) -> float:
    """The zoo's acceptance bound: max abs error <= 1e-4 * max(1, max|ref|)."""
    return 1e-4 * max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)


def _as_rml(t: torch.Tensor) -> np.ndarray:
    a = t.detach().numpy()
    return a.astype(np.int32) if a.dtype.kind in "iu" else a.astype(np.float32)


def generate(name: str, batch: int, out: str, keep_onnx: bool, check: bool) -> None:
    model, inputs = models.build(name, batch)
    stem = os.path.join(out, f"{name}_b{batch}")
    with torch.no_grad():
        outputs = model(*inputs)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    tensors = [(f"input.{i}", _as_rml(t)) for i, t in enumerate(inputs)]
    tensors += [(f"output.{i}", _as_rml(t)) for i, t in enumerate(outputs)]
    write_safetensors(f"{stem}.expected.safetensors", tensors,
                      {"model": name, "batch": str(batch), "producer": f"torch {torch.__version__}",
                       "tolerance": "max abs error <= 1e-4 * max(1, max|output|)"})

    from_torch(model, inputs, stem)

    onnx_path = f"{stem}.onnx"
    input_names = [f"input.{i}" for i in range(len(inputs))]
    output_names = [f"output.{i}" for i in range(len(outputs))]
    torch.onnx.export(model, tuple(inputs), onnx_path, opset_version=OPSET, input_names=input_names,
                      output_names=output_names, do_constant_folding=True)
    try:
        from_onnx(onnx_path, f"{stem}_onnx")
    finally:
        if not keep_onnx:
            os.remove(onnx_path)

    if check:
        rml_inputs = [a for n, a in tensors if n.startswith("input.")]
        for route in ("", "_onnx"):
            graph, weights = reference.load(f"{stem}{route}")
            got = reference.run_graph(graph, weights, rml_inputs)
            for i, (g, t) in enumerate(zip(got, outputs)):
                expected = _as_rml(t)
                err = float(np.max(np.abs(g - expected)))
                if err > tolerance(expected):
                    raise SystemExit(f"{name}_b{batch}{route}: output {i} differs from PyTorch by {err:.3g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--models", help="comma-separated names from: " + ", ".join(models.ZOO))
    group.add_argument("--committed", action="store_true", help="the small models committed under tests/data/zoo")
    group.add_argument("--generated", action="store_true", help="the large models generated at test time")
    parser.add_argument("--keep-onnx", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.models:
        names = args.models.split(",")
    else:
        names = [n for n, (_, _, committed) in models.ZOO.items()
                 if (committed and not args.generated) or (not committed and not args.committed)]
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # torch.onnx.export on shape code
    for name in names:
        for batch in models.BATCHES:
            start = time.perf_counter()
            generate(name, batch, args.out, args.keep_onnx, args.check)
            print(f"{name}_b{batch}: {time.perf_counter() - start:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
