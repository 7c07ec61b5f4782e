"""PyTorch → rml-graph: `torch.fx` tracing with the example inputs alongside, then lowering onto the op set.

The tracer runs every traced call on the example inputs too, so shape queries (`x.size(1)`, `x.shape`) are
answered with plain numbers while tracing (rml shapes are static). The traced graph is then run once more by an
`fx.Interpreter` that lowers each node as it goes: a node whose arguments do not depend on the graph inputs is
folded (its concrete result becomes a constant: buffers sliced to a static length, `torch.arange(T)`, a causal
mask); the rest goes to a handler per module type, function or tensor method, and each lowered result is checked
against the concrete result's shape and dtype.
"""

from __future__ import annotations

import copy
import math
import operator
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from . import lower
from .graph import GraphBuilder, Value
from .ops import FLOAT_DTYPES, ExportError, normalize_axis
from .safetensors import BF16Array

_TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep
PRODUCER = f"rml-export-torch 0.1 (torch {torch.__version__})"


class _Param:
    """A parameter or buffer reached through `get_attr`: becomes a constant stored under its own name."""

    __slots__ = ("name", "tensor")

    def __init__(self, name: str, tensor: torch.Tensor):
        self.name, self.tensor = name, tensor


_MODULE_CALL, _MODULE_GETATTR = nn.Module.__call__, nn.Module.__getattr__


class _ConcreteProxy(fx.Proxy):
    """A proxy that answers static attribute queries (`x.shape`, `x.device`, ...) from the concrete run."""

    def __getattr__(self, attr):
        if attr in _Tracer._STATIC_ATTRS and "rml_concrete" in self.node.meta:
            return getattr(self.node.meta["rml_concrete"], attr)
        return super().__getattr__(attr)

    def __iter__(self):  # tuple results (split, chunk, attention) unpack by their concrete length
        concrete = self.node.meta.get("rml_concrete")
        if isinstance(concrete, (tuple, list)):
            return iter([self[i] for i in range(len(concrete))])
        return super().__iter__()

    def __len__(self):
        concrete = self.node.meta.get("rml_concrete")
        if concrete is not None and hasattr(concrete, "__len__"):
            return len(concrete)
        raise TypeError("len() of a traced value without a concrete length")


class _Tracer(fx.Tracer):
    """Traces with the example inputs alongside, so that shape queries are answered with concrete values.

    `x.size()`, `x.shape[i]`, `x.dim()` return plain Python values (shapes are static in rml), so code like
    `torch.arange(0, x.size(1))` traces. Each node records its module path; torch.nn modules (attention and
    transformer layers included) are leaves.
    """

    _STATIC_METHODS = ("size", "dim", "numel", "ndimension")
    _STATIC_ATTRS = ("shape", "ndim", "dtype", "device", "is_cuda")

    def __init__(self, example_inputs: Sequence[torch.Tensor]):
        super().__init__()
        self.record_stack_traces = True
        self._path: List[str] = []
        self._examples = list(example_inputs)
        self._placeholders = 0

    def call_module(self, m, forward, args, kwargs):
        self._path.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self._path.pop()

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        node.meta["rml_module"] = self._path[-1] if self._path else ""
        return node

    def _concrete(self, kind, target, args, kwargs):
        def unwrap(a):
            return a.node.meta["rml_concrete"] if isinstance(a, fx.Proxy) else a
        args = fx.node.map_aggregate(args, unwrap)
        kwargs = fx.node.map_aggregate(kwargs, unwrap)
        if kind == "placeholder":
            index, self._placeholders = self._placeholders, self._placeholders + 1
            return self._examples[index] if index < len(self._examples) else None
        if kind == "get_attr":
            obj = self.root
            for part in target.split("."):
                obj = getattr(obj, part)
            return obj
        if kind == "call_function":
            return target(*args, **kwargs)
        if kind == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        if kind == "call_module":
            return self.root.get_submodule(target)(*args, **kwargs)
        return None

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _ConcreteProxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        if kind == "output":
            return super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        # The tracer patches nn.Module.__call__/__getattr__; the concrete run must see the real ones.
        patched = nn.Module.__call__, nn.Module.__getattr__
        nn.Module.__call__, nn.Module.__getattr__ = _MODULE_CALL, _MODULE_GETATTR
        try:
            with torch.no_grad():
                concrete = self._concrete(kind, target, args, kwargs)
        finally:
            nn.Module.__call__, nn.Module.__getattr__ = patched
        static = (kind == "call_method" and target in self._STATIC_METHODS) or (
            kind == "call_function" and target is getattr and args[1] in self._STATIC_ATTRS) or (
            kind == "call_function" and target is operator.getitem and isinstance(args[0], fx.proxy.Attribute)
            and args[0].attr == "shape")
        if static:
            return concrete
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        proxy.node.meta["rml_concrete"] = concrete
        return proxy


def _contains_value(obj) -> bool:
    if isinstance(obj, Value):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_value(o) for o in obj)
    if isinstance(obj, dict):
        return any(_contains_value(o) for o in obj.values())
    if isinstance(obj, slice):
        return any(_contains_value(o) for o in (obj.start, obj.stop, obj.step))
    return False


def _contains_tensor(obj) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_contains_tensor(o) for o in obj)
    if isinstance(obj, dict):
        return any(_contains_tensor(o) for o in obj.values())
    return False


def _framework_name(node: fx.Node, gm: fx.GraphModule) -> str:
    if node.op == "call_module":
        m = gm.get_submodule(node.target)
        return f"{type(m).__module__}.{type(m).__qualname__}"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    module = getattr(target, "__module__", None)
    name = getattr(target, "__name__", str(target))
    if module in (None, "torch._C._VariableFunctions", "torch._C", "torch._ops") or module == "torch":
        return f"aten::{name}"
    return f"{module}.{name}"


def _origin(node: fx.Node) -> Optional[dict]:
    origin = {}
    module = node.meta.get("rml_module") or (node.target if node.op == "call_module" else "")
    if module:
        origin["module"] = module
    # fx lists the innermost frame first; the user's code is the first frame outside torch and this package.
    for path, line in re.findall(r'File "([^"]+)", line (\d+)', node.stack_trace or ""):
        if not os.path.realpath(path).startswith((_TORCH_DIR, _PACKAGE_DIR)):
            origin["file"], origin["line"] = os.path.basename(path), int(line)
            break
    return origin or None


class _Lowering(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule, builder: GraphBuilder, input_names: Sequence[str]):
        super().__init__(gm)
        self.b = builder
        self.sym: Dict[fx.Node, Any] = {}
        self.input_names = list(input_names)
        self.folded_into_conv: Dict[fx.Node, Any] = {}
        self.value_dtypes: Dict[int, torch.dtype] = {}  # id(Value) -> dtype of the PyTorch result it stands for
        self.node: Optional[fx.Node] = None
        self.result: Any = None

    # -- helpers used by handlers -----------------------------------------------------------------------
    def value(self, x) -> Value:
        """Turns a lowered argument (Value, parameter, concrete tensor, Python number) into a graph value."""
        if isinstance(x, Value):
            return x
        if isinstance(x, _Param):
            return self.b.param(x.name, _to_numpy(x.tensor, self.b.narrow, self.b.float_as))
        if isinstance(x, torch.Tensor):
            return self.b.const(_to_numpy(x, self.b.narrow, self.b.float_as))
        if isinstance(x, (bool, int, float)):
            return self.b.scalar(float(x))
        raise ExportError(f"cannot use {type(x).__name__} {x!r} as a tensor")

    def torch_dtype(self, x) -> Optional[torch.dtype]:
        """The PyTorch dtype behind a lowered argument (a bool mask is an f32 value in rml)."""
        if isinstance(x, _Param):
            return x.tensor.dtype
        if isinstance(x, torch.Tensor):
            return x.dtype
        return self.value_dtypes.get(id(x))

    def param(self, module_path: str, name: str, tensor: torch.Tensor) -> Value:
        return self.b.param(f"{module_path}.{name}" if module_path else name, _to_numpy(tensor, self.b.narrow, self.b.float_as))

    def op(self, op: str, *inputs, **attrs) -> Value:
        return self.b.op(op, [self.value(x) for x in inputs], **attrs)

    @property
    def out_shape(self) -> List[int]:
        return list(self.result.shape)

    # -- the traversal ----------------------------------------------------------------------------------
    def run_node(self, n: fx.Node):
        result = super().run_node(n)
        self.node, self.result = n, result
        self.b.origin = _origin(n)
        try:
            self.sym[n] = self._lower(n, result)
        except ExportError as e:
            where = n.meta.get("rml_module") or (n.target if n.op == "call_module" else "")
            error = ExportError(f"cannot lower {_framework_name(n, self.module)} at {where or '<top>'} "
                                f"(fx node '{n.name}'): {e}")
            error.message = error.args[0]  # fx.Interpreter appends its own traceback to args; from_torch drops it
            raise error from None
        self.sym[n] = self._conform(self.sym[n], result)
        self._check(n, self.sym[n], result)
        return result

    # A lowering may compute in a dtype that holds PyTorch's result exactly (an argmax in i32, an f32 0/1 mask for
    # a comparison): unless narrowing, the value is cast to PyTorch's dtype so the graph carries it.
    _WIDENINGS = {("i32", "i64"), ("f32", "bool")}

    def _conform(self, sym, result):
        if self.b.narrow or self.b.float_as or not isinstance(sym, Value) or not isinstance(result, torch.Tensor):
            if isinstance(sym, (list, tuple)) and isinstance(result, (list, tuple)) and len(sym) == len(result):
                return type(sym)(self._conform(s, r) for s, r in zip(sym, result))
            return sym
        target = _rml_dtype(result, False)
        if sym.dtype != target and (sym.dtype, target) in self._WIDENINGS:
            return self.b.op("cast", [sym], to=target)
        return sym

    def _lower(self, n: fx.Node, result):
        if n.op == "placeholder":
            if not isinstance(result, torch.Tensor):
                raise ExportError("only tensor inputs are supported")
            index = sum(1 for m in self.sym if m.op == "placeholder")
            name = self.input_names[index] if index < len(self.input_names) else n.name
            return self.b.input(name, _rml_dtype(result, self.b.narrow, self.b.float_as), result.shape)
        if n.op == "get_attr":
            return _Param(n.target, result) if isinstance(result, torch.Tensor) else result
        if n.op == "output":
            return fx.node.map_arg(n.args[0], lambda a: self.sym[a])
        if n in self.folded_into_conv:
            return self.folded_into_conv[n]
        args = fx.node.map_arg(n.args, lambda a: self.sym[a])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: self.sym[a])
        if not _contains_value((args, kwargs)) or not _contains_tensor(result):
            if n.op == "call_method" and n.target in ("item", "tolist", "__bool__"):
                raise ExportError("a data-dependent Python value")
            return result  # static: folded into constants by whoever reads it
        if n.op == "call_module":
            module = self.module.get_submodule(n.target)
            for cls in type(module).__mro__:
                handler = MODULE_HANDLERS.get(cls)
                if handler is not None:
                    return handler(self, module, n.target, *args, **kwargs)
        elif n.op == "call_function":
            handler = FUNCTION_HANDLERS.get(n.target)
            if handler is not None:
                return handler(self, *args, **kwargs)
        elif n.op == "call_method":
            handler = METHOD_HANDLERS.get(n.target)
            if handler is not None:
                return handler(self, *args, **kwargs)
        raise ExportError("no lowering onto the rml op set")

    def _check(self, n: fx.Node, sym, result):
        """The lowered result must have the concrete result's structure, shapes and (mapped) dtypes."""
        if isinstance(sym, Value):
            if not isinstance(result, torch.Tensor):
                raise ExportError(f"fx node '{n.name}' lowered to a tensor but computes {type(result).__name__}")
            if list(sym.shape) != list(result.shape) or sym.dtype != _rml_dtype(result, self.b.narrow, self.b.float_as):
                raise ExportError(f"fx node '{n.name}' lowered to {sym.dtype} {list(sym.shape)} but PyTorch gives "
                                  f"{result.dtype} {list(result.shape)}")
            self.value_dtypes[id(sym)] = result.dtype
            if sym.producer is not None and n.op != "placeholder":
                if not sym.name:
                    sym.name = n.name
                if not sym.producer.name:
                    sym.producer.name = n.name
        elif isinstance(sym, (list, tuple)) and isinstance(result, (list, tuple)):
            if len(sym) != len(result):
                raise ExportError(f"fx node '{n.name}' lowered to {len(sym)} results, PyTorch gives {len(result)}")
            for s, r in zip(sym, result):
                if isinstance(s, Value):
                    self._check(n, s, r)


def _to_numpy(t: torch.Tensor, narrow: bool = True, float_as: Optional[str] = None):
    """The data of a tensor for the builder: float16 and int64 and bool kept (bfloat16 as a BF16Array of its
    bits), unless `narrow` (the seed rules: bool an f32 mask, 16-bit and double floats f32). With `float_as`
    "f16", float32 data is a float16 model's traced in f32 (see from_torch) and is rounded back to float16."""
    t = t.detach().cpu()
    if float_as == "f16" and t.dtype == torch.float32:
        return t.contiguous().numpy().astype(np.float16)
    if t.dtype == torch.bool:
        return t.numpy().astype(np.float32) if narrow else t.numpy()
    if t.dtype == torch.bfloat16 and not narrow:
        return BF16Array(t.contiguous().view(torch.int16).numpy().view(np.uint16))
    if t.dtype in (torch.float16, torch.bfloat16, torch.float64) and (narrow or t.dtype != torch.float16):
        t = t.float()
    return t.contiguous().numpy()


_KEPT = {torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64", torch.bool: "bool"}


def _rml_dtype(t: torch.Tensor, narrow: bool = True, float_as: Optional[str] = None) -> str:
    if float_as and t.dtype == torch.float32:
        return float_as
    if not narrow and t.dtype in _KEPT:
        return _KEPT[t.dtype]
    if t.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.bool):
        return "f32"
    if t.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        return "i32"
    raise ExportError(f"no rml dtype for {t.dtype}")


def _index(ctx, x):
    """Gather indices: i32 or i64 as they are (rml's gather takes both); other dtypes cast to i32."""
    v = ctx.value(x)
    return v if v.dtype in ("i32", "i64") and not ctx.b.narrow else _cast_to(ctx, v, "i32")


# ----------------------------------------------------------------------------------------------------------------
# Handlers. Each takes the lowering context first, then the traced call's arguments (Values or static objects).

MODULE_HANDLERS: Dict[type, Callable] = {}
FUNCTION_HANDLERS: Dict[Any, Callable] = {}
METHOD_HANDLERS: Dict[str, Callable] = {}


_functions = lower.registrar(FUNCTION_HANDLERS)
_methods = lower.registrar(METHOD_HANDLERS)
_modules = lower.registrar(MODULE_HANDLERS)


def _pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


# -- elementwise ----------------------------------------------------------------------------------------------
def _unary(op):
    def lowering(ctx, x, *args, **kwargs):
        return ctx.op(op, x)
    return lowering


for _name in ("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "sin", "cos", "erf",
              "reciprocal"):
    _fn = _unary(_name)
    FUNCTION_HANDLERS[getattr(torch, _name)] = _fn
    METHOD_HANDLERS[_name] = _fn
for _f, _op in ((F.relu, "relu"), (F.sigmoid, "sigmoid"), (F.tanh, "tanh"), (operator.neg, "neg"),
                (F.silu, "silu"), (torch.special.erf, "erf")):
    FUNCTION_HANDLERS[_f] = _unary(_op)
METHOD_HANDLERS["__neg__"] = _unary("neg")
for _m, _op in ((nn.ReLU, "relu"), (nn.Sigmoid, "sigmoid"), (nn.Tanh, "tanh"), (nn.SiLU, "silu")):
    MODULE_HANDLERS[_m] = (lambda op: lambda ctx, module, path, x: ctx.op(op, x))(_op)


def _identity(ctx, x, *args, **kwargs):
    return x


_functions(F.dropout, F.dropout2d, F.alpha_dropout)(_identity)
_methods("contiguous", "detach", "clone")(_identity)
MODULE_HANDLERS[nn.Dropout] = MODULE_HANDLERS[nn.Dropout2d] = MODULE_HANDLERS[nn.Identity] = \
    lambda ctx, module, path, x, *a, **k: x


@_functions(F.gelu)
def _gelu(ctx, x, approximate="none"):
    return ctx.op("gelu", x, approximate=approximate)


@_modules(nn.GELU)
def _gelu_module(ctx, module, path, x):
    return ctx.op("gelu", x, approximate=getattr(module, "approximate", "none"))


def _clamp(ctx, x, lo=None, hi=None):
    y = ctx.value(x)
    if lo is not None:  # a lower bound of 0 is a relu, which executors fuse into the producing kernel
        y = ctx.op("relu", y) if float(lo) == 0.0 else ctx.op("maximum", y, float(lo))
    if hi is not None:
        y = ctx.op("minimum", y, float(hi))
    return y


_functions(torch.clamp, torch.clip)(lambda ctx, x, min=None, max=None: _clamp(ctx, x, min, max))
_methods("clamp", "clip")(lambda ctx, x, min=None, max=None: _clamp(ctx, x, min, max))
_functions(F.relu6)(lambda ctx, x, inplace=False: _clamp(ctx, x, 0.0, 6.0))
_functions(F.hardtanh)(lambda ctx, x, min_val=-1.0, max_val=1.0, inplace=False: _clamp(ctx, x, min_val, max_val))
_modules(nn.Hardtanh)(lambda ctx, m, path, x: _clamp(ctx, x, m.min_val, m.max_val))  # ReLU6 is a Hardtanh


def _leaky_relu(ctx, x, slope):
    # max(x, 0) + slope * min(x, 0)
    return ctx.op("add", ctx.op("relu", x), ctx.op("mul", ctx.op("minimum", x, 0.0), float(slope)))


_functions(F.leaky_relu)(lambda ctx, x, negative_slope=0.01, inplace=False: _leaky_relu(ctx, x, negative_slope))
_modules(nn.LeakyReLU)(lambda ctx, m, path, x: _leaky_relu(ctx, x, m.negative_slope))


def _hardsigmoid(ctx, x):
    return ctx.op("div", _clamp(ctx, ctx.op("add", x, 3.0), 0.0, 6.0), 6.0)


_functions(F.hardsigmoid)(lambda ctx, x, inplace=False: _hardsigmoid(ctx, x))
_functions(F.hardswish)(lambda ctx, x, inplace=False: ctx.op("mul", x, _hardsigmoid(ctx, x)))
_modules(nn.Hardsigmoid)(lambda ctx, m, path, x: _hardsigmoid(ctx, x))
_modules(nn.Hardswish)(lambda ctx, m, path, x: ctx.op("mul", x, _hardsigmoid(ctx, x)))


# -- binary and comparison ------------------------------------------------------------------------------------
def _binary(op, swap=False):
    def lowering(ctx, a, b, *args, alpha=None, rounding_mode=None, **kwargs):
        if rounding_mode is not None:
            raise ExportError(f"division with rounding_mode={rounding_mode!r}")
        if alpha is not None and alpha != 1:
            b = ctx.op("mul", b, float(alpha))
        a, b = (b, a) if swap else (a, b)
        if op in ("mul", "maximum") and ctx.value(a).dtype == "bool":  # & and | of bools
            return ctx.op("logical_and" if op == "mul" else "logical_or", a, b)
        y = ctx.op(op, a, b)
        if op in ("equal", "less", "greater") and y.dtype == "f32" and not ctx.b.narrow:
            y = ctx.op("cast", y, to="bool")  # rml's f32 comparisons give 0/1 masks; PyTorch gives bool
        return y
    return lowering


for _names, _op in ((("add", "__add__", "__iadd__"), "add"), (("sub", "__sub__", "__isub__"), "sub"),
                    (("mul", "__mul__", "__imul__"), "mul"), (("div", "__truediv__", "true_divide"), "div"),
                    (("pow", "__pow__"), "pow"), (("maximum",), "maximum"), (("minimum",), "minimum"),
                    (("eq", "__eq__"), "equal"), (("lt", "__lt__"), "less"), (("gt", "__gt__"), "greater"),
                    (("matmul", "__matmul__", "bmm", "mm"), "matmul")):
    for _n in _names:
        METHOD_HANDLERS[_n] = _binary(_op)
        if hasattr(torch, _n) and not _n.startswith("__"):
            FUNCTION_HANDLERS[getattr(torch, _n)] = _binary(_op)
for _f, _op in ((operator.add, "add"), (operator.iadd, "add"), (operator.sub, "sub"), (operator.mul, "mul"),
                (operator.truediv, "div"), (operator.pow, "pow"), (operator.matmul, "matmul"),
                (operator.eq, "equal"), (operator.lt, "less"), (operator.gt, "greater"), (torch.divide, "div"),
                (torch.multiply, "mul"), (torch.subtract, "sub")):
    FUNCTION_HANDLERS[_f] = _binary(_op)
for _n, _op in (("__radd__", "add"), ("__rsub__", "sub"), ("__rmul__", "mul"), ("__rtruediv__", "div"),
                ("__rpow__", "pow")):
    METHOD_HANDLERS[_n] = _binary(_op, swap=True)
FUNCTION_HANDLERS[torch.rsub] = _binary("sub", swap=True)


def _remainder(fmod, swap=False):
    """`%`, torch.remainder (the divisor's sign) and torch.fmod (the dividend's) as rml's mod, on integers; on
    floats torch.fmod only (rml's float mod is C's fmod)."""
    def lowering(ctx, a, b):
        a, b = (b, a) if swap else (a, b)
        dtype = next(ctx.value(v).dtype for v in (a, b) if isinstance(v, (Value, _Param, torch.Tensor)))
        if dtype in FLOAT_DTYPES and not fmod:
            raise ExportError("remainder of floats (rml's mod on floats is fmod)")
        if dtype not in FLOAT_DTYPES and ctx.b.narrow:
            raise ExportError("integer remainder (narrowed, rml arithmetic is f32)")
        if dtype in ("i32", "i64"):  # a Python integer operand as a constant of the tensor's dtype, not f32
            a, b = (ctx.b.const(np.array(v, dtype=np.int64 if dtype == "i64" else np.int32))
                    if isinstance(v, int) and not isinstance(v, bool) else v for v in (a, b))
        return ctx.op("mod", a, b, fmod=fmod)
    return lowering


for _f, _fmod in ((torch.remainder, False), (operator.mod, False), (torch.fmod, True)):
    FUNCTION_HANDLERS[_f] = _remainder(_fmod)
for _n, _fmod in (("remainder", False), ("__mod__", False), ("fmod", True)):
    METHOD_HANDLERS[_n] = _remainder(_fmod)
METHOD_HANDLERS["__rmod__"] = _remainder(False, swap=True)


def _not(ctx, x):
    v = ctx.value(x)
    return ctx.op("logical_not", v) if v.dtype == "bool" else ctx.op("sub", 1.0, v)


def _negated(op):
    return lambda ctx, a, b: _not(ctx, ctx.op(op, a, b))


for _f, _op in ((operator.ge, "less"), (operator.le, "greater"), (operator.ne, "equal"), (torch.ge, "less"),
                (torch.le, "greater"), (torch.ne, "equal")):
    FUNCTION_HANDLERS[_f] = _negated(_op)
for _n, _op in (("ge", "less"), ("__ge__", "less"), ("le", "greater"), ("__le__", "greater"), ("ne", "equal"),
                ("__ne__", "equal")):
    METHOD_HANDLERS[_n] = _negated(_op)
FUNCTION_HANDLERS[operator.invert] = FUNCTION_HANDLERS[torch.logical_not] = _not
METHOD_HANDLERS["logical_not"] = METHOD_HANDLERS["__invert__"] = _not
FUNCTION_HANDLERS[operator.and_] = FUNCTION_HANDLERS[torch.logical_and] = _binary("mul")
FUNCTION_HANDLERS[operator.or_] = FUNCTION_HANDLERS[torch.logical_or] = _binary("maximum")


@_functions(torch.where)
def _where(ctx, cond, a, b):
    return ctx.op("where", cond, a, b)


@_functions(torch.masked_fill)
@_methods("masked_fill", "masked_fill_")
def _masked_fill(ctx, x, mask, value):
    return ctx.op("where", mask, value, x)


@_functions(torch.max, torch.min)
@_methods("max", "min")
def _max_min(ctx, x, dim=None, keepdim=False):
    is_max = ctx.node.target in (torch.max, "max")
    if isinstance(dim, (Value, _Param, torch.Tensor)):
        return ctx.op("maximum" if is_max else "minimum", x, dim)
    if dim is None:
        return ctx.op("max" if is_max else "min", x)
    values = ctx.op("max" if is_max else "min", x, axes=[dim], keepdims=keepdim)
    if not is_max:
        return values, ctx.op("argmax", ctx.op("neg", x), axis=dim, keepdims=keepdim)
    return values, ctx.op("argmax", x, axis=dim, keepdims=keepdim)


@_functions(torch.argmax)
@_methods("argmax")
def _argmax(ctx, x, dim=None, keepdim=False):
    if dim is None:
        return ctx.op("argmax", ctx.op("reshape", x, shape=[-1]), axis=0, keepdims=False) if not keepdim else \
            ctx.op("reshape", ctx.op("argmax", ctx.op("reshape", x, shape=[-1]), axis=0), shape=ctx.out_shape)
    return ctx.op("argmax", x, axis=dim, keepdims=keepdim)


# -- casts ----------------------------------------------------------------------------------------------------
def _cast_to(ctx, x, target: str):
    v = ctx.value(x)
    return v if v.dtype == target else ctx.op("cast", v, to=target)


@_methods("float", "long", "int", "bool", "to", "type", "type_as")
def _cast_method(ctx, x, *args, **kwargs):
    return _cast_to(ctx, x, _rml_dtype(ctx.result, ctx.b.narrow, ctx.b.float_as))


# -- reductions, softmax, normalisation -----------------------------------------------------------------------
def _dims(dim):
    if dim is None:
        return []
    return list(dim) if isinstance(dim, (list, tuple)) else [dim]


def _reduction(op):
    def lowering(ctx, x, dim=None, keepdim=False, *args, dtype=None, **kwargs):
        v = ctx.value(x)
        return ctx.op(op, v, axes=_dims(dim), keepdims=keepdim)
    return lowering


for _n, _op in (("mean", "mean"), ("sum", "sum"), ("amax", "max"), ("amin", "min")):
    FUNCTION_HANDLERS[getattr(torch, _n)] = METHOD_HANDLERS[_n] = _reduction(_op)


def _softmax(ctx, x, dim=None, *args, **kwargs):
    return ctx.op("softmax", x, axis=-1 if dim is None else dim)


def _log_softmax(ctx, x, dim=None, *args, **kwargs):
    return lower.log_softmax(ctx.b, ctx.value(x), dim)


_functions(F.softmax, torch.softmax)(_softmax)
_methods("softmax")(_softmax)
_modules(nn.Softmax)(lambda ctx, m, path, x: _softmax(ctx, x, m.dim))
_functions(F.log_softmax, torch.log_softmax)(_log_softmax)
_methods("log_softmax")(_log_softmax)
_modules(nn.LogSoftmax)(lambda ctx, m, path, x: _log_softmax(ctx, x, m.dim))


def layer_norm(ctx, x, ndims: int, weight, bias, eps: float):
    """LayerNorm over the last `ndims` axes, as PyTorch computes it (biased variance)."""
    return lower.layer_norm(ctx.b, ctx.value(x), range(-ndims, 0), eps,
                            None if weight is None else ctx.value(weight), None if bias is None else ctx.value(bias))[0]


@_modules(nn.LayerNorm)
def _layer_norm_module(ctx, m, path, x):
    weight = ctx.param(path, "weight", m.weight) if m.elementwise_affine else None
    bias = ctx.param(path, "bias", m.bias) if m.elementwise_affine else None
    return layer_norm(ctx, x, len(m.normalized_shape), weight, bias, m.eps)


@_functions(F.layer_norm)
def _layer_norm_fn(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return layer_norm(ctx, x, len(normalized_shape), weight, bias, eps)


def _bn_scale_shift(m: nn.modules.batchnorm._BatchNorm):
    if m.training or m.running_mean is None:
        raise ExportError("batch norm without running statistics (call model.eval())")
    var = m.running_var.detach().double()
    scale = 1.0 / torch.sqrt(var + m.eps)
    if m.weight is not None:
        scale = scale * m.weight.detach().double()
    shift = -m.running_mean.detach().double() * scale
    if m.bias is not None:
        shift = shift + m.bias.detach().double()
    return scale, shift


@_modules(nn.BatchNorm1d, nn.BatchNorm2d)
def _batch_norm(ctx, m, path, x):
    scale, shift = _bn_scale_shift(m)
    rank = len(ctx.value(x).shape)
    bshape = [-1] + [1] * (rank - 2)
    y = ctx.op("mul", x, scale.float().reshape(bshape))
    return ctx.op("add", y, shift.float().reshape(bshape))


# -- linear, convolution, pooling -----------------------------------------------------------------------------
def linear(ctx, x, weight: Value, bias: Optional[Value]):
    return lower.linear(ctx.b, ctx.value(x), weight, bias)


@_modules(nn.Linear)
def _linear_module(ctx, m, path, x):
    bias = ctx.param(path, "bias", m.bias) if m.bias is not None else None
    return linear(ctx, x, ctx.param(path, "weight", m.weight), bias)


@_functions(F.linear)
def _linear_fn(ctx, x, weight, bias=None):
    return linear(ctx, x, ctx.value(weight), ctx.value(bias) if bias is not None else None)


def _conv_pads(padding, kernel, dilation):
    if isinstance(padding, str):
        if padding == "valid":
            return [0, 0, 0, 0]
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]  # 'same' (stride 1): extra pad goes at the end
        return [total[0] // 2, total[1] // 2, total[0] - total[0] // 2, total[1] - total[1] // 2]
    p = _pair(padding)
    return [p[0], p[1], p[0], p[1]]


@_modules(nn.Conv2d)
def _conv2d_module(ctx, m, path, x):
    if m.padding_mode != "zeros":
        raise ExportError(f"padding_mode={m.padding_mode!r}")
    attrs = dict(strides=list(m.stride), pads=_conv_pads(m.padding, m.kernel_size, m.dilation),
                 dilations=list(m.dilation), groups=m.groups)
    users = list(ctx.node.users)
    bn = None
    if len(users) == 1 and users[0].op == "call_module":
        candidate = ctx.module.get_submodule(users[0].target)
        if isinstance(candidate, nn.BatchNorm2d) and not candidate.training:
            bn = (users[0], candidate)
    if bn is None:
        inputs = [x, ctx.param(path, "weight", m.weight)]
        if m.bias is not None:
            inputs.append(ctx.param(path, "bias", m.bias))
        return ctx.op("conv2d", *inputs, **attrs)
    # Fold the batch norm that alone reads this convolution into its weights: w' = w * s, b' = (b - mean) * s + beta.
    bn_node, bn_module = bn
    scale, shift = _bn_scale_shift(bn_module)
    weight = (m.weight.detach().double() * scale.reshape(-1, 1, 1, 1)).float()
    bias = shift if m.bias is None else m.bias.detach().double() * scale + shift
    y = ctx.op("conv2d", x, ctx.b.const(weight.numpy()), ctx.b.const(bias.float().numpy()), **attrs)
    ctx.folded_into_conv[bn_node] = y
    return y


@_functions(F.conv2d)
def _conv2d_fn(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    w = ctx.value(weight)
    inputs = [x, w] + ([bias] if bias is not None else [])
    return ctx.op("conv2d", *inputs, strides=_pair(stride), pads=_conv_pads(padding, w.shape[2:], _pair(dilation)),
                  dilations=_pair(dilation), groups=groups)


def _pool_pads(ctx, x, kernel, stride, padding, ceil_mode):
    """PyTorch's ceil_mode becomes extra padding at the bottom/right (windows start inside the input)."""
    shape = ctx.value(x).shape
    pads = _pair(padding) * 2
    if ceil_mode:
        for axis in range(2):
            size = shape[2 + axis]
            want = ctx.out_shape[2 + axis]
            floor_out = (size + 2 * pads[axis] - kernel[axis]) // stride[axis] + 1
            pads[2 + axis] += (want - floor_out) * stride[axis]
    return pads


def _max_pool(ctx, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if _pair(dilation) != [1, 1] or return_indices:
        raise ExportError("max pooling with dilation or indices")
    kernel = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel
    return ctx.op("max_pool2d", x, kernel=kernel, strides=stride,
                  pads=_pool_pads(ctx, x, kernel, stride, padding, ceil_mode))


def _avg_pool(ctx, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    if divisor_override is not None:
        raise ExportError("average pooling with a divisor override")
    kernel = _pair(kernel_size)
    stride = _pair(stride) if stride else kernel
    pads = _pair(padding) * 2
    ceiled = _pool_pads(ctx, x, kernel, stride, padding, ceil_mode)
    extra = [ceiled[2] - pads[2], ceiled[3] - pads[3]]
    return lower.avg_pool(ctx.b, ctx.value(x), kernel, stride, pads, count_include_pad, extra)


_functions(F.max_pool2d)(_max_pool)
_modules(nn.MaxPool2d)(lambda ctx, m, path, x: _max_pool(ctx, x, m.kernel_size, m.stride, m.padding, m.dilation,
                                                         m.ceil_mode, m.return_indices))
_functions(F.avg_pool2d)(_avg_pool)
_modules(nn.AvgPool2d)(lambda ctx, m, path, x: _avg_pool(ctx, x, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                                                         m.count_include_pad, m.divisor_override))


def _adaptive_avg_pool(ctx, x, output_size):
    return lower.adaptive_avg_pool2d(ctx.b, ctx.value(x), *ctx.out_shape[2:])


_functions(F.adaptive_avg_pool2d)(_adaptive_avg_pool)
_modules(nn.AdaptiveAvgPool2d)(lambda ctx, m, path, x: _adaptive_avg_pool(ctx, x, m.output_size))


def _interpolate(ctx, x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None, antialias=False):
    if antialias:
        raise ExportError("interpolation with antialias")
    v = ctx.value(x)
    spatial = len(v.shape) - 2
    factors = scale_factor if isinstance(scale_factor, (list, tuple)) else [scale_factor] * spatial
    methods = {"nearest": ("nearest", "asymmetric", "floor"), "nearest-exact": ("nearest", "half_pixel",
               "round_prefer_ceil"), "linear": ("linear", "pytorch_half_pixel", ""), "bilinear": ("linear",
               "pytorch_half_pixel", ""), "bicubic": ("cubic", "pytorch_half_pixel", "")}
    if mode not in methods:
        raise ExportError(f"interpolation mode '{mode}'")
    kind, coordinates, nearest = methods[mode]
    if align_corners:
        coordinates = "align_corners"
    y = v
    for i in range(spatial):
        axis = 2 + i
        out = ctx.out_shape[axis]
        # PyTorch maps coordinates with the given factor unless asked to recompute it from the sizes.
        scale = out / v.shape[axis] if (size is not None or recompute_scale_factor or align_corners) \
            else float(factors[i])
        if out != v.shape[axis] or scale != 1.0:
            y = lower.resample_axis(ctx.b, y, axis, scale, out, kind, coordinates, nearest or "floor")
    return y


_functions(F.interpolate)(_interpolate)
_modules(nn.Upsample)(lambda ctx, m, path, x: _interpolate(ctx, x, m.size, m.scale_factor, m.mode, m.align_corners,
                                                           getattr(m, "recompute_scale_factor", None)))


@_functions(torch.einsum)
def _einsum(ctx, equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return lower.einsum(ctx.b, equation, [ctx.value(o) for o in operands])


_functions(F.local_response_norm)(lambda ctx, x, size, alpha=1e-4, beta=0.75, k=1.0: lower.local_response_norm(
    ctx.b, ctx.value(x), size, alpha, beta, k, size // 2))
_modules(nn.LocalResponseNorm)(lambda ctx, m, path, x: lower.local_response_norm(ctx.b, ctx.value(x), m.size, m.alpha,
                                                                               m.beta, m.k, m.size // 2))


@_modules(nn.ConvTranspose2d)
def _conv_transpose2d_module(ctx, m, path, x, output_size=None):
    if m.padding_mode != "zeros":
        raise ExportError(f"padding_mode={m.padding_mode!r}")
    v = ctx.value(x)
    # output_size (or output_padding) only adds rows at the end: the difference from the default size
    natural = [(i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in
               zip(v.shape[2:], m.stride, m.padding, m.dilation, m.kernel_size)]
    out_pad = [o - n for o, n in zip(ctx.out_shape[2:], natural)]
    bias = ctx.param(path, "bias", m.bias) if m.bias is not None else None
    return lower.conv_transpose2d(ctx.b, v, ctx.param(path, "weight", m.weight), bias, list(m.stride),
                                  list(m.padding) * 2, list(m.dilation), out_pad, m.groups)


@_functions(F.pad)
def _pad(ctx, x, pad, mode="constant", value=None):
    v = ctx.value(x)
    rank = len(v.shape)
    begin, end = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):  # PyTorch lists (begin, end) pairs from the last axis backwards
        begin[rank - 1 - i], end[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if min(begin + end) < 0:
        raise ExportError("negative padding")
    modes = {"constant": "constant", "replicate": "edge", "reflect": "reflect"}
    if mode not in modes:
        raise ExportError(f"pad mode '{mode}'")
    return lower.pad(ctx.b, v, begin + end, modes[mode], float(value or 0.0))


def _norm_over(ctx, x, axes, eps, weight=None, bias=None, groups=None):
    """Group norm (`groups` channel groups) or instance norm (groups = channels): normalise over `axes` of
    [N, groups, C / groups, ...], then a per-channel affine."""
    v = ctx.value(x)
    n, c = v.shape[:2]
    grouped = ctx.op("reshape", v, shape=[n, groups, -1])
    y = lower.layer_norm(ctx.b, grouped, axes, eps)[0]
    y = ctx.op("reshape", y, shape=list(v.shape))
    channel = [c] + [1] * (len(v.shape) - 2)
    if weight is not None:
        y = ctx.op("mul", y, ctx.op("reshape", weight, shape=channel))
    if bias is not None:
        y = ctx.op("add", y, ctx.op("reshape", bias, shape=channel))
    return y


@_modules(nn.GroupNorm)
def _group_norm_module(ctx, m, path, x):
    affine = m.affine
    return _norm_over(ctx, x, [2], m.eps, ctx.param(path, "weight", m.weight) if affine else None,
                      ctx.param(path, "bias", m.bias) if affine else None, m.num_groups)


@_functions(F.group_norm)
def _group_norm_fn(ctx, x, num_groups, weight=None, bias=None, eps=1e-5):
    return _norm_over(ctx, x, [2], eps, weight, bias, num_groups)


@_modules(nn.InstanceNorm2d, nn.InstanceNorm1d)
def _instance_norm_module(ctx, m, path, x):
    if m.track_running_stats:
        raise ExportError("instance norm with running statistics")
    affine = m.affine
    return _norm_over(ctx, x, [2], m.eps, ctx.param(path, "weight", m.weight) if affine else None,
                      ctx.param(path, "bias", m.bias) if affine else None, ctx.value(x).shape[1])


@_modules(nn.PixelShuffle)
def _pixel_shuffle(ctx, m, path, x):
    v = ctx.value(x)
    n, c, h, w = v.shape
    r = m.upscale_factor
    y = ctx.op("reshape", v, shape=[n, c // (r * r), r, r, h, w])
    return ctx.op("reshape", ctx.op("transpose", y, perm=[0, 1, 4, 2, 5, 3]), shape=ctx.out_shape)


@_modules(nn.AdaptiveMaxPool2d)
def _adaptive_max_pool(ctx, m, path, x):
    v = ctx.value(x)
    oh, ow = ctx.out_shape[2:]
    if m.return_indices:
        raise ExportError("adaptive max pooling with indices")
    if (oh, ow) == (1, 1):
        return ctx.op("max", v, axes=[2, 3], keepdims=True)
    h, w = v.shape[2:]
    if h % oh or w % ow:
        raise ExportError(f"adaptive max pooling from {h}x{w} to {oh}x{ow} (not a whole window)")
    return ctx.op("max_pool2d", v, kernel=[h // oh, w // ow], strides=[h // oh, w // ow])


def _elu(ctx, x, alpha=1.0, inplace=False):  # relu(x) + alpha * (exp(min(x, 0)) - 1)
    return ctx.op("add", ctx.op("relu", x), ctx.op("mul", ctx.op("sub", ctx.op("exp", ctx.op("minimum", x, 0.0)),
                                                                  1.0), float(alpha)))


def _softplus(ctx, x, beta=1.0, threshold=20.0):  # log(1 + exp(beta x)) / beta, linear above the threshold
    bx = ctx.op("mul", x, float(beta))
    soft = ctx.op("div", ctx.op("log", ctx.op("add", ctx.op("exp", ctx.op("minimum", bx, float(threshold))), 1.0)),
                  float(beta))
    return ctx.op("where", ctx.op("greater", bx, float(threshold)), x, soft)


_functions(F.elu)(_elu)
_modules(nn.ELU)(lambda ctx, m, path, x: _elu(ctx, x, m.alpha))
_functions(F.softplus)(_softplus)
_modules(nn.Softplus)(lambda ctx, m, path, x: _softplus(ctx, x, m.beta, m.threshold))
_functions(F.mish)(lambda ctx, x, inplace=False: ctx.op("mul", x, ctx.op("tanh", _softplus(ctx, x))))
_modules(nn.Mish)(lambda ctx, m, path, x: ctx.op("mul", x, ctx.op("tanh", _softplus(ctx, x))))
_modules(nn.PReLU)(lambda ctx, m, path, x: ctx.op(
    "add", ctx.op("relu", x), ctx.op("mul", ctx.op("minimum", x, 0.0), ctx.op(
        "reshape", ctx.param(path, "weight", m.weight), shape=[-1] + [1] * (len(ctx.value(x).shape) - 2)))))


@_functions(torch.zeros_like, torch.ones_like, torch.full_like)
@_methods("new_zeros", "new_ones", "new_full")
def _filled_like(ctx, *args, **kwargs):
    return ctx.value(ctx.result)  # depends only on the (static) shape


@_functions(torch.tril, torch.triu)
@_methods("tril", "triu")
def _tril_triu(ctx, x, diagonal=0):
    return lower.trilu(ctx.b, ctx.value(x), diagonal, upper=ctx.node.target in (torch.triu, "triu"))


@_functions(torch.cumsum)
@_methods("cumsum")
def _cumsum(ctx, x, dim, dtype=None):
    return lower.cumsum(ctx.b, ctx.value(x), dim)


@_methods("repeat")
def _repeat(ctx, x, *sizes):
    sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)) else sizes
    v = ctx.value(x)
    shape = [1] * (len(sizes) - len(v.shape)) + list(v.shape)
    y = ctx.op("reshape", v, shape=shape) if len(shape) != len(v.shape) else v
    # Each axis: insert a repeat axis before it, expand, merge.
    for axis, r in enumerate(sizes):
        if r != 1:
            cur = list(y.shape)
            y = ctx.op("expand", ctx.op("reshape", y, shape=cur[:axis] + [1] + cur[axis:]),
                       shape=cur[:axis] + [r] + cur[axis:])
            y = ctx.op("reshape", y, shape=cur[:axis] + [r * cur[axis]] + cur[axis + 1:])
    return y


@_functions(torch.var, torch.std)
@_methods("var", "std")
def _var_std(ctx, x, dim=None, unbiased=True, keepdim=False, *, correction=None):
    v = ctx.value(x)
    axes = _dims(dim) or list(range(len(v.shape)))
    count = math.prod(v.shape[a] for a in axes)
    ddof = (1 if unbiased else 0) if correction is None else correction
    centered = ctx.op("sub", v, ctx.op("mean", v, axes=axes, keepdims=True))
    var = ctx.op("div", ctx.op("sum", ctx.op("mul", centered, centered), axes=axes, keepdims=keepdim),
                 float(count - ddof))
    return ctx.op("sqrt", var) if ctx.node.target in (torch.std, "std") else var


@_functions(torch.addmm)
def _addmm(ctx, bias, a, b, beta=1, alpha=1):
    y = ctx.op("matmul", a, b)
    if alpha != 1:
        y = ctx.op("mul", y, float(alpha))
    return ctx.op("add", y, bias if beta == 1 else ctx.op("mul", bias, float(beta)))


_functions(torch.square)(lambda ctx, x: ctx.op("mul", x, x))
_methods("square")(lambda ctx, x: ctx.op("mul", x, x))


def _stochastic_depth(ctx, x, p, mode, training=True):
    if training:
        raise ExportError("stochastic depth in training mode")
    return x  # identity at inference


try:  # torchvision wraps it for fx, so it reaches the lowering as one call
    import torchvision.ops
    _functions(torchvision.ops.stochastic_depth)(_stochastic_depth)
except ImportError:  # torchvision is optional
    pass


@_modules(nn.Embedding)
def _embedding_module(ctx, m, path, indices):
    if m.max_norm is not None:
        raise ExportError("embedding with max_norm")
    return ctx.op("gather", ctx.param(path, "weight", m.weight), _index(ctx, indices), axis=0)


@_functions(F.embedding)
def _embedding_fn(ctx, indices, weight, *args, **kwargs):
    return ctx.op("gather", weight, _index(ctx, indices), axis=0)


# -- data movement --------------------------------------------------------------------------------------------
def _reshape_to_result(ctx, x, *args, **kwargs):
    v = ctx.value(x)
    return v if list(v.shape) == ctx.out_shape else ctx.op("reshape", v, shape=ctx.out_shape)


_functions(torch.reshape, torch.flatten, torch.squeeze, torch.unsqueeze)(_reshape_to_result)
_methods("view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "reshape_as")(_reshape_to_result)
_modules(nn.Flatten, nn.Unflatten)(lambda ctx, m, path, x: _reshape_to_result(ctx, x))


def _transpose(ctx, x, dim0=None, dim1=None):
    v = ctx.value(x)
    rank = len(v.shape)
    perm = list(range(rank))
    if dim0 is None:  # .t() / .T
        perm = perm[::-1]
    else:
        a, b = normalize_axis(dim0, rank), normalize_axis(dim1, rank)
        perm[a], perm[b] = perm[b], perm[a]
    return ctx.op("transpose", v, perm=perm)


def _permute(ctx, x, *dims, **kwargs):
    dims = kwargs.get("dims", dims)
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    v = ctx.value(x)
    return ctx.op("transpose", v, perm=[normalize_axis(d, len(v.shape)) for d in dims])


_functions(torch.transpose, torch.t)(_transpose)
_methods("transpose", "t")(_transpose)
_functions(torch.permute)(_permute)
_methods("permute")(_permute)


@_functions(torch.cat, torch.concat)
def _cat(ctx, tensors, dim=0):
    return ctx.op("concat", *tensors, axis=dim)


@_functions(torch.stack)
def _stack(ctx, tensors, dim=0):
    shape = ctx.out_shape
    axis = normalize_axis(dim, len(shape))
    part = shape[:axis] + [1] + shape[axis + 1:]
    return ctx.op("concat", *[ctx.op("reshape", t, shape=part) for t in tensors], axis=axis)


def _split(ctx, x, *args, dim=0, **kwargs):
    if ctx.node.target in (torch.chunk, "chunk", torch.split, "split") and len(args) > 1:
        dim = args[1]
    v = ctx.value(x)
    axis = normalize_axis(dim, len(v.shape))
    parts, start = [], 0
    for size in (r.shape[axis] for r in ctx.result):
        parts.append(ctx.op("slice", v, starts=[start], ends=[start + size], axes=[axis], steps=[1]))
        start += size
    return tuple(parts)


_functions(torch.chunk, torch.split)(_split)
_methods("chunk", "split")(_split)


@_functions(torch.unbind)
@_methods("unbind")
def _unbind(ctx, x, dim=0):
    v = ctx.value(x)
    axis = normalize_axis(dim, len(v.shape))
    return tuple(ctx.op("reshape", ctx.op("slice", v, starts=[i], ends=[i + 1], axes=[axis], steps=[1]),
                        shape=list(r.shape)) for i, r in enumerate(ctx.result))


@_methods("expand", "expand_as")
def _expand(ctx, x, *args, **kwargs):
    return ctx.op("expand", x, shape=ctx.out_shape)


@_functions(operator.getitem)
def _getitem(ctx, x, index):
    if not isinstance(x, (Value, _Param, torch.Tensor)):
        return x[index]  # a tuple of lowered results (chunk, multi-head attention, max with dim, ...)
    v = ctx.value(x)
    index = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (Value, _Param, torch.Tensor, list)) for i in index):
        return _advanced_index(ctx, v, index)
    n_explicit = sum(1 for i in index if i is not None and i is not Ellipsis)
    starts, ends, axes, steps = [], [], [], []
    axis = 0
    for i in index:
        if i is Ellipsis:
            axis += len(v.shape) - n_explicit
        elif i is None:
            continue
        elif isinstance(i, int):
            dim = v.shape[axis]
            j = i + dim if i < 0 else i
            starts.append(j), ends.append(j + 1), axes.append(axis), steps.append(1)
            axis += 1
        elif isinstance(i, slice):
            if i.step is not None and i.step < 1:
                raise ExportError("slicing with a negative step")
            if i != slice(None):
                r = range(*i.indices(v.shape[axis]))
                starts.append(r.start), ends.append(max(r.stop, r.start)), axes.append(axis), steps.append(r.step)
            axis += 1
        else:
            raise ExportError(f"index {i!r}")
    y = ctx.op("slice", v, starts=starts, ends=ends, axes=axes, steps=steps) if axes else v
    return y if list(y.shape) == ctx.out_shape else ctx.op("reshape", y, shape=ctx.out_shape)


def _advanced_index(ctx, v, index):
    """x[..., idx, ...] with one integer index tensor (a constant or an i32 value): gather on that axis."""
    tensors = [k for k, i in enumerate(index) if isinstance(i, (Value, _Param, torch.Tensor, list))]
    if len(tensors) != 1 or any(not (i == slice(None) or i is Ellipsis) for k, i in enumerate(index)
                                if k != tensors[0]):
        raise ExportError("advanced indexing other than one index tensor")
    k = tensors[0]
    axis = k if Ellipsis not in index[:k] else len(v.shape) - (len(index) - k)
    idx = index[k]
    if isinstance(idx, list):
        idx = torch.tensor(idx)
    if isinstance(idx, (_Param, torch.Tensor)):
        tensor = idx.tensor if isinstance(idx, _Param) else idx
        if tensor.dtype == torch.bool:
            raise ExportError("boolean mask indexing (data-dependent shape)")
    iv = _index(ctx, idx)
    return ctx.op("gather", v, iv, axis=axis)


# -- attention and transformer layers -------------------------------------------------------------------------
def multi_head_attention(ctx, m: nn.MultiheadAttention, path: str, query, key, value, attn_mask=None,
                         key_padding_mask=None, need_weights=True, average_attn_weights=True):
    """Scaled dot-product attention with `m`'s projections, lowered as PyTorch computes it (batch-first inside)."""
    if not m._qkv_same_embed_dim or m.bias_k is not None or m.add_zero_attn:
        raise ExportError("multi-head attention with separate key/value dims, bias_k/bias_v or add_zero_attn")
    q, k, v = (ctx.value(t) for t in (query, key, value))
    if not m.batch_first:
        q, k, v = (ctx.op("transpose", t, perm=[1, 0, 2]) for t in (q, k, v))
    batch, tgt, embed = q.shape
    src = k.shape[1]
    heads, head_dim = m.num_heads, embed // m.num_heads
    w = ctx.param(path, "in_proj_weight", m.in_proj_weight)
    b = ctx.param(path, "in_proj_bias", m.in_proj_bias) if m.in_proj_bias is not None else None

    def project(t, i, length, scale=1.0):
        wi = ctx.op("slice", w, starts=[i * embed], ends=[(i + 1) * embed], axes=[0], steps=[1])
        bi = ctx.op("slice", b, starts=[i * embed], ends=[(i + 1) * embed], axes=[0], steps=[1]) if b else None
        if scale != 1.0:  # folded into the (constant) projection instead of scaling q at run time
            wi = ctx.op("mul", wi, scale)
            bi = ctx.op("mul", bi, scale) if bi is not None else None
        t = linear(ctx, t, wi, bi)
        return ctx.op("transpose", ctx.op("reshape", t, shape=[batch, length, heads, head_dim]), perm=[0, 2, 1, 3])

    qh = project(q, 0, tgt, 1.0 / math.sqrt(head_dim))
    kh, vh = project(k, 1, src), project(v, 2, src)
    scores = ctx.op("matmul", qh, ctx.op("transpose", kh, perm=[0, 1, 3, 2]))  # [B, H, T, S]
    for mask, shape in ((attn_mask, None), (key_padding_mask, [batch, 1, 1, src])):
        if mask is None:
            continue
        mv = ctx.value(mask)
        if shape is None and len(mv.shape) == 3:  # [B * H, T, S]
            shape = [batch, heads, tgt, src]
        if shape is not None:
            mv = ctx.op("reshape", mv, shape=shape)
        if ctx.torch_dtype(mask) == torch.bool:  # True = not allowed to attend
            scores = ctx.op("where", mv, float("-inf"), scores)
        else:  # a float mask is added
            scores = ctx.op("add", scores, mv)
    probs = ctx.op("softmax", scores, axis=-1)
    out = ctx.op("matmul", probs, vh)  # [B, H, T, hd]
    out = ctx.op("reshape", ctx.op("transpose", out, perm=[0, 2, 1, 3]), shape=[batch, tgt, embed])
    out = linear(ctx, out, ctx.param(path, "out_proj.weight", m.out_proj.weight),
                 ctx.param(path, "out_proj.bias", m.out_proj.bias) if m.out_proj.bias is not None else None)
    if not m.batch_first:
        out = ctx.op("transpose", out, perm=[1, 0, 2])
    weights = None
    if need_weights:
        weights = ctx.op("mean", probs, axes=[1]) if average_attn_weights else probs
    return out, weights


MODULE_HANDLERS[nn.MultiheadAttention] = multi_head_attention


def _activation(ctx, act, x):
    if act in (F.relu, "relu"):
        return ctx.op("relu", x)
    if act in (F.gelu, "gelu"):
        return ctx.op("gelu", x, approximate="none")
    if isinstance(act, nn.Module):
        for cls in type(act).__mro__:
            if cls in MODULE_HANDLERS:
                return MODULE_HANDLERS[cls](ctx, act, "", x)
    raise ExportError(f"transformer activation {act!r}")


def transformer_encoder_layer(ctx, m: nn.TransformerEncoderLayer, path: str, src, src_mask=None,
                              src_key_padding_mask=None):
    """The layer's math (self-attention and feed-forward blocks with residuals), pre- or post-norm."""
    def norm(x, which):
        ln = getattr(m, which)
        return layer_norm(ctx, x, len(ln.normalized_shape), ctx.param(path, f"{which}.weight", ln.weight),
                          ctx.param(path, f"{which}.bias", ln.bias), ln.eps)

    def self_attention(x):
        return multi_head_attention(ctx, m.self_attn, f"{path}.self_attn", x, x, x, attn_mask=src_mask,
                                    key_padding_mask=src_key_padding_mask, need_weights=False)[0]

    def feed_forward(x):
        h = _linear_module(ctx, m.linear1, f"{path}.linear1", x)
        return _linear_module(ctx, m.linear2, f"{path}.linear2", _activation(ctx, m.activation, h))

    x = ctx.value(src)
    if m.norm_first:
        x = ctx.op("add", x, self_attention(norm(x, "norm1")))
        return ctx.op("add", x, feed_forward(norm(x, "norm2")))
    x = norm(ctx.op("add", x, self_attention(x)), "norm1")
    return norm(ctx.op("add", x, feed_forward(x)), "norm2")


MODULE_HANDLERS[nn.TransformerEncoderLayer] = transformer_encoder_layer


@_modules(nn.TransformerEncoder)
def _transformer_encoder(ctx, m, path, src, mask=None, src_key_padding_mask=None):
    x = src
    for i, layer in enumerate(m.layers):
        x = transformer_encoder_layer(ctx, layer, f"{path}.layers.{i}", x, mask, src_key_padding_mask)
    if m.norm is not None:
        x = layer_norm(ctx, x, len(m.norm.normalized_shape), ctx.param(path, "norm.weight", m.norm.weight),
                       ctx.param(path, "norm.bias", m.norm.bias), m.norm.eps)
    return x


# ----------------------------------------------------------------------------------------------------------------
def from_torch(module: nn.Module, example_inputs, stem=None, *, input_names: Optional[Sequence[str]] = None,
               output_names: Optional[Sequence[str]] = None, check: bool = False, narrow: bool = False) -> Dict:
    """Exports `module` (put in eval mode) traced at the shapes of `example_inputs`.

    Writes `<stem>.json` and `<stem>.safetensors` when `stem` is given; returns the graph JSON dict.
    Input names default to the forward's argument names; outputs are called `output` (or `output.<i>`).
    With `check`, the exported graph is also run by the NumPy reference interpreter on the example inputs and
    must match PyTorch within 1e-4 * max(1, max |output|).
    A model in `.half()` or `.bfloat16()` is exported in f16 or bf16 (weights stored 16-bit, each op's result
    rounded), int64 tensors as i64 and bool as bool; `narrow=True` applies the seed format's rules instead
    (16-bit floats f32, int64 i32, bool an f32 0/1 mask) for readers of f32/i32-only files.
    Raises ExportError naming the PyTorch op and module path that cannot be lowered (or the output that differs).
    """
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    module = module.eval()
    float_as = None
    tensors_in = list(module.parameters()) + list(module.buffers()) + [t for t in example_inputs
                                                                      if isinstance(t, torch.Tensor)]
    if any(t.dtype == torch.float16 for t in tensors_in):
        # PyTorch's CPU kernels lack float16 matmul and convolution: trace a float32 copy (the float16 weights
        # widen exactly) and record its float values as f16, rounding each traced constant back (narrowing:
        # as f32).
        if any(t.is_floating_point() and t.dtype not in (torch.float16, torch.float32) for t in tensors_in):
            raise ExportError("a model mixing float16 with other float dtypes")
        module = copy.deepcopy(module).float()
        example_inputs = tuple(t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float16 else t
                               for t in example_inputs)
        float_as = None if narrow else "f16"
    tracer = _Tracer(example_inputs)
    try:
        graph = tracer.trace(module)
    except (fx.proxy.TraceError, TypeError, NotImplementedError) as e:  # control flow on values, unsupported calls
        raise ExportError(f"torch.fx cannot trace {type(module).__name__}: {e}") from None
    for node in graph.nodes:
        node.meta.pop("rml_concrete", None)
    gm = fx.GraphModule(tracer.root, graph)
    placeholders = [n.target for n in graph.nodes if n.op == "placeholder"]
    builder = GraphBuilder(type(module).__name__, PRODUCER, narrow)
    builder.float_as = float_as
    lowering = _Lowering(gm, builder, input_names or placeholders)
    with torch.no_grad():
        try:
            expected = lowering.run(*example_inputs)
        except ExportError as e:
            raise ExportError(getattr(e, "message", str(e))) from None
    out_node = next(n for n in graph.nodes if n.op == "output")
    outputs = lowering.sym[out_node]
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    for i, out in enumerate(outputs):
        name = output_names[i] if output_names else ("output" if len(outputs) == 1 else f"output.{i}")
        v = lowering.value(out)
        builder.output(v, name)
    result, tensors = builder.finish()
    if check:
        expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
        _check_with_reference(result, dict(tensors), example_inputs, expected, narrow, float_as)
    if stem:
        builder.save(stem, result, tensors)
    return result


# How far a graph's result may be from PyTorch's (relative to max(1, max |output|)): f32 graphs 1e-4; 16-bit
# graphs round every op's result to their storage type, PyTorch's CPU kernels some ops' intermediates in f32, so
# a few ulps of the format per op on the path: 2^-11 (f16) and 2^-8 (bf16) times a few ops.
CHECK_TOLERANCE = {"f16": 1e-2, "bf16": 6e-2}


def _check_with_reference(graph: Dict, tensors: Dict, inputs, expected, narrow: bool = True,
                          float_as: Optional[str] = None) -> None:
    from . import reference
    feeds = []
    for t in inputs:
        data = _to_numpy(t, narrow, float_as)
        dtype = _rml_dtype(t, narrow, float_as)
        feeds.append(data if dtype in ("f16", "bf16", "i64", "bool") else
                     data.astype(np.int32 if dtype == "i32" else np.float32))
    got = reference.run_graph(graph, tensors, feeds)
    for i, (g, e) in enumerate(zip(got, expected)):
        e = torch.as_tensor(e)
        tol = CHECK_TOLERANCE.get(_rml_dtype(e, narrow, float_as), 1e-4)
        e = _to_numpy(e.float() if e.is_floating_point() else e)
        err = float(np.max(np.abs(g.astype(np.float64) - e))) if e.size else 0.0
        bound = tol * max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
        if not err <= bound:
            raise ExportError(f"output {i}: the exported graph differs from PyTorch by {err:.3g} (bound {bound:.3g})")
