#!/usr/bin/env python3
"""The include graph keeps its layers: core <- sharding, gemm, collective <- runtime <- capi,
launcher.
Every #include "cgemm/LAYER/..." in a layer's sources must name that layer or one below it.
Inside runtime/src, the folders keep a layer order of their own (RUNTIME_SRC_ORDER below, lowest
first; folders on one level are side by side):
    root < program < grouped, kinds < cpu, cuda, quantization, fsdp < plan < layers
A file includes headers of its own folder, of the files at runtime/src's root (what two folders
share: transport_table, elementwise_math, overloaded), and of folders on lower levels only: never
a folder on its own level or above, so no cycle can form; the root's files include no folder.
A header of the file's own directory is included by its bare name ("engine.hpp"), any other by its
path from runtime/src ("program/engine.hpp"; no "../"); a folder new to runtime/src is refused
until it has a level.
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

# runtime/src's folders by level, lowest first (the root's files: level 0, below every folder).
RUNTIME_SRC_ORDER = [
    {"program"},                       # Program, the engine, Operands
    {"grouped", "kinds"},              # the grouped GEMM (plan, rows, loop); the collective kinds
    {"cpu", "cuda", "quantization", "fsdp"},  # the backends; quantized and FSDP GEMMs as ops
    {"plan"},                          # GemmPlan, plan_gemm, Context, options
    {"layers"},                        # the training-side users of plans
]
LEVEL = {folder: n + 1 for n, folders in enumerate(RUNTIME_SRC_ORDER) for folder in folders}

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

# runtime/src's folders in their layer order.
runtime_src = os.path.abspath(os.path.join(root, "runtime", "src"))
folders = sorted(d for d in os.listdir(runtime_src) if os.path.isdir(os.path.join(runtime_src, d)))
unordered = [f"runtime/src/{d}/" for d in folders if d not in LEVEL]
sideways, relative = [], []


def room(path):
    """The runtime/src folder `path` lies in, or "." for the root's files."""
    parts = os.path.relpath(path, runtime_src).split(os.sep)
    return parts[0] if len(parts) > 1 else "."


for folder, path, number, line, m in includes(runtime_src, r'\s*#\s*include\s+"([^"]+)"'):
    name = m.group(1)
    beside = os.path.abspath(os.path.join(folder, name))
    from_src = os.path.abspath(os.path.join(runtime_src, name))
    if os.path.exists(beside) and ("/" not in name or beside == from_src):
        target = beside
    elif os.path.exists(beside):
        relative.append(where(path, number, line))  # "../x.hpp", "sub/x.hpp"
        continue
    elif os.path.exists(from_src):
        target = from_src
    else:
        continue  # not a runtime/src header (cgemm/..., a library's)
    here, there = room(path), room(target)
    if there == here or there == ".":
        continue
    if here == "." or here not in LEVEL or there not in LEVEL or LEVEL[there] >= LEVEL[here]:
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
for d in unordered:
    print("runtime/src folder without a level in check_layers.py's RUNTIME_SRC_ORDER:", d)
for s in sideways:
    print("include against runtime/src's layer order (a folder includes the root and lower "
          "levels only):", s)
for r in relative:
    print("runtime/src include not by its path from runtime/src (or by its bare name beside the "
          "file):", r)
for c in crossing:
    print("include across launcher/ rooms (common/ includes no program; programs only common/):",
          c)
print(f"{checked} includes checked, {len(upward)} upward; {len(folders)} runtime/src folders, "
      f"{len(sideways)} includes against their order, {len(relative)} by a relative path; "
      f"{len(rooms)} launcher/ folders, {len(crossing)} includes across them")
if checked == 0 or not folders or "common" not in rooms:
    print("no includes, no runtime/src folders or no launcher/common found: wrong source dir?")
    sys.exit(1)
sys.exit(1 if upward or unordered or sideways or relative or crossing else 0)
