#!/usr/bin/env python3
"""No source file over 650 lines outside tests/: a file that long holds more than one thing, and
the part that grew is cut into a file named after what it holds.
Checks every .cpp, .hpp, .cu, .cuh, .h and .py file below SOURCE_DIR except those under tests/,
hidden folders (.git, ...) and build trees (a folder holding CMakeCache.txt or named build,
_deps or __pycache__, and the source dir's build* folders).
Usage: check_file_lengths.py SOURCE_DIR [MAX_LINES]. Exit 1, naming each longer file and its
line count, when one exists."""
import os
import re
import sys

root = os.path.abspath(sys.argv[1])
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 650
SOURCE = re.compile(r"\.(cpp|hpp|cu|cuh|h|py)$")


def skipped(folder, name):
    if name.startswith(".") or name in ("build", "_deps", "__pycache__"):
        return True
    if folder == root and (name == "tests" or name.startswith("build")):
        return True
    return os.path.exists(os.path.join(folder, name, "CMakeCache.txt"))


checked, long_files = 0, []
for folder, dirs, files in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not skipped(folder, d))
    for name in sorted(files):
        if not SOURCE.search(name):
            continue
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            lines = sum(1 for _ in f)
        checked += 1
        if lines > limit:
            long_files.append((os.path.relpath(path, root), lines))

for path, lines in long_files:
    print(f"{path}: {lines} lines, over {limit}: cut a coherent part into a file of its own")
print(f"{checked} source files checked outside tests/, {len(long_files)} over {limit} lines")
if checked == 0:
    print("no source files found: wrong source dir?")
    sys.exit(1)
sys.exit(1 if long_files else 0)
