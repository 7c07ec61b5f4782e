"""from_torch: the seed's MLP numbering, lowering of many PyTorch constructs (checked by running the NumPy
reference interpreter against PyTorch), error messages, and the committed zoo fixtures being up to date."""

import json
import os

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import models
from rml_export import ExportError, from_torch, reference
from rml_export.safetensors import read_safetensors

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run_both(module, inputs, tmp_path, tol=1e-5, narrow=False):
    module.eval()
    stem = str(tmp_path / "m")
    graph = from_torch(module, inputs, stem, narrow=narrow)
    with torch.no_grad():
        want = module(*inputs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    g, w = reference.load(stem)
    if narrow:  # booleans are f32 masks, int64 is i32
        rml_inputs = [t.numpy().astype(np.float32 if t.dtype in (torch.bool, torch.float32) else np.int32)
                      for t in inputs]
    else:  # int64 stays i64, bool bool
        rml_inputs = [t.numpy() for t in inputs]
    got = reference.run_graph(g, w, rml_inputs)
    for a, b in zip(got, want):
        b = b.numpy()
        b = b.astype(np.int32) if b.dtype.kind in "iu" else b.astype(np.float32)
        assert a.shape == b.shape
        assert np.max(np.abs(a.astype(np.float64) - b)) <= tol * max(1.0, np.max(np.abs(b))), np.max(np.abs(a - b))
    return graph


def structure(graph):
    """Everything but names and origins: what must agree between two exports of the same model."""
    return {"values": [(v["dtype"], v["shape"]) for v in graph["values"]], "inputs": graph["inputs"],
            "outputs": graph["outputs"], "constants": [(c["value"], c.get("tensor")) for c in graph["constants"]],
            "nodes": [(n["op"], n["inputs"], n["outputs"], n.get("attrs", {})) for n in graph["nodes"]]}


def test_mlp_matches_the_seed_numbering(tmp_path):
    model, (x,) = models.build("mlp", 2)
    graph = run_both(model, (x,), tmp_path)
    assert len(graph["values"]) == 15 and len(graph["constants"]) == 6 and len(graph["nodes"]) == 8
    assert graph["inputs"] == [3] and graph["values"][3] == {"name": "x", "dtype": "f32", "shape": [2, 12]}
    assert graph["outputs"] == [14] and graph["values"][14]["shape"] == [2, 4]
    assert [v["name"] for v in graph["values"][:3]] == ["layers.0.bias", "layers.2.bias", "layers.4.bias"]
    assert {"value": 4, "tensor": "const.4"} in graph["constants"]
    assert [n["op"] for n in graph["nodes"]] == ["matmul", "add", "relu"] * 2 + ["matmul", "add"]
    assert graph["nodes"][0]["inputs"] == [3, 4] and graph["nodes"][1]["inputs"] == [5, 0]
    assert graph["nodes"][0]["origin"]["module"] == "layers.0"
    assert graph["nodes"][0]["origin"]["file"] == "models.py"


def test_check_runs_the_reference(monkeypatch):
    model, inputs = models.build("gpt", 1)
    assert from_torch(model, inputs, check=True)["nodes"]

    from rml_export import torch_export  # a lowering bug, simulated: ReLU lowered as abs
    monkeypatch.setitem(torch_export.MODULE_HANDLERS, nn.ReLU, lambda ctx, m, path, x: ctx.op("abs", x))
    model, inputs = models.build("mlp", 2)
    with pytest.raises(ExportError, match="output 0: the exported graph differs from PyTorch"):
        from_torch(model, inputs, check=True)


def test_mlp_is_structurally_identical_to_the_io_fixture(tmp_path):
    path = os.path.join(ROOT, "tests", "data", "torch_mlp.json")
    if not os.path.exists(path):
        pytest.skip("tests/data/torch_mlp.json not present")
    with open(path) as f:
        fixture = json.load(f)
    model, inputs = models.build("mlp", 2)
    assert structure(from_torch(model, inputs)) == structure(fixture)


class Many(nn.Module):
    """A grab bag of constructs the lowering must get right."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.ln = nn.LayerNorm(8)
        self.bn = nn.BatchNorm1d(4)
        self.lin = nn.Linear(8, 8)

    def forward(self, idx, x):
        e = self.ln(self.emb(idx))                                  # [2, 4, 8]
        a, b = e.chunk(2, dim=-1)
        y = torch.cat([F.leaky_relu(a, 0.2), F.hardswish(b)], dim=2)
        y = y + self.bn(x)[..., None] * 0.5 - 1
        y = y.masked_fill(y > 1.0, -2.0)
        z = torch.stack([y[:, 1:3], y[:, ::2]], dim=1)              # [2, 2, 2, 8]
        m, i = z.max(dim=-1)
        w = F.log_softmax(self.lin(y).permute(0, 2, 1), dim=-1).transpose(1, 2).reshape(2, -1)
        return m * 2, i, torch.argmax(w, dim=1), w[:, torch.tensor([3, 1])].sum(-1), torch.clamp(y, -0.5, 0.5).mean()


def test_many_constructs(tmp_path):
    torch.manual_seed(0)
    module = Many()
    module.bn.running_mean.uniform_(-1, 1)
    inputs = (torch.randint(0, 10, (2, 4)), torch.randn(2, 4))
    graph = run_both(module, inputs, tmp_path)
    assert graph["values"][graph["inputs"][0]]["dtype"] == "i64"  # int64 kept
    assert graph["values"][graph["outputs"][1]]["dtype"] == "i64"
    graph = run_both(module, inputs, tmp_path, narrow=True)
    assert graph["values"][graph["inputs"][0]]["dtype"] == "i32"  # the seed format's rules
    assert graph["values"][graph["outputs"][1]]["dtype"] == "i32"


class Attention(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)

    def forward(self, q, kv, mask):
        out, weights = self.mha(q, kv, kv, attn_mask=mask)
        return out, weights


@pytest.mark.parametrize("batch_first", [True, False])
def test_multi_head_attention(tmp_path, batch_first):
    torch.manual_seed(1)
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    if not batch_first:
        q, kv = q.transpose(0, 1), kv.transpose(0, 1)
    mask = torch.randn(3, 5)
    run_both(Attention(batch_first), (q, kv, mask), tmp_path)
    bool_mask = torch.rand(3, 5) > 0.7
    bool_mask[:, 0] = False  # every query keeps one key
    run_both(Attention(batch_first), (q, kv, bool_mask), tmp_path)


def test_attention_key_padding_masks(tmp_path):
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x, pad, causal):
            return self.mha(x, x, x, key_padding_mask=pad)[0], self.mha(x, x, x, attn_mask=causal,
                                                                          key_padding_mask=pad)[0]

    torch.manual_seed(2)
    pad = torch.tensor([[False, False, True, True], [False, True, False, False]])
    causal = torch.triu(torch.full((4, 4), float("-inf")), 1)
    run_both(Masked(), (torch.randn(2, 4, 8), pad, causal), tmp_path)


def test_pooling_variants(tmp_path):
    class Pools(nn.Module):
        def forward(self, x):
            return (F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True), F.avg_pool2d(x, 2),
                    F.adaptive_avg_pool2d(x, (2, 3)), torch.flatten(F.adaptive_avg_pool2d(x, 1), 1),
                    F.adaptive_avg_pool2d(x, (3, 5)), F.adaptive_avg_pool2d(x[:, :, :1, :1], (2, 2)))

    run_both(Pools(), (torch.randn(1, 2, 8, 6),), tmp_path)


def test_conv_with_batch_norm_is_folded(tmp_path):
    model, inputs = models.build("cnn", 1)
    graph = run_both(model, inputs, tmp_path)
    ops = [n["op"] for n in graph["nodes"]]
    assert ops.count("conv2d") == 2 and ops.count("mul") == 1  # bn1, bn2 folded; bn3 follows a pool


def test_unsupported_op_names_the_op_and_the_module():
    class Warp(nn.Module):
        def forward(self, x, grid):
            return F.grid_sample(x, grid, align_corners=False)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.warp = Warp()

        def forward(self, x, grid):
            return self.warp(x, grid)

    with pytest.raises(ExportError) as error:
        from_torch(Net(), (torch.randn(1, 1, 4, 4), torch.rand(1, 2, 2, 2)))
    assert str(error.value) == ("cannot lower torch.nn.functional.grid_sample at warp (fx node 'grid_sample'): "
                                "no lowering onto the rml op set")


def test_value_dependent_control_flow_is_refused():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(ExportError, match="torch.fx cannot trace Branchy"):
        from_torch(Branchy(), (torch.randn(3),))


@pytest.mark.parametrize("name", [n for n, (_, _, committed) in models.ZOO.items() if committed])
def test_committed_zoo_fixtures_are_current(tmp_path, name):
    """Re-exports each committed fixture: graph JSON equal, tensors bit-identical, reference within tolerance."""
    import gen_zoo
    for batch in models.BATCHES:
        gen_zoo.generate(name, batch, str(tmp_path), keep_onnx=False, check=True)
        for stem in (f"{name}_b{batch}", f"{name}_b{batch}_onnx"):
            committed = os.path.join(ROOT, "tests", "data", "zoo", stem)
            stale = f"{stem} is stale: run tests/zoo/gen_zoo.py --committed --out tests/data/zoo"
            with open(committed + ".json") as f, open(str(tmp_path / stem) + ".json") as g:
                old_graph, new_graph = json.load(f), json.load(g)
            # Weights folded by PyTorch or NumPy may differ in the last bit between CPUs: compare them closely,
            # everything else exactly.
            old_inline = [np.array(c.pop("data", [])) for c in old_graph["constants"]]
            new_inline = [np.array(c.pop("data", [])) for c in new_graph["constants"]]
            assert old_graph == new_graph, stale
            assert all(np.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(old_inline, new_inline)), stale
            old, _ = read_safetensors(committed + ".safetensors")
            new, _ = read_safetensors(str(tmp_path / stem) + ".safetensors")
            assert old.keys() == new.keys(), stale
            assert all(np.allclose(old[k], new[k], rtol=1e-5, atol=1e-7) for k in old), stale


def test_average_pooling_conventions(tmp_path):
    class Avg(nn.Module):
        def forward(self, x):
            return (F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
                    F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True),
                    F.avg_pool2d(x, 2, 2, ceil_mode=True, count_include_pad=False))

    run_both(Avg(), (torch.randn(1, 2, 7, 8),), tmp_path)


@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None), ("bilinear", False),
                                        ("bilinear", True), ("bicubic", False), ("bicubic", True)])
def test_interpolate(tmp_path, mode, align):
    class Up(nn.Module):
        def forward(self, x):
            return (F.interpolate(x, scale_factor=2, mode=mode, align_corners=align),
                    F.interpolate(x, size=(3, 7), mode=mode, align_corners=align))

    run_both(Up(), (torch.randn(1, 2, 5, 4),), tmp_path, tol=1e-5)


def test_einsum_and_local_response_norm(tmp_path):
    class Mix(nn.Module):
        def __init__(self):
            super().__init__()
            self.lrn = nn.LocalResponseNorm(3, alpha=0.1, beta=0.75, k=2.0)

        def forward(self, a, b, x):
            return (torch.einsum("bij,bjk->bik", a, b), torch.einsum("bij->jb", a),
                    torch.einsum("bij,bkj->bki", a, b.transpose(1, 2) * 1.0), torch.einsum("bij,bjk->", a, b),
                    self.lrn(x), F.local_response_norm(x, 4))

    run_both(Mix(), (torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(1, 6, 3, 3)), tmp_path, tol=1e-5)


def test_more_modules_and_functions(tmp_path):
    class More(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
            self.gn = nn.GroupNorm(2, 6)
            self.inorm = nn.InstanceNorm2d(6, affine=True)
            self.shuffle = nn.PixelShuffle(2)
            self.amax = nn.AdaptiveMaxPool2d((2, 2))
            self.prelu = nn.PReLU(6)
            self.mish, self.elu, self.soft = nn.Mish(), nn.ELU(0.5), nn.Softplus(2.0, 1.0)

        def forward(self, x):
            y = self.gn(self.up(x))                                             # [1, 6, 8, 8]
            z = self.inorm(self.prelu(y)) + torch.zeros_like(y) + 1
            p = F.pad(z, (1, 2, 0, 1), mode="reflect") + F.pad(z, (1, 2, 0, 1), mode="replicate")
            q = F.pad(z, (0, 1, 2, 0), value=0.5)
            s = self.shuffle(torch.cat([z, z[:, :2]], 1))                       # [1, 2, 16, 16]
            t = torch.tril(z[0, 0], -1) + z[0, 1].triu() + z[0, 2].cumsum(1) + z[0, 3].repeat(1, 1)
            v = z.var(dim=(2, 3)) + z.std(1, unbiased=False).mean() + torch.square(z).mean()
            w = torch.addmm(z[0, 0, 0], z[0, 0], z[0, 1], beta=0.5, alpha=2.0)
            return (p, q, s, t, v, w, self.amax(z), self.mish(z) + self.elu(z) + self.soft(z))

    torch.manual_seed(4)
    run_both(More(), (torch.randn(1, 4, 4, 4),), tmp_path, tol=1e-5)


@pytest.mark.parametrize("name", ["squeezenet1_0", "shufflenet_v2_x0_5", "mnasnet0_5", "efficientnet_b0",
                                  "mobilenet_v3_small", "regnet_x_400mf", "googlenet"])
def test_torchvision_models(name):
    """More of torchvision (channel shuffle, squeeze-excitation, hardswish, stochastic depth, inception
    branches...) exports and matches PyTorch in the NumPy reference (random weights, 64x64 inputs)."""
    import warnings

    import torchvision
    torch.manual_seed(0)
    extra = {"aux_logits": False, "init_weights": False} if name == "googlenet" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(torchvision.models, name)(weights=None, num_classes=10, **extra)
    assert from_torch(model, (torch.randn(1, 3, 64, 64),), check=True)["nodes"]


@pytest.mark.parametrize("dtype,rml_dtype,storage", [(torch.float16, "f16", "F16"), (torch.bfloat16, "bf16", "BF16")])
def test_half_and_bfloat16_models_export_as_such(tmp_path, dtype, rml_dtype, storage):
    """.half() and .bfloat16() models: every value in the dtype, weights stored 16-bit with PyTorch's exact bits,
    the graph within 16-bit tolerance of PyTorch (bf16: PyTorch itself in bf16; f16: PyTorch's CPU build has no
    float16 matmul or convolution, so the f32 model on the same f16 weights and inputs)."""
    torch.manual_seed(5)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(8 * 4 * 4, 16), nn.GELU(), nn.Linear(16, 5)).eval()
    cnn[1].running_mean.uniform_(-1, 1)
    x = torch.randn(2, 3, 8, 8)
    model = cnn.to(dtype)
    stem = str(tmp_path / "m")
    graph = from_torch(model, (x.to(dtype),), stem, check=True)
    assert {v["dtype"] for v in graph["values"]} == {rml_dtype}
    with open(stem + ".safetensors", "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    assert {e["dtype"] for n, e in header.items() if n != "__metadata__"} == {storage}
    tensors, _ = read_safetensors(stem + ".safetensors")
    bits = lambda t: t.detach().contiguous().view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    bias = tensors["7.bias"]
    assert np.array_equal(bias.bits if dtype == torch.bfloat16 else bias.view(np.uint16), bits(model[7].bias))
    g, w = reference.load(stem)
    feed = x.to(dtype)
    from rml_export.safetensors import BF16Array
    feed = BF16Array(bits(feed)) if dtype == torch.bfloat16 else feed.numpy()
    (got,) = reference.run_graph(g, w, [feed])
    with torch.no_grad():
        want = (model(x.to(dtype)) if dtype == torch.bfloat16 else cnn.float()(x.half().float())).float().numpy()
    # Several ops, each rounded to the format: a few ulps of 2^-8 (bf16) or 2^-11 (f16), relative to the peak.
    tol = {"bf16": 6e-2, "f16": 1e-2}[rml_dtype]
    assert np.max(np.abs(got.astype(np.float32) - want)) <= tol * max(1.0, np.max(np.abs(want)))
    narrowed = from_torch(cnn.to(dtype), (x.to(dtype),), narrow=True)
    assert {v["dtype"] for v in narrowed["values"]} == {"f32"}


class Remainders(nn.Module):
    def forward(self, i, j, x):
        return i % 3, torch.remainder(i, j), torch.fmod(i, j), 7 % j, torch.fmod(x, 0.75)


def test_integer_remainder_and_fmod(tmp_path):
    """`%` and torch.remainder take the divisor's sign, torch.fmod the dividend's: rml's mod with fmod false and
    true, on int64 kept as i64; on floats only fmod lowers."""
    i = torch.tensor([[-7, 7, -8, 9], [0, -1, 5, -5]])
    j = torch.tensor([3, -3, -3, 4])
    x = torch.randn(2, 4) * 4
    graph = run_both(Remainders(), (i, j, x), tmp_path)
    mods = [n.get("attrs", {}).get("fmod", False) for n in graph["nodes"] if n["op"] == "mod"]
    assert mods.count(True) == 2 and mods.count(False) == 3

    class FloatRemainder(nn.Module):
        def forward(self, x):
            return x % 2.0

    with pytest.raises(ExportError, match="remainder of floats"):
        from_torch(FloatRemainder(), (x,))
