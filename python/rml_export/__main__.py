"""Command line: export a PyTorch model or an ONNX file to rml-graph.

  python3 -m rml_export torch <module:factory> <stem> --input f32:2,12 [--input i32:1,8 ...]
  python3 -m rml_export onnx <model.onnx> <stem> [--shape name=1,3,224,224 ...] [--allow-double]

`module:factory` names a Python module (importable, or a path to a .py file) and a callable in it returning the
model (an nn.Module) or a pair (model, example inputs); without example inputs, give one --input per model input
(random normal for f32, zeros for i32). Exit status 1 with the exporter's message when an op cannot be lowered.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from .ops import ExportError


def _load_factory(spec: str):
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"rml_export: expected <module:factory>, got '{spec}'")
    if module_name.endswith(".py") or os.sep in module_name:
        path = os.path.abspath(module_name)
        sys.path.insert(0, os.path.dirname(path))
        loaded = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    else:
        sys.path.insert(0, os.getcwd())
        module = importlib.import_module(module_name)
    return getattr(module, attr)


def _example(spec: str):
    import torch
    dtype, _, dims = spec.partition(":")
    shape = [int(d) for d in dims.split(",") if d]
    if dtype in ("f32", "f16", "bf16"):
        return torch.randn(*shape).to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype])
    if dtype in ("i32", "i64"):
        return torch.zeros(*shape, dtype=torch.long)
    if dtype == "bool":
        return torch.zeros(*shape, dtype=torch.bool)
    raise SystemExit(f"rml_export: --input wants f32|f16|bf16|i32|i64|bool:<dims>, got '{spec}'")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m rml_export", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="route", required=True)
    t = sub.add_parser("torch", help="export a PyTorch nn.Module through torch.fx")
    t.add_argument("factory")
    t.add_argument("stem")
    t.add_argument("--input", action="append", default=[], help="example input as f32:2,12 or i32:1,8")
    t.add_argument("--check", action="store_true", help="run the export in the NumPy reference and compare")
    t.add_argument("--narrow", action="store_true",
                   help="the seed format's f32/i32 rules (16-bit floats f32, int64 i32, bool an f32 mask)")
    o = sub.add_parser("onnx", help="lower an ONNX model")
    o.add_argument("model")
    o.add_argument("stem")
    o.add_argument("--shape", action="append", default=[], help="static shape for an input: name=1,3,224,224")
    o.add_argument("--allow-double", action="store_true", help="compute double tensors in f32")
    o.add_argument("--narrow", action="store_true",
                   help="the seed format's f32/i32 rules (16-bit floats f32, INT64 i32, BOOL an f32 mask)")
    args = parser.parse_args(argv)
    try:
        if args.route == "torch":
            from .torch_export import from_torch
            made = _load_factory(args.factory)()
            model, inputs = made if isinstance(made, tuple) else (made, None)
            if inputs is None:
                if not args.input:
                    raise SystemExit("rml_export: the factory gave no example inputs; pass --input")
                inputs = tuple(_example(s) for s in args.input)
            graph = from_torch(model, inputs, args.stem, check=args.check, narrow=args.narrow)
        else:
            from .onnx_export import from_onnx
            shapes = {}
            for s in args.shape:
                name, _, dims = s.rpartition("=")
                shapes[name] = [int(d) for d in dims.split(",")]
            graph = from_onnx(args.model, args.stem, allow_double=args.allow_double, input_shapes=shapes or None,
                              narrow=args.narrow)
    except ExportError as e:
        print(f"rml_export: {e}", file=sys.stderr)
        return 1
    print(f"{args.stem}.json: {len(graph['values'])} values, {len(graph['constants'])} constants, "
          f"{len(graph['nodes'])} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
