#!/usr/bin/python3
"""Runs gen_zoo.py --real16's fixtures through the `rml` CLI and prints their error against the references.

For each <stem> in --dir it feeds `input.0` of <stem>.expected.safetensors to `rml run <stem>`, reads the output
back and prints max |rml - ref|, that maximum over max(1, max |ref|), and the largest error in units of the
output dtype's ulp at the reference value, for `output.0` (PyTorch in the model's dtype) and `output_f32.0` (the
f32 model). With --time it also runs the CLI under /usr/bin/time -v and prints its peak RSS.

Usage: check_real16.py --rml PATH/TO/rml --dir DIR [--stems a,b] [--threads N] [--time] [--f32-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

from rml_export.safetensors import BF16Array, read_safetensors  # noqa: E402

STEMS = ("resnet18_224_b1_f16", "resnet18_224_b1_bf16", "encoder_bert_b1_f16", "encoder_bert_b1_bf16")
MANTISSA_BITS = {"f16": 10, "bf16": 7, "f32": 23}


def widen(a) -> np.ndarray:
    return a.to_float32() if isinstance(a, BF16Array) else np.asarray(a).astype(np.float32)


def ulp(ref: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of `dtype` at each |ref| (its smallest normal spacing below the normal range)."""
    mag = np.abs(ref.astype(np.float64))
    min_exp = {"f16": -14, "bf16": -126, "f32": -126}[dtype]
    exp = np.floor(np.log2(np.maximum(mag, 2.0 ** min_exp)))
    return 2.0 ** (exp - MANTISSA_BITS[dtype])


def errors(got: np.ndarray, ref: np.ndarray, dtype: str) -> str:
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    peak = max(1.0, float(np.max(np.abs(ref))))
    return (f"max abs {diff.max():.3g}, / max(1, max|ref|={float(np.max(np.abs(ref))):.3g}) {diff.max() / peak:.3g}, "
            f"max ulps({dtype}) {float(np.max(diff / ulp(ref, dtype))):.1f}, mean abs {diff.mean():.3g}")


def run(rml: str, stem: str, feed: np.ndarray, input_name: str, threads: int, timed: bool):
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "in.npy"), feed)
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        cmd = [rml, "run", stem, "--input", f"{input_name}={tmp}/in.npy", "--save", out, "--threads", str(threads)]
        if timed:
            cmd = ["/usr/bin/time", "-v"] + cmd
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{stem}: rml run failed ({done.returncode}): {done.stderr.strip()}")
        rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
        files = sorted(os.listdir(out))
        return np.load(os.path.join(out, files[0])).astype(np.float32), int(rss.group(1)) if rss else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rml", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--stems", default=",".join(STEMS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--f32-dir", help="also run <stem without _f16/_bf16> from here (peak RSS baseline)")
    args = parser.parse_args(argv)
    for stem in args.stems.split(","):
        path = os.path.join(args.dir, stem)
        with open(path + ".json") as f:
            graph = json.load(f)
        values = {v["name"]: v for v in graph["values"]}
        first = graph["inputs"][0]
        input_name = first if isinstance(first, str) else graph["values"][first]["name"]
        dtype = values[input_name]["dtype"]
        tensors, _ = read_safetensors(path + ".expected.safetensors")
        x = tensors["input.0"]
        feed = x if not isinstance(x, BF16Array) else x.to_float32()  # bf16 values in f32: the CLI rounds exactly
        got, rss = run(args.rml, path, feed, input_name, args.threads, args.time)
        print(f"{stem}: vs PyTorch {dtype}: {errors(got, widen(tensors['output.0']), dtype)}")
        print(f"{stem}: vs f32 model:    {errors(got, widen(tensors['output_f32.0']), dtype)}")
        print(f"{stem}: PyTorch {dtype} vs f32 model: "
              f"{errors(widen(tensors['output.0']), widen(tensors['output_f32.0']), dtype)}")
        if rss is not None:
            line = f"{stem}: peak RSS {rss / 1024:.1f} MB"
            if args.f32_dir:
                base = re.sub(r"_(b?f16)$", "", stem)
                y32 = read_safetensors(os.path.join(args.f32_dir, base + ".expected.safetensors"))[0]["input.0"]
                _, rss32 = run(args.rml, os.path.join(args.f32_dir, base), y32, input_name, args.threads, True)
                line += f", f32 {base} {rss32 / 1024:.1f} MB, ratio {rss / rss32:.3f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
