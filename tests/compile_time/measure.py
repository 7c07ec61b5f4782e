#!/usr/bin/env python3
"""What including rml costs a translation unit, next to Eigen, in the same run.

Compiles, at the given flags (the test passes -O2), rounds of three translation units,
interleaved so that a machine busy with other work slows all three alike:

  eigen    `#include <Eigen/Dense>` and a trivial use: the yardstick;
  split    --user-tu (tests/consumers/split/run.cpp: includes <rml/rml.hpp>, loads a model,
           runs it, compares with NumPy's output) with RML_SEPARATE_KERNELS;
  default  the same source without the macro: every kernel in the translation unit.

Each compile is timed on its own (wall clock, CPU time of the compiler and its children, and
their peak resident memory, from wait4). The split TU is then linked with --impl-tu (the one TU
that defines RML_KERNELS_IMPLEMENTATION), the default TU alone, and both programs must run the
model, match NumPy's output and print the same.

Fails on a functional problem only (a compile, link or run that fails, or a wrong result); the
times are printed, never judged: timing on a shared machine is not a test.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

EIGEN_TU = r"""// The yardstick: Eigen's dense module and a trivial use of it.
#include <Eigen/Dense>

int main() {
  const Eigen::Matrix3f m = Eigen::Matrix3f::Identity() * 2.0f;
  return static_cast<int>(m.determinant()) == 8 ? 0 : 1;
}
"""

def run(cmd, what):
    """Runs `cmd`; returns (wall seconds, CPU seconds, peak RSS in MiB). Exits on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    # wait4 gives this child's own usage (with the compiler proper it ran), not the sum so far.
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write(f"compile-time: {what} failed ({proc.returncode})\ncommand: {' '.join(cmd)}\n")
        sys.stderr.write(out.decode(errors="replace"))
        sys.exit(1)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--model", required=True, help="model stem (with .json, .safetensors, .expected.safetensors)")
    ap.add_argument("--user-tu", required=True, type=Path, help="a program that loads, runs and checks the model")
    ap.add_argument("--impl-tu", required=True, type=Path, help="the TU that defines RML_KERNELS_IMPLEMENTATION")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--flags", default="", help="compile (and link) flags, |-separated")
    ap.add_argument("--include-dirs", default="", help="|-separated")
    ap.add_argument("--defines", default="", help="|-separated")
    ap.add_argument("--libs", default="", help="link arguments, |-separated")
    ap.add_argument("--implicit-include-dirs", default="", help="the compiler's own, left out of --include-dirs")
    args = ap.parse_args()

    def items(text):
        # CMake joins lists with '|'; an item may itself be a ;-list (a target's include directories).
        return [i for part in text.split("|") for i in part.split(";") if i]

    flags = items(args.flags)
    # The compiler's own directories must not be passed again: -isystem /usr/include breaks the
    # #include_next chain of libstdc++'s <cstdlib>.
    implicit = {os.path.realpath(d) for d in items(args.implicit_include_dirs)}
    flags += [f"-isystem{d}" for d in dict.fromkeys(items(args.include_dirs)) if os.path.realpath(d) not in implicit]
    flags += [f"-D{d}" for d in dict.fromkeys(items(args.defines))]
    libs = items(args.libs)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    (work / "eigen.cpp").write_text(EIGEN_TU)

    def compile_tu(source, obj, extra, what):
        wall, cpu, rss = run([args.cxx, "-std=c++20", *flags, *extra, "-c", str(source), "-o", str(work / obj)], what)
        return wall, cpu, rss, (work / obj).stat().st_size / 1024.0

    units = {
        "eigen": (work / "eigen.cpp", "eigen.o", []),
        "split": (args.user_tu, "split.o", ["-DRML_SEPARATE_KERNELS"]),
        "default": (args.user_tu, "default.o", []),
    }
    times = {name: [] for name in units}
    for r in range(args.rounds):
        # Rotate the order each round so that none is always first (or last) on a busy machine.
        order = list(units)[r % 3:] + list(units)[:r % 3]
        for name in order:
            source, obj, extra = units[name]
            times[name].append(compile_tu(source, obj, extra, f"compiling the {name} TU"))

    # What the split build pays once: the implementation TU.
    impl = compile_tu(args.impl_tu, "impl.o", ["-DRML_SEPARATE_KERNELS"], "compiling the implementation TU")

    # Link and run both programs: the split one must find every kernel in impl.o, and both must
    # reproduce NumPy's output.
    outputs = {}
    for name, objs in (("split", ["split.o", "impl.o"]), ("default", ["default.o"])):
        exe = work / f"{name}_model"
        run([args.cxx, *flags, *[str(work / o) for o in objs], *libs, "-o", str(exe)], f"linking the {name} program")
        proc = subprocess.run([str(exe), args.model], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.stderr.write(f"compile-time: the {name} program failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
            return 1
        outputs[name] = proc.stdout
    if outputs["split"] != outputs["default"] or "matches the reference" not in outputs["split"]:
        sys.stderr.write(f"compile-time: the split and default programs disagree:\n{outputs}")
        return 1

    def med(name, i):
        return statistics.median(t[i] for t in times[name])

    print(f"compile-time: {args.rounds} round(s), interleaved; {args.cxx} -std=c++20 {' '.join(items(args.flags))}")
    print("  (medians; wall time depends on what else the machine runs, CPU time less so)")
    print(f"  {'translation unit':<44} {'wall s':>7} {'CPU s':>7} {'x Eigen (CPU)':>14} {'peak MiB':>9} {'.o KiB':>7}")
    base = med("eigen", 1)
    labels = {
        "eigen": "#include <Eigen/Dense> + trivial use",
        "split": f"{args.user_tu.name}, RML_SEPARATE_KERNELS",
        "default": f"{args.user_tu.name}, default (all kernels inline)",
    }
    for name in units:
        print(f"  {labels[name]:<44} {med(name, 0):7.2f} {med(name, 1):7.2f} {med(name, 1) / base:14.1f} "
              f"{med(name, 2):9.0f} {med(name, 3):7.0f}")
    print(f"  {'implementation TU (once per program)':<44} {impl[0]:7.2f} {impl[1]:7.2f} {impl[1] / base:14.1f} "
          f"{impl[2]:9.0f} {impl[3]:7.0f}")
    print(f"  split / default (CPU): {med('split', 1) / med('default', 1):.2f}")
    print("  both programs print:\n    " + outputs["split"].strip().replace("\n", "\n    "))
    if args.rounds > 1:
        for name in units:
            print(f"  {name} CPU s per round: " + " ".join(f"{t[1]:.2f}" for t in times[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
