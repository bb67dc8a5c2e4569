#!/usr/bin/env python3
"""PyTorch peer benchmark for cgemm: sequential vs async tensor parallelism.

This is a benchmark harness, not part of cgemm (nothing in cgemm imports or builds
it). It times what PyTorch alone does for the two collective GEMMs that cgemm
overlaps, on the same shapes as cgemm's benchmark configs, so that cgemm's
numbers have a peer to be read against.

How to run (one process per GPU; the TP group is the whole world, tp = world size):

    torchrun --nproc_per_node 2 bench/peers/torch_async_tp.py --out DIR
    torchrun --nproc_per_node 2 bench/peers/torch_async_tp.py --out DIR --cases standard,small
    python3 bench/peers/torch_async_tp.py --dry-run --tp 2     # shapes and memory plan; no torch

Environment. NVLink multicast (NVLS) must stay off on the H200 machine, so this
script needs NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1. Where a
variable is unset, the script sets it in os.environ at the very top, before torch
is imported (NCCL and PyTorch's symmetric memory read them later, when the
communicator and the first symmetric buffer are created), and prints that it did.
Where either one is set to another value, the script refuses to run (exit 2).

Problem layout. Per case, B = batch, S = seq, M = B*S tokens, K = hidden_in,
N = hidden_out, tp = world size. Activations are 2-D, tokens on rows (the
sequence-first [S, B, H] layout flattened; same FLOPs and bytes as cgemm's).

  all_gather (column-parallel, up projection):
      x local [M/tp, K] (sharded on tokens), w local [K, N/tp]
      out local [M, N/tp] = all_gather(x) @ w          per-GPU GEMM: M x N/tp x K
  reduce_scatter (row-parallel, down projection):
      x local [M, K/tp], w local [K/tp, N]
      out local [M/tp, N] = reduce_scatter_sum(x @ w)  per-GPU GEMM: M x N x K/tp

Cases (the AG and RS rows of a case are independent problems):

  standard   B 4, S 8192, AG 4096 -> 8192, RS 4096 -> 8192
             (cgemm's configs/te_bf16_all_gather.ini and te_bf16_reduce_scatter.ini)
  llama70b   B 1, S 8192, AG 8192 -> 28672 (up), RS 28672 -> 8192 (down)
  gpt3_175b  B 1, S 4096, AG 12288 -> 49152 (up), RS 49152 -> 12288 (down)
  small      B 1, S 2048, AG 4096 -> 4096,  RS 4096 -> 4096

What each number means (all bf16, milliseconds, per GPU):

  gemm_ms        torch.mm on the full local problem, no communication:
                 AG: [M, K] @ [K, N/tp];  RS: [M, K/tp] @ [K/tp, N]
  collective_ms  the NCCL collective alone: AG: dist.all_gather_into_tensor of x
                 ([M/tp, K] -> [M, K]); RS: dist.reduce_scatter_tensor (sum) of the
                 partial product ([M, N] -> [M/tp, N])
  sequential_ms  no overlap: AG: all-gather, then torch.mm; RS: torch.mm, then
                 reduce-scatter
  async_tp_ms    PyTorch async-TP (symmetric memory, micro-pipelined):
                 AG: torch.ops.symm_mem.fused_all_gather_matmul(x, [w], gather_dim=0,
                 group_name=...) with its default return_A=True (the gathered x is
                 produced too, as in the sequential version and as training needs
                 for the weight gradient);
                 RS: torch.ops.symm_mem.fused_matmul_reduce_scatter(x, w, "sum",
                 scatter_dim=0, group_name=...)
  tflops         per-GPU TFLOP/s of async-TP: 2*M*N*K/tp / async_tp_ms
  check          async-TP output vs the sequential output, once per problem:
                 "pass" when every element satisfies |a - s| <= atol + rtol*|s|
                 (bf16 defaults rtol 1.6e-2, atol 4e-2; see --rtol/--atol) and all
                 values are finite (and, for AG, the returned gathered x equals the
                 NCCL all-gather exactly); "FAIL" otherwise; "skipped" with --no-async.

Columns m, n, k in the CSV/JSON are the GLOBAL sizes M, N, K above (not the
per-GPU GEMM); local_m, local_n, local_k give the per-GPU GEMM shape.

Method. Each time is the median of --iters (default 20) timed runs after
--warmup (default 5) untimed ones, measured with CUDA events on the current
stream (the collectives' and async-TP's side streams are joined back to it
before the end event). Input sets (x, w, and the buffers each op reads) are
rotated so that the bytes touched between two uses of one set are well above
the H200's 60 MB L2 (at least 2 sets; see --rotate-mib). Before each timed run
the host synchronizes, a 1-element all-reduce aligns the ranks' GPUs, and a
short GPU sleep (--host-lead-cycles) lets the host enqueue the whole op before
the GPU reaches it, so Python launch overhead is not timed as idle GPU. Every
rank measures its own medians; the reported value is the MAX over ranks of each
median (all_reduce MAX), i.e. the slowest rank.

Outputs (rank 0): a table on stdout, DIR/torch_peers.csv (one row per problem)
and DIR/torch_peers.json ({"meta": {...}, "columns": [...], "rows": [...]}).
Exit status: 0 ok, 3 when a check fails, 2 on bad options/environment, 1 on
missing or incompatible PyTorch APIs.
"""

from __future__ import annotations

import os

# --- must run before torch is imported (see the docstring) --------------------
REQUIRED_ENV = (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"))
ENV_SET_BY_SCRIPT = []
ENV_CONFLICTS = []
for _name, _value in REQUIRED_ENV:
    _current = os.environ.get(_name)
    if _current is None:
        os.environ[_name] = _value
        ENV_SET_BY_SCRIPT.append(_name)
    elif _current != _value:
        ENV_CONFLICTS.append((_name, _current, _value))

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass  # noqa: E402

MIB = 1 << 20
BF16_BYTES = 2

# name -> (batch, seq, ((collective, hidden_in, hidden_out), ...))
CASES = {
    # The standard shape (as configs/te_bf16_*.ini): each GPU's GEMM is 32768 x 4096 x 4096 for both.
    "standard": (4, 8192, (("all_gather", 4096, 8192), ("reduce_scatter", 8192, 4096))),
    "llama70b": (1, 8192, (("all_gather", 8192, 28672), ("reduce_scatter", 28672, 8192))),
    "gpt3_175b": (1, 4096, (("all_gather", 12288, 49152), ("reduce_scatter", 49152, 12288))),
    "small": (1, 2048, (("all_gather", 4096, 4096), ("reduce_scatter", 4096, 4096))),
}

COLUMNS = ["case", "collective", "m", "n", "k", "tp", "gemm_ms", "collective_ms",
           "sequential_ms", "async_tp_ms", "tflops", "check"]
EXTRA_COLUMNS = ["local_m", "local_n", "local_k", "max_abs_err", "mismatches"]


class ApiError(RuntimeError):
    """A PyTorch API this harness needs is missing or has another signature."""


@dataclass(frozen=True)
class Problem:
    case: str
    collective: str  # "all_gather" or "reduce_scatter"
    batch: int
    seq: int
    k: int  # hidden_in (global)
    n: int  # hidden_out (global)
    tp: int

    @property
    def m(self) -> int:
        return self.batch * self.seq

    @property
    def is_ag(self) -> bool:
        return self.collective == "all_gather"

    def x_shape(self):
        return (self.m // self.tp, self.k) if self.is_ag else (self.m, self.k // self.tp)

    def w_shape(self):
        return (self.k, self.n // self.tp) if self.is_ag else (self.k // self.tp, self.n)

    def out_shape(self):
        return (self.m, self.n // self.tp) if self.is_ag else (self.m // self.tp, self.n)

    def gemm_shape(self):
        """Per-GPU GEMM (m, n, k)."""
        return (self.m, self.n // self.tp, self.k) if self.is_ag else (self.m, self.n, self.k // self.tp)

    def extra_shape(self):
        """The per-set buffer the standalone op reads: the full x (AG GEMM alone)
        or the full partial product (RS collective alone)."""
        return (self.m, self.k) if self.is_ag else (self.m, self.n)

    def flops_per_gpu(self) -> float:
        m, n, k = self.gemm_shape()
        return 2.0 * m * n * k

    def check_divisible(self):
        bad = []
        if self.m % self.tp:
            bad.append(f"M={self.m}")
        if self.is_ag and self.n % self.tp:
            bad.append(f"N={self.n}")
        if not self.is_ag and self.k % self.tp:
            bad.append(f"K={self.k}")
        if bad:
            raise ValueError(f"{self.case}/{self.collective}: {', '.join(bad)} not divisible by tp={self.tp}")


def numel(shape) -> int:
    return math.prod(shape)


def plan_sets(p: Problem, rotate_bytes: int, min_sets: int) -> int:
    """Number of rotated input sets: at least min_sets, and enough that the inputs
    of all sets together reach rotate_bytes."""
    set_bytes = (numel(p.x_shape()) + numel(p.w_shape())) * BF16_BYTES
    return max(min_sets, math.ceil(rotate_bytes / set_bytes))


def build_problems(case_names, tp):
    problems = []
    for name in case_names:
        batch, seq, gemms = CASES[name]
        for collective, k, n in gemms:
            p = Problem(name, collective, batch, seq, k, n, tp)
            p.check_divisible()
            problems.append(p)
    return problems


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="PyTorch sequential vs async-TP collective GEMMs (peer benchmark for cgemm). "
                    "Launch with: torchrun --nproc_per_node 2 bench/peers/torch_async_tp.py --out DIR",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--out", help="output folder for torch_peers.csv / torch_peers.json (rank 0 writes)")
    ap.add_argument("--cases", default="all",
                    help=f"comma-separated subset of {','.join(CASES)} (or 'all')")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs per measurement")
    ap.add_argument("--iters", type=int, default=20, help="timed runs per measurement (median reported)")
    ap.add_argument("--rotate-mib", type=int, default=256,
                    help="total MiB of rotated input sets per problem (L2 is 60 MB)")
    ap.add_argument("--min-sets", type=int, default=2, help="minimum number of rotated input sets")
    ap.add_argument("--host-lead-cycles", type=int, default=2_000_000,
                    help="GPU sleep (clock cycles, ~1 ms at 2 GHz) before each timed run, untimed; 0 = none")
    ap.add_argument("--rtol", type=float, default=1.6e-2, help="check: relative tolerance (bf16)")
    ap.add_argument("--atol", type=float, default=4e-2, help="check: absolute tolerance (bf16)")
    ap.add_argument("--seed", type=int, default=1234, help="base seed (rank is added)")
    ap.add_argument("--no-async", action="store_true",
                    help="skip the async-TP ops (async_tp_ms and tflops become NaN, check 'skipped')")
    ap.add_argument("--no-symm-mem-enable", action="store_true",
                    help="do not call torch.distributed._symmetric_memory.enable_symm_mem_for_group "
                         "(deprecated, and said to be unneeded, from PyTorch 2.11)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the problems and the memory plan and exit; needs neither torch nor GPUs")
    ap.add_argument("--tp", type=int, default=None,
                    help="tp for --dry-run (default: $WORLD_SIZE or 2); ignored otherwise")
    args = ap.parse_args(argv)

    names = list(CASES) if args.cases.strip() in ("", "all") else \
        [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    args.case_names = list(dict.fromkeys(names))  # dedupe, keep order
    if args.warmup < 0 or args.iters < 1 or args.min_sets < 1 or args.rotate_mib < 0:
        ap.error("--warmup >= 0, --iters >= 1, --min-sets >= 1, --rotate-mib >= 0")
    if not args.dry_run and not args.out:
        ap.error("--out DIR is required (except with --dry-run)")
    return args


def dry_run(args) -> int:
    tp = args.tp or int(os.environ.get("WORLD_SIZE", "2"))
    try:
        problems = build_problems(args.case_names, tp)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"dry run: tp={tp}, warmup={args.warmup}, iters={args.iters}, "
          f"rotate >= {args.rotate_mib} MiB, >= {args.min_sets} sets")
    hdr = f"{'case':<10} {'coll':<14} {'M':>6} {'N':>6} {'K':>6}  {'x local':>14} {'w local':>14} " \
          f"{'out local':>14} {'GEMM/GPU (m,n,k)':>22} {'sets':>4} {'MiB/set':>8} {'GFLOP/GPU':>10}"
    print(hdr)
    for p in problems:
        sets = plan_sets(p, args.rotate_mib * MIB, args.min_sets)
        mib = (numel(p.x_shape()) + numel(p.w_shape()) + numel(p.extra_shape())) * BF16_BYTES / MIB
        print(f"{p.case:<10} {p.collective:<14} {p.m:>6} {p.n:>6} {p.k:>6}  {str(p.x_shape()):>14} "
              f"{str(p.w_shape()):>14} {str(p.out_shape()):>14} {str(p.gemm_shape()):>22} {sets:>4} "
              f"{mib:>8.0f} {p.flops_per_gpu() / 1e9:>10.0f}")
    print("environment:", ", ".join(f"{k}={os.environ[k]}" for k, _ in REQUIRED_ENV),
          f"(set by this script: {ENV_SET_BY_SCRIPT or 'none'})")
    return 0


# ----------------------------------------------------------------------------------
# Everything below needs torch; it is imported inside main() only.
# ----------------------------------------------------------------------------------

def _type_name(t) -> str:
    """'Tensor[]' for both spellings of a list type ('Tensor[]', 'List[Tensor]')."""
    name = str(t).replace(" ", "")
    if name.startswith("List[") and name.endswith("]"):
        name = name[5:-1] + "[]"
    return name


def resolve_api(torch, dist):
    """Finds the async-TP ops and the world group's name; raises ApiError with a
    clear message when this PyTorch does not have them."""
    api = {}
    try:
        import torch.distributed._symmetric_memory as symm_mem  # registers torch.ops.symm_mem.*
    except ImportError as e:
        raise ApiError(f"torch.distributed._symmetric_memory is missing ({e}); async-TP needs "
                       f"PyTorch >= 2.5, this is {torch.__version__}") from e
    api["symm_mem"] = symm_mem
    for op in ("fused_all_gather_matmul", "fused_matmul_reduce_scatter"):
        try:
            packet = getattr(torch.ops.symm_mem, op)
        except (AttributeError, RuntimeError) as e:
            raise ApiError(f"torch.ops.symm_mem.{op} is missing in PyTorch {torch.__version__} ({e})") from e
        api[op] = packet
        try:
            api[op + "_schema"] = str(packet.default._schema)
        except Exception:  # informative only
            api[op + "_schema"] = "unknown"
    # Expected schemas (PyTorch main, torch/distributed/_symmetric_memory/__init__.py):
    #   fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name,
    #                           *, bool return_A=True) -> (Tensor?, Tensor[])
    #   fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim,
    #                               str group_name) -> Tensor
    # The harness passes these positionally, so only their number and types matter.
    expected = {"fused_all_gather_matmul": ["Tensor", "Tensor[]", "int", "str"],
                "fused_matmul_reduce_scatter": ["Tensor", "Tensor", "str", "int", "str"]}
    for op, types in expected.items():
        try:
            arguments = api[op].default._schema.arguments
            positional = [_type_name(a.type) for a in arguments if not a.kwarg_only]
        except Exception:  # cannot introspect: let the first call tell
            continue
        if positional != types:
            raise ApiError(f"torch.ops.symm_mem.{op} has schema '{api[op + '_schema']}'; this harness "
                           f"calls it with positional arguments of types {types}; adapt the call")

    pg = dist.group.WORLD
    name = getattr(pg, "group_name", None)
    if not name:
        getter = getattr(dist.distributed_c10d, "_get_process_group_name", None)
        name = getter(pg) if getter else None
    if not name:
        raise ApiError("cannot find the world process group's name (ProcessGroup.group_name)")
    api["group_name"] = name
    return api


def enable_symm_mem(api, skip: bool) -> str:
    fn = getattr(api["symm_mem"], "enable_symm_mem_for_group", None)
    if skip:
        return "not called (--no-symm-mem-enable)"
    if fn is None:
        return "absent in this PyTorch (removed; not needed)"
    with warnings.catch_warnings():
        # Deprecated (FutureWarning) from 2.11, still what the async-TP pass checks for.
        warnings.simplefilter("ignore", FutureWarning)
        fn(api["group_name"])
    return "called"


class Runner:
    def __init__(self, torch, dist, api, args, rank, world):
        self.torch, self.dist, self.api, self.args = torch, dist, api, args
        self.rank, self.world = rank, world
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.flag = torch.zeros(1, device=self.device)
        self.sleep = getattr(torch.cuda, "_sleep", None)

    # -- timing -----------------------------------------------------------------
    def align(self):
        """Aligns the ranks' GPUs and gives the host a head start (all untimed)."""
        self.dist.all_reduce(self.flag)
        if self.sleep is not None and self.args.host_lead_cycles > 0:
            self.sleep(self.args.host_lead_cycles)

    def measure(self, fn, sets):
        torch = self.torch
        n = len(sets)
        for i in range(self.args.warmup):
            fn(sets[i % n])
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        times = []
        for i in range(self.args.iters):
            s = sets[(self.args.warmup + i) % n]
            torch.cuda.synchronize()
            self.align()
            start.record()
            out = fn(s)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            del out
        return statistics.median(times)

    # -- ops ----------------------------------------------------------------------
    def make_ops(self, p: Problem):
        torch, dist, api = self.torch, self.dist, self.api
        gname = api["group_name"]
        ag_op, rs_op = api["fused_all_gather_matmul"], api["fused_matmul_reduce_scatter"]
        opts = dict(device=self.device, dtype=torch.bfloat16)

        if p.is_ag:
            def gemm(s):  # the full local GEMM: [M, K] @ [K, N/tp]
                return torch.mm(s["x_full"], s["w"])

            def collective(s):
                g = torch.empty((p.m, p.k), **opts)
                dist.all_gather_into_tensor(g, s["x"])
                return g

            def sequential(s):
                g = torch.empty((p.m, p.k), **opts)
                dist.all_gather_into_tensor(g, s["x"])
                return g, torch.mm(g, s["w"])

            def async_tp(s):
                # (A_shard, Bs, gather_dim, group_name); return_A keeps its default (True)
                res = ag_op(s["x"], [s["w"]], 0, gname)
                if not (isinstance(res, (tuple, list)) and len(res) == 2 and isinstance(res[1], (tuple, list))):
                    raise ApiError(f"fused_all_gather_matmul returned {type(res)}; expected (A, [out])")
                return res[0], res[1][0]
        else:
            def gemm(s):  # the full local GEMM: [M, K/tp] @ [K/tp, N]
                return torch.mm(s["x"], s["w"])

            def collective(s):
                o = torch.empty(p.out_shape(), **opts)
                dist.reduce_scatter_tensor(o, s["partial"], op=dist.ReduceOp.SUM)
                return o

            def sequential(s):
                part = torch.mm(s["x"], s["w"])
                o = torch.empty(p.out_shape(), **opts)
                dist.reduce_scatter_tensor(o, part, op=dist.ReduceOp.SUM)
                return None, o

            def async_tp(s):
                # (A, B, reduce_op, scatter_dim, group_name)
                return None, rs_op(s["x"], s["w"], "sum", 0, gname)
        return gemm, collective, sequential, async_tp

    def make_sets(self, p: Problem):
        torch = self.torch
        n_sets = plan_sets(p, self.args.rotate_mib * MIB, self.args.min_sets)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(self.args.seed + 7919 * self.rank)
        opts = dict(device=self.device, dtype=torch.bfloat16, generator=gen)
        w_scale = 1.0 / math.sqrt(p.k)  # outputs ~ N(0, 1)
        sets = []
        for _ in range(n_sets):
            s = {"x": torch.randn(p.x_shape(), **opts),
                 "w": torch.randn(p.w_shape(), **opts).mul_(w_scale)}
            if p.is_ag:
                s["x_full"] = torch.randn(p.extra_shape(), **opts)
            else:
                s["partial"] = torch.randn(p.extra_shape(), **opts)
            sets.append(s)
        return sets

    def check(self, p: Problem, sets, sequential, async_tp):
        """async-TP vs sequential on set 0; the verdict is agreed over all ranks."""
        torch, dist = self.torch, self.dist
        s = sets[0]
        ref_a, ref = sequential(s)
        got_a, got = async_tp(s)
        torch.cuda.synchronize()
        counts = torch.zeros(3, dtype=torch.float64, device=self.device)  # mismatches, nonfinite, shape/A errors
        maxerr = torch.zeros(1, dtype=torch.float64, device=self.device)
        if tuple(got.shape) != tuple(ref.shape):
            counts[2] += 1
            if self.rank == 0:
                print(f"  check: async-TP output shape {tuple(got.shape)} != {tuple(ref.shape)}", flush=True)
        else:
            r, g = ref.float(), got.float()
            diff = (g - r).abs()
            counts[0] = (diff > self.args.atol + self.args.rtol * r.abs()).sum().double()
            counts[1] = (~torch.isfinite(g)).sum().double()
            maxerr[0] = diff.max().double()
            del r, g, diff
        if p.is_ag and got_a is not None:
            if tuple(got_a.shape) != tuple(ref_a.shape) or not torch.equal(got_a, ref_a):
                counts[2] += 1
        dist.all_reduce(counts, op=dist.ReduceOp.SUM)
        dist.all_reduce(maxerr, op=dist.ReduceOp.MAX)
        mism, nonfinite, other = (int(v) for v in counts.tolist())
        ok = mism == 0 and nonfinite == 0 and other == 0
        return ("pass" if ok else "FAIL"), float(maxerr.item()), mism + nonfinite + other

    def run_problem(self, p: Problem):
        torch, dist = self.torch, self.dist
        sets = self.make_sets(p)
        gemm, collective, sequential, async_tp = self.make_ops(p)
        if self.args.no_async:
            check, maxerr, bad = "skipped", float("nan"), 0
        else:
            # First async-TP call: also allocates and rendezvouses the symmetric workspace.
            check, maxerr, bad = self.check(p, sets, sequential, async_tp)
        t = [self.measure(gemm, sets), self.measure(collective, sets), self.measure(sequential, sets),
             float("nan") if self.args.no_async else self.measure(async_tp, sets)]
        med = torch.tensor(t, dtype=torch.float64, device=self.device)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)  # slowest rank (NaN stays NaN)
        gemm_ms, coll_ms, seq_ms, async_ms = med.tolist()
        del sets
        torch.cuda.empty_cache()
        lm, ln, lk = p.gemm_shape()
        tflops = p.flops_per_gpu() / (async_ms * 1e-3) / 1e12 if async_ms == async_ms else float("nan")
        return {"case": p.case, "collective": p.collective, "m": p.m, "n": p.n, "k": p.k, "tp": p.tp,
                "gemm_ms": gemm_ms, "collective_ms": coll_ms, "sequential_ms": seq_ms,
                "async_tp_ms": async_ms, "tflops": tflops, "check": check,
                "local_m": lm, "local_n": ln, "local_k": lk, "max_abs_err": maxerr, "mismatches": bad}


def nccl_version(torch) -> str:
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return "unknown"
    return ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


def fmt(v, spec):
    """format(v, spec), with NaN printed as 'nan' in the same width."""
    if isinstance(v, float) and v != v:
        return format("nan", ">" + spec.split(".")[0])
    return format(v, spec)


def print_table(rows):
    hdr = (f"{'case':<10} {'collective':<14} {'M':>6} {'N':>6} {'K':>6} {'gemm':>7} {'coll':>7} "
           f"{'seq':>7} {'async':>7} {'async/seq':>9} {'TFLOP/s':>8} {'max err':>8}  check")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        ratio = r["async_tp_ms"] / r["sequential_ms"] if r["sequential_ms"] else float("nan")
        print(f"{r['case']:<10} {r['collective']:<14} {r['m']:>6} {r['n']:>6} {r['k']:>6} "
              f"{fmt(r['gemm_ms'], '7.3f')} {fmt(r['collective_ms'], '7.3f')} {fmt(r['sequential_ms'], '7.3f')} "
              f"{fmt(r['async_tp_ms'], '7.3f')} {fmt(ratio, '9.3f')} {fmt(r['tflops'], '8.1f')} "
              f"{fmt(r['max_abs_err'], '8.4f')}  {r['check']}")
    print("times: ms, median of the timed runs, max over ranks; m/n/k global (M = batch*seq, "
          "N = hidden_out, K = hidden_in); TFLOP/s per GPU of async-TP")


def write_outputs(out_dir, rows, meta):
    os.makedirs(out_dir, exist_ok=True)
    csv_path = os.path.join(out_dir, "torch_peers.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS + EXTRA_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    json_path = os.path.join(out_dir, "torch_peers.json")
    with open(json_path, "w") as f:
        # NaN is written as null, so the file stays strict JSON.
        clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]
        json.dump({"meta": meta, "columns": COLUMNS + EXTRA_COLUMNS, "rows": clean}, f, indent=2)
        f.write("\n")
    return csv_path, json_path


def main(argv=None) -> int:
    args = parse_args(argv)
    if ENV_CONFLICTS:
        for name, cur, want in ENV_CONFLICTS:
            print(f"error: {name}={cur} is set, but this benchmark requires {name}={want} "
                  f"(NVLink multicast must stay off)", file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(args)

    missing = [v for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK") if v not in os.environ]
    if missing:
        print(f"error: {missing} not set; launch with torchrun --nproc_per_node N "
              f"bench/peers/torch_async_tp.py --out DIR (or use --dry-run)", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"error: PyTorch is not importable here ({e}); --dry-run works without it", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("error: no CUDA device visible", file=sys.stderr)
        return 1

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    try:
        dist.init_process_group("nccl", device_id=device)
    except TypeError:  # PyTorch without the device_id argument
        dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    status = 0
    try:
        if world < 2 and not args.no_async:
            # One GPU still measures torch.mm and the (trivial) collectives: with --no-async.
            raise ValueError("async-TP needs at least 2 ranks (tp = world size); "
                             "use --no-async for GEMM-alone figures on one GPU")
        problems = build_problems(args.case_names, world)
        api = resolve_api(torch, dist)
        symm_enable = ("skipped (--no-async)" if args.no_async
                       else enable_symm_mem(api, args.no_symm_mem_enable))
        if rank == 0:
            if ENV_SET_BY_SCRIPT:
                print(f"note: set {', '.join(f'{n}={os.environ[n]}' for n in ENV_SET_BY_SCRIPT)} "
                      f"in os.environ before importing torch (it was unset)", flush=True)
            nccl = nccl_version(torch)
            print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL {nccl}), "
                  f"{world} x {torch.cuda.get_device_name(device)}, tp={world}, group '{api['group_name']}'",
                  flush=True)
            print(f"symm_mem: enable_symm_mem_for_group {symm_enable}; "
                  f"{'async-TP skipped' if args.no_async else 'async-TP on'}", flush=True)
            print(f"schema: {api['fused_all_gather_matmul_schema']}", flush=True)
            print(f"schema: {api['fused_matmul_reduce_scatter_schema']}", flush=True)
            if getattr(torch.cuda, "_sleep", None) is None:
                print("note: torch.cuda._sleep missing; timed runs start without a host lead", flush=True)
        runner = Runner(torch, dist, api, args, rank, world)
        rows = []
        for p in problems:
            if rank == 0:
                print(f"running {p.case}/{p.collective}: M={p.m} N={p.n} K={p.k} tp={p.tp}, "
                      f"{plan_sets(p, args.rotate_mib * MIB, args.min_sets)} input sets", flush=True)
            rows.append(runner.run_problem(p))
        if rank == 0:
            print()
            print_table(rows)
            meta = {
                "torch": torch.__version__, "cuda": torch.version.cuda,
                "nccl": nccl_version(torch),
                "device": torch.cuda.get_device_name(device), "world_size": world,
                "env": {n: os.environ.get(n) for n, _ in REQUIRED_ENV},
                "env_set_by_script": ENV_SET_BY_SCRIPT,
                "enable_symm_mem_for_group": symm_enable,
                "schemas": {op: api[op + "_schema"]
                            for op in ("fused_all_gather_matmul", "fused_matmul_reduce_scatter")},
                "warmup": args.warmup, "iters": args.iters, "rotate_mib": args.rotate_mib,
                "min_sets": args.min_sets, "host_lead_cycles": args.host_lead_cycles,
                "rtol": args.rtol, "atol": args.atol, "seed": args.seed,
                "dtype": "bf16",
                "notes": "m, n, k are global (M = batch*seq, N = hidden_out, K = hidden_in); "
                         "local_m/n/k is the per-GPU GEMM; times in ms are medians, max over ranks",
            }
            paths = write_outputs(args.out, rows, meta)
            print(f"wrote {paths[0]} and {paths[1]}")
        if any(r["check"] == "FAIL" for r in rows):
            status = 3
    except ValueError as e:
        if rank == 0:
            print(f"error: {e}", file=sys.stderr)
        status = 2
    except ApiError as e:
        print(f"[rank {rank}] API error: {e}", file=sys.stderr)
        status = 1
    # Reached only when every rank took the same path (these errors are deterministic);
    # any other exception propagates without a barrier, so that a rank left waiting in a
    # collective cannot hang this one: torchrun then stops the job.
    dist.barrier()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
