"""A plan's call replayed from a CUDA graph against the same call issued eagerly: host time per
call and GPU time per call, on the CUDA backend (ranks share the GPU when there are more ranks
than GPUs).

    mpirun -np N python3 bench/graph_replay_bench.py [--calls 200 --reps 7]

Per case (an all-gather GEMM x [B, S, K] @ w [K, N] on the tp = N mesh; tp 1: a plain GEMM):
  eager    Plan.execute_pointers on torch's current stream (a created stream);
  graph    Graph.replay of Plan.capture_pointers on the same buffers;
  torch    torch.cuda.graph around the same execute_pointers call (cgemm inside the caller's
           capture), replayed with CUDAGraph.replay.
Host time: time.perf_counter around --calls calls (then a synchronize, not timed), per call,
the median of --reps. GPU time: CUDA events on the stream around --calls calls, per call, the
median of --reps; the three variants take turns within each rep. Every variant's output is
checked byte for byte against the eager call's first.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
import cgemm  # noqa: E402
import cgemm_torch as ct  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--calls", type=int, default=200, help="calls per timing")
parser.add_argument("--reps", type=int, default=7, help="timings per variant (the median)")
parser.add_argument("--json", default=None, help="also write the results to this file")
args = parser.parse_args()

world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
ctx = cgemm.Context(backend="cuda", gpu_sharing=world > torch.cuda.device_count())
torch.cuda.set_device(ct.local_device())
tp = ctx.tp
CASES = {  # name: (B, S, K, N), global
    "tiny": (1, 128 * tp, 256, 256 * tp),
    "demo": (2, 2048, 768, 3072),
}


def plan_for(b, s, k, n):
    collective = "all_gather" if tp > 1 else "none"
    spec = "('tpsp', None)" if tp > 1 else "(None, None)"
    return ctx.plan(lhs_shape=(b, s, k), rhs_shape=(n, k), dtype="bfloat16",
                    lhs_spec="(None, 'tpsp', None)" if tp > 1 else "(None, None, None)",
                    rhs_spec=spec, contracting_dims=((-1,), (1,)), collective=collective,
                    name="graph_bench")


def tensor(info, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(info.local_shape, generator=g, device="cuda", dtype=torch.bfloat16)


results = {}
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    for name, (b, s, k, n) in CASES.items():
        plan = plan_for(b, s, k, n)
        x, w = tensor(plan.lhs, 1 + ctx.rank), tensor(plan.rhs, 100 + ctx.rank)
        out = torch.empty(plan.out.local_shape, device="cuda", dtype=torch.bfloat16)
        sid = stream.cuda_stream

        def eager():
            plan.execute_pointers(x.data_ptr(), w.data_ptr(), None, out.data_ptr(), sid)

        eager()  # the algorithm is chosen (timed) outside any capture
        torch.cuda.synchronize()
        want = out.clone()
        graph = plan.capture_pointers(x.data_ptr(), w.data_ptr(), None, out.data_ptr(), sid)
        tgraph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tgraph, stream=stream):
            eager()
        variants = {"eager": eager, "graph": lambda: graph.replay(sid), "torch": tgraph.replay}
        for v, f in variants.items():
            out.fill_(float("nan"))
            f()
            torch.cuda.synchronize()
            if not torch.equal(out, want):
                sys.exit(f"rank {ctx.rank}: {name}: the {v} call's output differs from eager")
        host = {v: [] for v in variants}
        gpu = {v: [] for v in variants}
        for rep in range(args.reps):
            order = list(variants)[rep % 3:] + list(variants)[:rep % 3]
            for v in order:
                f = variants[v]
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    f()
                host[v].append((time.perf_counter() - t0) / args.calls * 1e6)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record(stream)
                for _ in range(args.calls):
                    f()
                end.record(stream)
                torch.cuda.synchronize()
                gpu[v].append(start.elapsed_time(end) / args.calls * 1e3)
        r = {v: {"host_us": statistics.median(host[v]), "gpu_us": statistics.median(gpu[v])}
             for v in variants}
        results[name] = {"shape": [b, s, k, n], "path": "tp %d" % tp, **r}
        graph.close()
        del tgraph
        plan.close()

if ctx.rank == 0:
    print(f"graph_replay_bench: tp {tp}, {torch.cuda.get_device_name()}, {args.calls} calls x "
          f"{args.reps} reps, medians (rank 0)")
    print(f"{'case':6} {'variant':7} {'host us/call':>13} {'GPU us/call':>12} {'x eager (GPU)':>14}")
    for name, r in results.items():
        for v in ("eager", "graph", "torch"):
            print(f"{name:6} {v:7} {r[v]['host_us']:13.1f} {r[v]['gpu_us']:12.1f} "
                  f"{r['eager']['gpu_us'] / r[v]['gpu_us']:14.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tp": tp, "device": torch.cuda.get_device_name(), "calls": args.calls,
                       "reps": args.reps, "cases": results}, f, indent=1)
ctx.close()
