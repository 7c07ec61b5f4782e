"""rml exporters: PyTorch (torch.fx) and ONNX models to the rml-graph format (`<stem>.json` + `.safetensors`)."""

from .ops import ExportError

__all__ = ["ExportError", "from_torch", "from_onnx"]
__version__ = "0.1"


def from_torch(module, example_inputs, stem=None, **kwargs):
    """See `rml_export.torch_export.from_torch` (imported lazily: PyTorch is slow to import)."""
    from .torch_export import from_torch as impl
    return impl(module, example_inputs, stem, **kwargs)


def from_onnx(model_or_path, stem=None, **kwargs):
    """See `rml_export.onnx_export.from_onnx`."""
    from .onnx_export import from_onnx as impl
    return impl(model_or_path, stem, **kwargs)
