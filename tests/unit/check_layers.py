#!/usr/bin/env python3
"""The include graph keeps its layers: core <- sharding, gemm, collective <- runtime <- capi,
launcher.
Every #include "cgemm/LAYER/..." in a layer's sources must name that layer or one below it.
Inside runtime/src, a file in one folder (cuda/, grouped/, collectives/, ...) includes no file
of a sibling folder ("../other/x.hpp"): what two folders share lives in runtime/src itself, so
no two folders depend on each other (a cycle such as train/ <-> cuda/ cannot form).
Inside launcher/, common/ includes no program's folder (run/, bench/, ...) and a program's folder
includes only its own files and common/'s, so a file one program uses stays in its room.
Usage: check_layers.py SOURCE_DIR. Exit 1, listing each upward or sideways include, when one
exists."""
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


def includes(top, pattern):
    """(folder, path, number, line, match) for every line of the C/C++/CUDA sources below `top`
    that `pattern` matches."""
    for folder, _, files in os.walk(top):
        for name in files:
            if not re.search(r"\.(cpp|hpp|cu|cuh|h)$", name):
                continue
            path = os.path.join(folder, name)
            with open(path, errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = re.match(pattern, line)
                    if m:
                        yield folder, path, number, line, m


def where(path, number, line):
    return f"{os.path.relpath(path, root)}:{number}: {line.strip()}"


checked, upward = 0, []
for layer, allowed in BELOW.items():
    for _, path, number, line, m in includes(os.path.join(root, layer),
                                              r'\s*#\s*include\s+[<"]cgemm/(\w+)/'):
        checked += 1
        if m.group(1) not in allowed:
            upward.append(where(path, number, line))

# Sideways includes between the folders of runtime/src.
runtime_src = os.path.abspath(os.path.join(root, "runtime", "src"))
folders = sum(1 for _, dirs, _ in os.walk(runtime_src) for _ in dirs)
sideways = []
for folder, path, number, line, m in includes(runtime_src, r'\s*#\s*include\s+"([^"]+)"'):
    rel = os.path.relpath(folder, runtime_src)
    target = os.path.abspath(os.path.join(folder, m.group(1)))
    if rel == "." or not target.startswith(runtime_src + os.sep):
        continue
    parts = os.path.relpath(target, runtime_src).split(os.sep)
    if len(parts) > 1 and parts[0] != rel.split(os.sep)[0]:
        sideways.append(where(path, number, line))

# launcher/'s rooms: common/ below every program's folder, the programs side by side.
launcher = os.path.abspath(os.path.join(root, "launcher"))
rooms = sorted(d for d in os.listdir(launcher) if os.path.isdir(os.path.join(launcher, d)))
crossing = []
for folder, path, number, line, m in includes(launcher, r'\s*#\s*include\s+"([^"]+)"'):
    here = os.path.relpath(folder, launcher).split(os.sep)[0]
    target = os.path.abspath(os.path.join(folder, m.group(1)))
    if not os.path.exists(target):
        target = os.path.abspath(os.path.join(launcher, m.group(1)))
    if here == "." or not target.startswith(launcher + os.sep) or not os.path.exists(target):
        continue
    there = os.path.relpath(target, launcher).split(os.sep)[0]
    if there != here and (here == "common" or there != "common"):
        crossing.append(where(path, number, line))

for u in upward:
    print("upward include:", u)
for s in sideways:
    print("sideways include between runtime/src folders:", s)
for c in crossing:
    print("include across launcher/ rooms (common/ includes no program; programs only common/):",
          c)
print(f"{checked} includes checked, {len(upward)} upward; {folders} runtime/src folders, "
      f"{len(sideways)} sideways includes; {len(rooms)} launcher/ folders, {len(crossing)} "
      f"includes across them")
if checked == 0 or folders == 0 or "common" not in rooms:
    print("no includes, no runtime/src folders or no launcher/common found: wrong source dir?")
    sys.exit(1)
sys.exit(1 if upward or sideways or crossing else 0)
