"""Run by pip_install.cmake with the venv's interpreter: rml and rml_export import from the venv, and the MLP
fixture run through rml.InferenceSession matches PyTorch's output within float32 rounding."""

import os
import sys

import numpy as np

import rml
import rml_export
from rml_export.safetensors import read_safetensors

venv, data = sys.argv[1], sys.argv[2]
for module in (rml, rml_export, rml._rml):
    assert os.path.realpath(module.__file__).startswith(os.path.realpath(venv)), module.__file__

reference, _ = read_safetensors(os.path.join(data, "torch_mlp.expected.safetensors"))
session = rml.InferenceSession(os.path.join(data, "torch_mlp"))
(y,) = session.run(None, {"x": reference["x"]})
np.testing.assert_allclose(y, reference["y"], rtol=1e-5, atol=1e-6)
print(f"rml {rml.__version__} from {os.path.dirname(rml.__file__)}: the MLP matches PyTorch")
