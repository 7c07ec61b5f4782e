"""Runs one example program and compares its output, line by line, with the output it must print.

    python3 run_example.py <program.py> <expected.txt> [exit code]

Exits 0 when the program exits with the given code (default 0) and prints exactly the expected lines;
otherwise prints the difference and exits 1.
"""

import difflib
import subprocess
import sys


def main(argv: list[str]) -> int:
    program, expected_path = argv[1], argv[2]
    exit_code = int(argv[3]) if len(argv) > 3 else 0
    run = subprocess.run([sys.executable, program], capture_output=True, text=True, timeout=120)
    with open(expected_path, encoding="utf-8") as f:
        expected = f.read().splitlines()
    actual = run.stdout.splitlines()
    ok = True
    if run.returncode != exit_code:
        print(f"{program} exited with {run.returncode}, expected {exit_code}")
        ok = False
    if actual != expected:
        print(f"{program}: output differs from {expected_path}")
        sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in expected], [l + "\n" for l in actual],
                                                   "expected", "actual"))
        ok = False
    if not ok and run.stderr:
        print("stderr:\n" + run.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
