#!/usr/bin/env python3
"""Tests of the `rml` tool's machine-readable side, each checked against an independent reference:
NumPy for statistics, outputs and percentiles, hashlib for SHA-256, the model files themselves
for info and cut, and a re-implementation of the documented random-input generator.

Run: /usr/bin/python3 tests/cli/test_cli.py <rml> <source dir> <scratch dir> <case>
(suite.cmake registers one CTest test per case, `cli.py.<case>`).
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_data import mlp as mlp_numpy, read_safetensors  # noqa: E402

RML, SOURCE, WORK, CASE = sys.argv[1:5]
MLP = os.path.join(SOURCE, "tests", "data", "torch_mlp")
MLP_REF = MLP + ".expected.safetensors"
GPT = os.path.join(SOURCE, "tests", "data", "zoo", "gpt_b1")
CNN = os.path.join(SOURCE, "tests", "data", "zoo", "cnn_b1")

USAGE_TAIL = "for more information.\n"


def rml(*args, code=0):
    """Runs rml; checks its exit code; returns (stdout, stderr)."""
    p = subprocess.run([RML, *args], capture_output=True, text=True, cwd=WORK)
    if p.returncode != code:
        sys.exit("rml %s: exit %d, expected %d\n--- stdout\n%s--- stderr\n%s" %
                 (" ".join(args), p.returncode, code, p.stdout, p.stderr))
    return p.stdout, p.stderr


def rml_json(*args, code=0):
    out, err = rml(*args, "--json", code=code)
    try:
        return json.loads(out), err
    except json.JSONDecodeError as e:
        sys.exit("rml %s --json: not JSON (%s)\n%s" % (" ".join(args), e, out))


def check(condition, what):
    if not condition:
        sys.exit("FAIL: " + what)


def close(a, b, rtol=1e-6, atol=1e-9):
    return abs(a - b) <= atol + rtol * abs(b)


def write_safetensors(path, tensors):
    header, offset, data = {}, 0, b""
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {"float32": "F32", "int32": "I32"}[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def mlp(x):
    """torch_mlp on x in float64, from its stored weights (NumPy, as for the expected files)."""
    return mlp_numpy(read_safetensors(MLP + ".safetensors"), x)


def check_stats(entry, a, what):
    """A tensor's --json entry against NumPy: type, statistics over finite elements, SHA-256."""
    check(entry["dtype"] == {"float32": "f32", "int32": "i32"}[str(a.dtype)], what + ": dtype")
    check(entry["shape"] == list(a.shape), what + ": shape %s vs %s" % (entry["shape"], list(a.shape)))
    v = a.astype(np.float64).reshape(-1)
    finite = v[np.isfinite(v)]
    check(entry["nan"] == int(np.isnan(v).sum()), what + ": nan count")
    check(entry["inf"] == int(np.isinf(v).sum()), what + ": inf count")
    for key, want in [("min", finite.min()), ("max", finite.max()), ("mean", finite.mean()), ("std", finite.std())]:
        check(close(entry[key], want, 1e-9, 1e-12), "%s: %s %r, NumPy says %r" % (what, key, entry[key], want))
    digest = hashlib.sha256(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()).hexdigest()
    check(entry["sha256"] == digest, what + ": sha256 %s, hashlib says %s" % (entry["sha256"], digest))


def splitmix_inputs(seed, index, shape, int_bound=None):
    """The documented generator: SplitMix64 seeded with seed ^ (0xd1b54a32d192ed03 * (index + 1));
    a float is 2 * (next >> 40) / 2^24 - 1, an integer ((next >> 32) * bound) >> 32."""
    mask = (1 << 64) - 1
    state = (seed ^ (0xd1b54a32d192ed03 * (index + 1))) & mask
    out = []
    for _ in range(int(np.prod(shape))):
        state = (state + 0x9e3779b97f4a7c15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & mask
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & mask
        z ^= z >> 31
        if int_bound is None:
            out.append(np.float32(2.0) * np.float32((z >> 40) * 2.0 ** -24) - np.float32(1.0))
        else:
            out.append(((z >> 32) * int_bound) >> 32)
    return np.array(out, np.int32 if int_bound else np.float32).reshape(shape)


# ---------------------------------------------------------------------------------------------

def case_info():
    doc, _ = rml_json("info", MLP)
    with open(MLP + ".json") as f:
        graph = json.load(f)
    weights = read_safetensors(MLP + ".safetensors")
    values = graph["values"]
    check([i["name"] for i in doc["inputs"]] == [values[i]["name"] for i in graph["inputs"]], "input names")
    check([i["shape"] for i in doc["inputs"]] == [values[i]["shape"] for i in graph["inputs"]], "input shapes")
    check([o["dtype"] for o in doc["outputs"]] == [values[i]["dtype"] for i in graph["outputs"]], "output dtypes")
    ops = {}
    for n in graph["nodes"]:
        ops[n["op"]] = ops.get(n["op"], 0) + 1
    check(doc["operators"] == {"count": len(graph["nodes"]), "histogram": ops}, "operators %s" % doc["operators"])
    check(doc["values"]["count"] == len(values), "value count")
    check(doc["parameters"]["count"] == sum(a.size for a in weights.values()), "parameter count")
    check(doc["memory_bytes"]["weights"] == sum(a.nbytes for a in weights.values()), "weight bytes")
    # FLOPs by hand: three matmuls 2*2*(12*16 + 16*16 + 16*4), adds 2*(16+16+4), relus 2*(16+16).
    check(doc["flops"] == 2 * 2 * (12 * 16 + 16 * 16 + 16 * 4) + 2 * (16 + 16 + 4) + 2 * (16 + 16), "flops")


def case_check():
    doc, _ = rml_json("check", MLP)
    with open(MLP + ".json") as f:
        graph = json.load(f)
    check(doc == {"ok": True, "operators": len(graph["nodes"]), "values": len(graph["values"])}, "check %s" % doc)


def case_run_random():
    """Random inputs: reproducible from the documented generator, not zeros, said on stderr; the
    outputs and every statistic and digest against NumPy and hashlib."""
    doc, err = rml_json("run", MLP, "--save", "random_y.safetensors", "--save-inputs", "random_x.safetensors")
    check("note: input x: f32 [2, 12] random, uniform in [-1, 1), seed 0" in err, "the note on stderr: " + err)
    x = read_safetensors(os.path.join(WORK, "random_x.safetensors"))["x"]
    y = read_safetensors(os.path.join(WORK, "random_y.safetensors"))["y"]
    check(np.array_equal(x, splitmix_inputs(0, 0, (2, 12))), "inputs are the documented generator's for seed 0")
    check(x.min() >= -1 and x.max() < 1 and x.std() > 0.3, "inputs uniform in [-1, 1), not zeros")
    check(np.allclose(y, mlp(x), rtol=1e-5, atol=1e-6), "outputs of the random inputs against NumPy")
    check(doc["inputs"][0]["source"] == "random" and doc["inputs"][0]["seed"] == 0, "input source")
    check_stats(doc["inputs"][0], x, "input x")
    check_stats(doc["outputs"][0], y, "output y")
    # sha256sum of the raw bytes, where the system has it: a second, separate reference.
    if shutil.which("sha256sum"):
        raw = os.path.join(WORK, "random_y.raw")
        y.tofile(raw)
        line = subprocess.run(["sha256sum", raw], capture_output=True, text=True, check=True).stdout
        check(line.split()[0] == doc["outputs"][0]["sha256"], "sha256sum agrees")
    # Text output carries the same digest.
    out, _ = rml("run", MLP)
    check("  sha256 %s\n" % doc["outputs"][0]["sha256"] in out, "text output's sha256 line")


def case_seed():
    def digest(*args):
        doc, _ = rml_json("run", MLP, *args)
        return doc["inputs"][0]["sha256"], doc["outputs"][0]["sha256"]
    seven = digest("--seed", "7")
    check(seven == digest("--seed", "7"), "the same seed gives the same inputs and outputs")
    check(seven[0] != digest("--seed", "8")[0], "another seed gives other inputs")
    check(seven[0] != digest()[0], "seed 0 (the default) differs from seed 7")
    x7 = splitmix_inputs(7, 0, (2, 12))
    check(seven[0] == hashlib.sha256(x7.tobytes()).hexdigest(), "seed 7's inputs are the documented generator's")


def case_int_inputs():
    """gpt_b1 reads token ids into a 64-row embedding: random ids are integers in [0, 64)."""
    doc, err = rml_json("run", GPT, "--save-inputs", "gpt_inputs")
    check("integers in [0, 64)" in err, "the note names the range: " + err)
    idx = np.load(os.path.join(WORK, "gpt_inputs", "idx.npy"))
    check(idx.dtype == np.int32 and idx.shape == (1, 8), "idx saved as i32 [1, 8]")
    check(idx.min() >= 0 and idx.max() < 64, "ids within the vocabulary")
    check(idx.max() >= 10, "ids use the vocabulary, not only 0..9: %s" % idx)
    check_stats(doc["inputs"][0], idx, "input idx")
    check(doc["outputs"][0]["nan"] == 0 and doc["outputs"][0]["std"] > 0, "gpt output is finite and not constant")


def case_file_inputs():
    """.npy and .safetensors inputs give the reference outputs; --compare says so."""
    ref = read_safetensors(MLP_REF)
    np.save(os.path.join(WORK, "x_in.npy"), ref["x"])
    for args in (["--input", "x=" + os.path.join(WORK, "x_in.npy")], ["--input", "x=" + MLP_REF], ["--inputs", MLP_REF]):
        doc, err = rml_json("run", MLP, *args, "--compare", MLP_REF)
        check("random" not in err, "no random input when the file gives it: " + err)
        check(doc["inputs"][0]["source"] == "file", "input from a file")
        check(doc["compare"]["passed"] and doc["compare"]["outputs"][0]["name"] == "y", "compare passes: %s" % args)
        y = mlp(ref["x"])
        check(abs(doc["outputs"][0]["mean"] - y.mean()) < 1e-6, "output mean against NumPy")


def case_positional_names():
    """rml's reference files name tensors input.<k> and output.<k>: --inputs and --compare fall
    back to those names (the zoo's cnn_b1 against PyTorch's outputs, stored by tests/zoo/gen_zoo.py)."""
    ref = CNN + ".expected.safetensors"
    doc, err = rml_json("run", CNN, "--inputs", ref, "--compare", ref, "--rtol", "1e-4", "--atol", "1e-5")
    check("random" not in err and doc["inputs"][0]["source"] == "file", "input.0 given x: " + err)
    check(doc["compare"]["passed"] and doc["compare"]["outputs"][0]["name"] == "output", "output.0 compared: %s" % doc)
    x = read_safetensors(ref)["input.0"]
    check(doc["inputs"][0]["sha256"] == hashlib.sha256(x.tobytes()).hexdigest(), "the input is input.0's bytes")
    rml("run", CNN, "--compare", ref, code=4)  # random inputs: PyTorch's outputs are for others


def case_compare():
    """--save then --compare passes (a .safetensors file and a directory of .npy files); a
    perturbed reference fails with exit 4, naming the worst element."""
    rml("run", MLP, "--seed", "3", "--save", "ref.safetensors")
    rml("run", MLP, "--seed", "3", "--save", "ref_dir")
    for ref in ("ref.safetensors", "ref_dir"):
        doc, _ = rml_json("run", MLP, "--seed", "3", "--compare", ref)
        c = doc["compare"]["outputs"][0]
        check(doc["compare"]["passed"] and c["mismatched"] == 0 and c["max_abs_error"] == 0, "self-compare " + ref)
    y = read_safetensors(os.path.join(WORK, "ref.safetensors"))["y"]
    check(np.array_equal(np.load(os.path.join(WORK, "ref_dir", "y.npy")), y), ".npy and .safetensors hold the same")

    bad = y.copy()
    bad[1, 2] += np.float32(0.01)
    bad[0, 0] += np.float32(1e-4)  # also outside the default tolerance, but less so
    write_safetensors(os.path.join(WORK, "perturbed.safetensors"), {"y": bad})
    doc, err = rml_json("run", MLP, "--seed", "3", "--compare", "perturbed.safetensors", code=4)
    c = doc["compare"]["outputs"][0]
    check(not doc["compare"]["passed"] and c["mismatched"] == 2, "two elements mismatch: %s" % c)
    w = c["worst"]
    check(w["index"] == [1, 2] and w["got"] == float(y[1, 2]) and w["expected"] == float(bad[1, 2]), "worst %s" % w)
    abs_err = abs(float(y[1, 2]) - float(bad[1, 2]))
    check(close(w["abs_error"], abs_err) and close(w["rel_error"], abs_err / abs(float(bad[1, 2]))), "errors %s" % w)
    check(err.endswith("\n") and err.splitlines()[-1].startswith("rml: MISMATCH: y[1, 2]: got "), "stderr: " + err)
    # Within a looser tolerance it passes; a reference of another shape is a mismatch too.
    rml("run", MLP, "--seed", "3", "--compare", "perturbed.safetensors", "--atol", "0.02")
    write_safetensors(os.path.join(WORK, "reshaped.safetensors"), {"y": y.reshape(4, 2)})
    _, err = rml("run", MLP, "--seed", "3", "--compare", "reshaped.safetensors", code=4)
    check("rml: MISMATCH: y: got f32 [2, 4], the reference is f32 [4, 2]" in err, "shape mismatch: " + err)
    # A reference that has none of the outputs is a data error.
    write_safetensors(os.path.join(WORK, "other.safetensors"), {"z": y})
    rml("run", MLP, "--compare", "other.safetensors", code=2)


def case_bench():
    doc, _ = rml_json("bench", MLP, "--runs", "7", "--warmup", "2", "--threads", "1")
    s = np.array(doc["samples_ms"])
    check(doc["runs"] == 7 and len(s) == 7 and doc["warmup"] == 2 and doc["threads"] == 1, "runs %s" % doc)
    lat = doc["latency_ms"]
    for key, want in [("min", s.min()), ("max", s.max()), ("mean", s.mean()), ("p50", np.percentile(s, 50)),
                      ("p90", np.percentile(s, 90)), ("p99", np.percentile(s, 99))]:
        check(close(lat[key], want, 1e-9), "%s %r, NumPy says %r" % (key, lat[key], want))
    doc, _ = rml_json("bench", MLP, "--duration", "0.2", "--threads", "1")
    check(doc["runs"] > 7 and doc["seconds"] >= 0.2, "--duration runs for its time: %d runs" % doc["runs"])
    doc, _ = rml_json("bench", MLP, "--duration", "5", "--runs", "3")
    check(doc["runs"] == 3, "--runs ends a --duration early")


def node_flops(graph, node):
    """estimate_flops as docs/cli.md states it, for the ops of torch_mlp."""
    values = graph["values"]
    out = int(np.prod(values[node["outputs"][0]]["shape"]))
    if node["op"] == "matmul":
        return 2 * out * values[node["inputs"][0]]["shape"][-1]
    return out


def case_cut():
    with open(MLP + ".json") as f:
        graph = json.load(f)
    total = sum(node_flops(graph, n) for n in graph["nodes"])
    doc, _ = rml_json("cut", MLP, "mlp_cut")
    check(doc["bytes"] == 32 and [v["name"] for v in doc["values"]] == ["MatMul_7_0"] and doc["exact"], "cut %s" % doc)
    doc, _ = rml_json("cut", MLP, "mlp_balanced", "--balance", "0.2")
    check(not doc["exact"], "the balanced cut is not the unconstrained optimum")
    f = doc["flops"]
    check(f["total"] == total and 0.3 <= f["share_before"] <= 0.7, "flops %s, total %d" % (f, total))
    with open(os.path.join(WORK, "mlp_balanced.before.json")) as fh:
        before = json.load(fh)
    with open(os.path.join(WORK, "mlp_balanced.after.json")) as fh:
        after = json.load(fh)
    b = sum(node_flops(before, n) for n in before["nodes"])
    a = sum(node_flops(after, n) for n in after["nodes"])
    check(b + a == total and f["before"] == b and f["after"] == a, "per-side flops %s vs %d + %d" % (f, b, a))
    check(close(f["share_before"], b / total), "share")
    check(doc["bytes"] == sum(4 * int(np.prod(v["shape"])) for v in doc["values"]), "crossing bytes")
    _, err = rml("cut", MLP, "never", "--balance", "0.2", "--max-flops-before", "0.3", code=1)
    check("excludes" in err, "--balance and --max-flops-before together: " + err)
    rml("cut", MLP, "never", "--min-flops-before", "0.999", code=2)


def case_usage_errors():
    """Each usage error is exactly two lines: the message, then where help is."""
    for args, message in [(["convert", MLP, ""], "OUT: '' names no file"),
                          (["cut", MLP, ""], "OUT_STEM: '' names no file"),
                          (["run", MLP, "--save", ""], "--save: needs a path, not ''"),
                          (["run", MLP, "--threads", "0"], "--threads: 0 is below 1"),
                          (["bench", MLP, "--runs", "many"], "--runs: 'many' is not an integer"),
                          (["run", MLP, "--rtol", "-1"], "--rtol: -1 is below 0"),
                          (["info"], "MODEL is required")]:
        _, err = rml(*args, code=1)
        lines = err.split("\n")
        check(len(lines) == 3 and lines[2] == "", "two lines: %r" % err)
        check(lines[0].startswith("rml: INVALID_ARGUMENT: ") and message in lines[0], "message: %r" % err)
        check(lines[1] == "Run 'rml %s --help' for more information." % args[0], "help pointer: %r" % err)
    check(not os.path.exists(os.path.join(WORK, ".json")), "nothing written for an empty OUT")


def case_new_dtypes():
    """f16, bf16, i64 and bool: info and dot name them; .npy inputs of float16 and int64 reach f32 and i32 inputs
    (widened exactly, narrowed checked); an unsupported .npy dtype is refused by name."""
    # A model whose outputs are constants of the four dtypes (no op: the checker has nothing to refuse).
    h = np.array([[0.1, -2.5], [65504, 2**-24]], np.float16)
    l = np.array([-2**63, 2**53 + 1, 7], np.int64)
    values = [{"name": "h", "dtype": "f16", "shape": [2, 2]}, {"name": "b", "dtype": "bf16", "shape": [3]},
              {"name": "l", "dtype": "i64", "shape": [3]}, {"name": "m", "dtype": "bool", "shape": [4]}]
    graph = {"format": "rml-graph", "version": 1, "values": values, "inputs": [], "outputs": [0, 1, 2, 3],
             "constants": [{"value": 0, "tensor": "h"}, {"value": 1, "data": [1.5, -2.0, 3.0]},
                           {"value": 2, "tensor": "l"}, {"value": 3, "data": [1, 0, 0, 1]}], "nodes": []}
    stem = os.path.join(WORK, "dtypes")
    with open(stem + ".json", "w") as f:
        json.dump(graph, f)
    header = {"l": {"dtype": "I64", "shape": [3], "data_offsets": [0, 24]},
              "h": {"dtype": "F16", "shape": [2, 2], "data_offsets": [24, 32]}}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(stem + ".safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + l.astype("<i8").tobytes() + h.astype("<f2").tobytes())
    doc, _ = rml_json("info", stem)
    check([o["dtype"] for o in doc["outputs"]] == ["f16", "bf16", "i64", "bool"], "info dtypes: %s" % doc["outputs"])
    check(doc["memory_bytes"]["weights"] == 2 * 4 + 2 * 3 + 8 * 3 + 1 * 4, "weight bytes %s" % doc["memory_bytes"])
    dot, _ = rml("dot", stem)
    for text in ("f16 [2, 2]", "bf16 [3]", "i64 [3]", "bool [4]"):
        check(text in dot, "dot names %s" % text)

    # float16 .npy for the f32 MLP: widened exactly, so the result is the MLP of the float16-rounded x.
    ref = read_safetensors(MLP_REF)
    x16 = ref["x"].astype(np.float16)
    np.save(os.path.join(WORK, "x16.npy"), x16)
    doc, err = rml_json("run", MLP, "--input", "x=" + os.path.join(WORK, "x16.npy"))
    check(doc["inputs"][0]["dtype"] == "f32", "the f16 array became the f32 input: %s" % doc["inputs"][0])
    check_stats(doc["inputs"][0], x16.astype(np.float32), "widened input")
    check(close(doc["outputs"][0]["mean"], mlp(x16.astype(np.float32)).mean(), 1e-5), "MLP of the f16 input")

    # int64 token ids (NumPy's default integer) for gpt's i32 input: narrowed, each value checked.
    ids = (np.arange(8, dtype=np.int64) * 7 % 64).reshape(1, 8)
    np.save(os.path.join(WORK, "ids64.npy"), ids)
    np.save(os.path.join(WORK, "ids32.npy"), ids.astype(np.int32))
    d64, _ = rml_json("run", GPT, "--input", "idx=" + os.path.join(WORK, "ids64.npy"))
    d32, _ = rml_json("run", GPT, "--input", "idx=" + os.path.join(WORK, "ids32.npy"))
    check(d64["outputs"][0]["sha256"] == d32["outputs"][0]["sha256"], "int64 ids give the int32 ids' output")
    np.save(os.path.join(WORK, "ids_big.npy"), np.array([[2**40] + [0] * 7], np.int64))
    _, err = rml("run", GPT, "--input", "idx=" + os.path.join(WORK, "ids_big.npy"), code=2)
    check("OUT_OF_RANGE" in err and "1099511627776" in err and "does not fit in i32" in err, err)
    np.save(os.path.join(WORK, "x_u16.npy"), np.zeros((2, 12), np.uint16))
    _, err = rml("run", MLP, "--input", "x=" + os.path.join(WORK, "x_u16.npy"), code=3)
    check("UNSUPPORTED" in err and "'<u2'" in err and "f2" in err and "b1" in err, err)


CASES = {name[5:]: f for name, f in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    CASES[CASE]()
    print("ok: " + CASE)
