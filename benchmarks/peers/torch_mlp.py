#!/usr/bin/python3
"""PyTorch peer for bench_executor: median eager latency of the torch_mlp fixture's model.

Usage: torch_mlp.py --threads T [--runs N]
Builds nn.Sequential(Linear(12, 16), ReLU, Linear(16, 16), ReLU, Linear(16, 4)) (the fixture
tests/data/torch_mlp describes; latency does not depend on the weights), runs it eagerly at batch 2
under torch.inference_mode() with torch.set_num_threads(T), and prints the median single-call
latency in microseconds on one line. The BLAS is pinned as zoo_torch.py pins it.
"""

import os
import sys


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1")
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from zoo_torch import _pin_blas
    _pin_blas(args.threads)

    import statistics
    import time

    import torch
    torch.set_num_threads(int(args.threads))
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 12)
    times = []
    with torch.inference_mode():
        for _ in range(200):
            model(x)
        for _ in range(args.runs):
            t0 = time.perf_counter_ns()
            model(x)
            times.append(time.perf_counter_ns() - t0)
    print("%.3f" % (statistics.median(times) / 1000.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
