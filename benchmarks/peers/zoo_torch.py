#!/usr/bin/python3
"""PyTorch peer for bench_zoo: median eager latency of each zoo model (tests/zoo/models.py).

Usage: zoo_torch.py --threads T --runs N model_b<batch> [...]
Prints one line per model: `<model>_b<batch> <threads> <median ms> <VmHWM kB> <base kB>`: the process's peak
resident set so far and its VmRSS before the first model was built (one model per process for a model's peak). PyTorch runs eager, in eval mode under
torch.inference_mode(), with torch.set_num_threads(T). Debian's torch links the reference BLAS through
libblas.so.3; when OpenBLAS (libopenblas0-pthread) is installed, this script re-executes itself with OpenBLAS
first on LD_LIBRARY_PATH (and OPENBLAS_NUM_THREADS=T) so Linear layers are not measured on the reference BLAS.
$RML_OPENBLAS_DIR names another directory holding OpenBLAS's libblas.so.3 (the package unpacked with
`apt-get download libopenblas0-pthread && dpkg -x`, say, which leaves the system alone).
"""

import os
import sys

OPENBLAS_DIR = os.environ.get("RML_OPENBLAS_DIR") or "/usr/lib/x86_64-linux-gnu/openblas-pthread"


def _pin_blas(threads: str):
    if os.environ.get("RML_TORCH_BLAS_PINNED") or not os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")):
        return
    env = dict(os.environ, RML_TORCH_BLAS_PINNED="openblas", OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
    env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def _status_kb(key: str) -> int:
    """A `Vm...:` line of /proc/self/status in kB (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("stems", nargs="+")
    args = parser.parse_args()
    _pin_blas(args.threads)

    import statistics
    import time

    import torch
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "tests", "zoo"))
    import models

    base = _status_kb("VmRSS")
    torch.set_num_threads(int(args.threads))
    print(f"# torch {torch.__version__}, blas: {os.environ.get('RML_TORCH_BLAS_PINNED', 'default')}", flush=True)
    for stem in args.stems:
        name, _, batch = stem.rpartition("_b")
        model, inputs = models.build(name, int(batch))
        with torch.inference_mode():
            for _ in range(3):
                model(*inputs)
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                model(*inputs)
                times.append(time.perf_counter() - start)
        print(f"{stem} {args.threads} {statistics.median(times) * 1e3:.6f} {_status_kb('VmHWM')} {base}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
