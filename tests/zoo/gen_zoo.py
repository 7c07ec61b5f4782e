#!/usr/bin/python3
"""Generates the zoo fixtures: each model at batch 1 and 2, exported by both routes, with PyTorch's outputs.

For model `<m>` at batch `<b>` it writes, into --out:
  <m>_b<b>.json / .safetensors            the PyTorch route (rml_export.from_torch)
  <m>_b<b>_onnx.json / .safetensors       the ONNX route (torch.onnx.export, then rml_export.from_onnx)
  <m>_b<b>.expected.safetensors           tensors `input.<i>` and `output.<i>`: the inputs in rml dtypes
                                          (int64 token ids as I32) and PyTorch's outputs (F32)
  <m>_b<b>.onnx                           only with --keep-onnx (the benchmark's ONNX Runtime peer reads it)
With --check, both exported graphs are also run by the NumPy reference interpreter and compared with PyTorch.
Both routes export with narrow=True (the seed format's f32/i32 rules): the zoo is the set of models every rml
reader and the benchmarks' peers take, and its committed files stay byte-identical.

With --real it writes the benchmark's real-size models (models.REAL, each at its own batch) instead: the
expected file, the PyTorch-route export and the .onnx, each step on its own. A step that fails leaves
<m>_b<b>.rml_error (from_torch refused the model) or <m>_b<b>.onnx_error (torch.onnx.export failed) holding the
error message, and the other steps still run. Then <m>_b<b>.flops holds the model's FLOPs (2 x multiply-adds
of every Conv2d and Linear, counted by PyTorch hooks), an engine-independent count for the benchmark.

With --real16 it writes 16-bit copies of two real-size models (models.REAL16: ResNet-18 at 224 and the BERT-size
encoder layer, the modules and seeds of --real) as <m>_b<b>_f16 and <m>_b<b>_bf16: the PyTorch-route export of
`.half()` / `.bfloat16()` (weights stored 16-bit, narrow=False), the .flops file, and an expected file holding
`input.0` (the f32 input rounded to the model's dtype), `output.0` (the reference in the model's dtype) and
`output_f32.0` (the f32 model run on the rounded input, widened exactly). The bf16 reference is PyTorch's bf16 CPU
kernels. PyTorch 1.13 has no float16 convolution, matmul or layer norm on the CPU, so the f16 reference is the
float32 model on the f16-rounded weights and input with every ATen op's float result rounded to float16 (a
TorchDispatchMode): a float16 kernel that accumulates in float32 and rounds its result, as PyTorch's CUDA ones do.
No .onnx is written for these. A file READY holding one line is written when all are done.
With --half it writes the same files (without .flops) for the CI-sized models.HALF at batch 1, as
<m>_b1_f16 and <m>_b1_bf16; tests/conformance compares rml with `output.0` (see kHalfTolerance there).

Usage: gen_zoo.py --out DIR [--models mlp,cnn,...|--committed|--generated|--real|--real16|--half]
                  [--keep-onnx] [--check]
"""

from __future__ import annotations

import argparse
import copy
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
from rml_export.safetensors import BF16Array, write_safetensors  # noqa: E402

OPSET = 14


def tolerance(expected: np.ndarray) -> float:
    """The zoo's acceptance bound: max abs error <= 1e-4 * max(1, max|ref|)."""
    return 1e-4 * max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)


def _as_rml(t: torch.Tensor) -> np.ndarray:
    a = t.detach().numpy()
    return a.astype(np.int32) if a.dtype.kind in "iu" else a.astype(np.float32)


def _write_expected(name: str, batch: int, stem: str, model, inputs):
    """Runs the model and writes <stem>.expected.safetensors; returns (its tensors, PyTorch's outputs)."""
    with torch.no_grad():
        outputs = model(*inputs)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    tensors = [(f"input.{i}", _as_rml(t)) for i, t in enumerate(inputs)]
    tensors += [(f"output.{i}", _as_rml(t)) for i, t in enumerate(outputs)]
    write_safetensors(f"{stem}.expected.safetensors", tensors,
                      {"model": name, "batch": str(batch), "producer": f"torch {torch.__version__}",
                       "tolerance": "max abs error <= 1e-4 * max(1, max|output|)"})
    return tensors, outputs


def _export_onnx(model, inputs, outputs, path: str) -> None:
    """torch.onnx.export with the zoo's opset and the `input.<i>` / `output.<i>` names."""
    torch.onnx.export(model, tuple(inputs), path, opset_version=OPSET,
                      input_names=[f"input.{i}" for i in range(len(inputs))],
                      output_names=[f"output.{i}" for i in range(len(outputs))], do_constant_folding=True)


def generate(name: str, batch: int, out: str, keep_onnx: bool, check: bool) -> None:
    model, inputs = models.build(name, batch)
    stem = os.path.join(out, f"{name}_b{batch}")
    tensors, outputs = _write_expected(name, batch, stem, model, inputs)

    from_torch(model, inputs, stem, narrow=True)

    onnx_path = f"{stem}.onnx"
    _export_onnx(model, inputs, outputs, onnx_path)
    try:
        from_onnx(onnx_path, f"{stem}_onnx", narrow=True)
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


def _flops(model, inputs) -> float:
    """2 x multiply-adds of the model's Conv2d and Linear modules (forward hooks) and of its encoder layers,
    counted from their sizes (in eval mode those run PyTorch's fused path, which calls no Linear module)."""
    total = [0.0]
    inside_encoders = set()
    for m in model.modules():
        if isinstance(m, torch.nn.TransformerEncoderLayer):
            b, s, d = inputs[0].shape
            ff = m.linear1.out_features
            # q, k, v and output projections and the two feed-forward products, then Q K^T and P V.
            total[0] += 2.0 * b * s * (4 * d * d + 2 * d * ff) + 2.0 * 2.0 * b * s * s * d
            inside_encoders.update(id(sub) for sub in m.modules())

    def conv(m, args, out):
        total[0] += 2.0 * out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear(m, args, out):
        total[0] += 2.0 * out.numel() * m.in_features

    hooks = []
    for m in model.modules():
        if id(m) in inside_encoders:
            continue
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(linear))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return total[0]


def _write_error(path: str, exc: BaseException) -> None:
    with open(path, "w") as f:
        f.write(f"{type(exc).__name__}: {exc}".strip().splitlines()[0] + "\n")


def generate_real(name: str, batch: int, out: str) -> None:
    """One real-size model; each step may fail on its own (see the module docstring)."""
    model, inputs = models.build(name, batch)
    stem = os.path.join(out, f"{name}_b{batch}")
    for suffix in (".rml_error", ".onnx_error"):
        if os.path.exists(stem + suffix):
            os.remove(stem + suffix)
    _, outputs = _write_expected(name, batch, stem, model, inputs)
    try:
        from_torch(model, inputs, stem, narrow=True)
    except Exception as e:  # noqa: BLE001 -- any refusal becomes the benchmark row's reason
        _write_error(f"{stem}.rml_error", e)
    try:
        _export_onnx(model, inputs, outputs, f"{stem}.onnx")
    except Exception as e:  # noqa: BLE001
        _write_error(f"{stem}.onnx_error", e)
    with open(f"{stem}.flops", "w") as f:
        f.write(f"{_flops(model, inputs):.0f}\n")


def _f16_reference(model, inputs):
    """The float16 reference: `model` (float16) widened exactly to float32 and run with every ATen op's float32
    result rounded to float16. Autograd stays enabled so nn.TransformerEncoderLayer takes its decomposed path
    (its fused fast path would be one op, rounded once)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    def to_f16(t):
        return t.half().float() if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t

    class RoundToF16(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return tree_map(to_f16, func(*args, **(kwargs or {})))

    widened = copy.deepcopy(model).float()
    with torch.enable_grad(), RoundToF16():
        out = widened(*[t.float() for t in inputs])
    return out.detach().half()


def _as_16bit(t: torch.Tensor):
    """A float16 or bfloat16 tensor as write_safetensors takes it (bfloat16 as its bits)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return BF16Array(t.view(torch.int16).numpy().view(np.uint16))
    return t.numpy().astype(np.float16)


def generate_16bit(name: str, batch: int, out: str, flops: bool) -> None:
    """One model in f16 and in bf16 (see the module docstring), with its .flops file if `flops`."""
    model, inputs = models.build(name, batch)
    for suffix, dtype in (("f16", torch.float16), ("bf16", torch.bfloat16)):
        stem = os.path.join(out, f"{name}_b{batch}_{suffix}")
        low = copy.deepcopy(model).to(dtype)
        low_inputs = tuple(t.to(dtype) for t in inputs)
        with torch.no_grad():
            reference_f32 = model(*[t.float() for t in low_inputs])
            if dtype == torch.bfloat16:
                reference = low(*low_inputs)
                producer = f"torch {torch.__version__} bfloat16 CPU kernels"
            else:
                reference = _f16_reference(low, low_inputs)
                producer = f"torch {torch.__version__} float32 kernels, each ATen op's result rounded to float16"
        tensors = [("input.0", _as_16bit(low_inputs[0])), ("output.0", _as_16bit(reference)),
                   ("output_f32.0", reference_f32.numpy().astype(np.float32))]
        write_safetensors(f"{stem}.expected.safetensors", tensors,
                          {"model": name, "batch": str(batch), "dtype": suffix, "producer": producer,
                           "output_f32": "the f32 model on the rounded input"})
        from_torch(low, low_inputs, stem, narrow=False)
        if flops:
            with open(f"{stem}.flops", "w") as f:
                f.write(f"{_flops(model, inputs):.0f}\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--models", help="comma-separated names from: " + ", ".join(models.ZOO))
    group.add_argument("--committed", action="store_true", help="the small models committed under tests/data/zoo")
    group.add_argument("--generated", action="store_true", help="the large models generated at test time")
    group.add_argument("--real", action="store_true", help="the benchmark's real-size models (models.REAL)")
    group.add_argument("--real16", action="store_true", help="f16 and bf16 copies of models.REAL16")
    group.add_argument("--half", action="store_true", help="f16 and bf16 copies of models.HALF (the CI's)")
    parser.add_argument("--keep-onnx", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.real:
        os.makedirs(args.out, exist_ok=True)
        torch.set_num_threads(min(2, torch.get_num_threads()))
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for name, (_, _, batch) in models.REAL.items():
            start = time.perf_counter()
            generate_real(name, batch, args.out)
            print(f"{name}_b{batch}: {time.perf_counter() - start:.2f} s", flush=True)
        return 0
    if args.real16:
        os.makedirs(args.out, exist_ok=True)
        torch.set_num_threads(min(2, torch.get_num_threads()))
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for name in models.REAL16:
            start = time.perf_counter()
            generate_16bit(name, models.REAL[name][2], args.out, True)
            print(f"{name}: {time.perf_counter() - start:.2f} s", flush=True)
        with open(os.path.join(args.out, "READY"), "w") as f:
            f.write(f"gen_zoo.py --real16: {', '.join(models.REAL16)} in f16 and bf16\n")
        return 0
    if args.half:
        os.makedirs(args.out, exist_ok=True)
        torch.set_num_threads(min(2, torch.get_num_threads()))
        for name in models.HALF:
            start = time.perf_counter()
            generate_16bit(name, 1, args.out, False)
            print(f"{name}_b1 f16/bf16: {time.perf_counter() - start:.2f} s", flush=True)
        return 0
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
