#!/usr/bin/env python3
"""The include graph keeps its layers: core <- sharding, gemm, collective <- runtime <- capi,
launcher.
Every #include "cgemm/LAYER/..." in a layer's sources must name that layer or one below it.
Usage: check_layers.py SOURCE_DIR. Exit 1, listing each upward include, when one exists."""
import os
import re
import sys

BELOW = {
    "core": {"core"},
    "sharding": {"core", "sharding"},
    "gemm": {"core", "gemm"},
    "collective": {"core", "collective"},
    "runtime": {"core", "sharding", "gemm", "collective", "runtime"},
    "capi": {"core", "sharding", "gemm", "collective", "runtime", "capi"},
    "launcher": {"core", "sharding", "gemm", "collective", "runtime", "launcher"},
}

root = sys.argv[1]
checked, upward = 0, []
for layer, allowed in BELOW.items():
    for folder, _, files in os.walk(os.path.join(root, layer)):
        for name in files:
            if not re.search(r"\.(cpp|hpp|cu|h)$", name):
                continue
            path = os.path.join(folder, name)
            with open(path, errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+[<"]cgemm/(\w+)/', line)
                    if not m:
                        continue
                    checked += 1
                    if m.group(1) not in allowed:
                        upward.append(f"{os.path.relpath(path, root)}:{number}: {line.strip()}")
for u in upward:
    print("upward include:", u)
print(f"{checked} includes checked, {len(upward)} upward")
if checked == 0:
    print("no includes found: wrong source dir?")
    sys.exit(1)
sys.exit(1 if upward else 0)
