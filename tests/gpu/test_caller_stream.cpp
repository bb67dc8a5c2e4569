// The CUDA backend on the caller's terms, under mpirun (ranks may share a GPU):
//  - GemmPlan::execute(..., stream) on a caller-created non-blocking stream: the lhs is written
//    on that stream behind a long queue of memsets right before the call, the output poisoned
//    there too, and copied to pinned host memory on it right after; only that stream is
//    synchronized. A missing wait at either end races (the GEMM reads the poisoned lhs, or the
//    copy reads the poisoned output) and the comparison with the fp64 reference fails.
//  - A borrowed NCCL communicator (BackendOptions::nccl_comm) over the TP group, made here with
//    ncclCommInitRank from an MPI bootstrap: a collective GEMM on it is right, the backend says
//    it borrows it, and the communicator still works after the Context is gone. NCCL refuses
//    two ranks of one communicator on one GPU, so these cases skip when ranks share a GPU (run
//    them with one rank per GPU: mpirun -np 1 on a one-GPU machine). A communicator over the
//    wrong group is refused with one message on every rank (2 ranks or more), and so are
//    communicators of the right size and ranks over the wrong members (4 ranks on 4 GPUs).
//  - The call inside the caller's own CUDA-graph capture: the graph replays the eager bytes; a
//    refusal records nothing and leaves the caller's capture valid.
// Every case skips without a GPU.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

bool all_have_gpu() {
  int ok = cuda_backend_available() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

void check(cudaError_t rc, const char* call) {
  if (rc != cudaSuccess) {
    throw Error(std::string(call) + " failed: " + cudaGetErrorString(rc));
  }
}

void check_nccl(ncclResult_t rc, const char* call) {
  if (rc != ncclSuccess) throw Error(std::string(call) + " failed: " + ncclGetErrorString(rc));
}

// This rank's local rank and the number of ranks on its host.
std::pair<int, int> local_rank_size() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int r = 0, s = 1;
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &s);
  MPI_Comm_free(&node);
  return {r, s};
}

// Whether some host of the job has more ranks than GPUs (the same answer on every rank).
bool ranks_share_a_gpu() {
  int shared = local_rank_size().second > cuda_device_count() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return shared == 1;
}

// A row-major slice [offset, offset + local) of a global tensor.
std::vector<float> slice(const std::vector<float>& global, const Shape& gshape, const Shape& local,
                         const Shape& offset) {
  std::vector<float> out(static_cast<size_t>(num_elements(local)));
  const size_t nd = gshape.size();
  std::vector<int64_t> idx(nd, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t flat = 0;
    for (size_t d = 0; d < nd; ++d) flat = flat * gshape[d] + offset[d] + idx[d];
    out[i] = global[static_cast<size_t>(flat)];
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < local[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<float> normals(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Pinned host memory (the copies on the caller's stream are then truly asynchronous).
struct Pinned {
  float* p = nullptr;
  explicit Pinned(size_t count) {
    check(cudaMallocHost(reinterpret_cast<void**>(&p), count * sizeof(float)), "cudaMallocHost");
  }
  ~Pinned() { cudaFreeHost(p); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};

enum class Path { kDefault, kOverlapped, kSequential };

// The all-gather GEMM x [B, S, K] @ w [K, N] of the standard layout, `calls` times with fresh
// lhs values, each on `stream` as the header describes: poison, a long memset queue, the lhs
// copy, the call, the output copy, then a synchronize of `stream` only. Returns the failures.
int run_on_caller_stream(Context& ctx, Path path, int calls, uint64_t seed) {
  const int tp = ctx.comms().tp();
  const int64_t batch = 2, seq = 128 * tp, k = 512, n = 128 * tp;
  GemmPlan plan(
      ctx, tensor_sequence_parallel_gemm(ctx, "caller_stream", CollectiveOp::kAllGather, batch, seq,
                                         k, n, DType::kFloat32, false, false));
  const Shape xg{batch, seq, k}, wg{k, n}, og{batch, seq, n};
  const std::vector<float> w_global = normals(static_cast<size_t>(k * n), seed);
  const std::vector<float> w = slice(w_global, wg, plan.rhs_local(), plan.rhs_offset());
  const auto x_count = static_cast<size_t>(num_elements(plan.lhs_local()));
  const auto out_count = static_cast<size_t>(num_elements(plan.out_local()));

  Device x_dev(x_count * 4), w_dev(w.size() * 4), out_dev(out_count * 4);
  // The queue ahead of the lhs copy: 16 memsets of 512 MiB (milliseconds on any GPU), long
  // enough that a GEMM not waiting for the caller's stream reads the poisoned lhs.
  const size_t delay_bytes = size_t{512} << 20;
  Device delay(delay_bytes);
  check(cudaMemcpy(w_dev.p, w.data(), w.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy(w)");
  Pinned x_host(x_count), out_host(out_count);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

  int failures = 0;
  for (int call = 0; call < calls; ++call) {
    const std::vector<float> x_global =
        normals(static_cast<size_t>(num_elements(xg)), seed + 1 + static_cast<uint64_t>(call));
    const std::vector<float> x = slice(x_global, xg, plan.lhs_local(), plan.lhs_offset());
    std::memcpy(x_host.p, x.data(), x_count * 4);
    // 0xff bytes: a NaN in every float.
    check(cudaMemsetAsync(x_dev.p, 0xff, x_count * 4, stream), "cudaMemsetAsync(x poison)");
    check(cudaMemsetAsync(out_dev.p, 0xff, out_count * 4, stream), "cudaMemsetAsync(out poison)");
    for (int i = 0; i < 16; ++i) {
      check(cudaMemsetAsync(delay.p, i, delay_bytes, stream), "cudaMemsetAsync(delay)");
    }
    check(cudaMemcpyAsync(x_dev.p, x_host.p, x_count * 4, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync(x)");
    const Operands ops(x_dev.p, w_dev.p, nullptr, out_dev.p);
    switch (path) {
      case Path::kDefault:
        plan.execute(ops, stream);
        break;
      case Path::kOverlapped:
        plan.execute_overlapped(ops, stream);
        break;
      case Path::kSequential:
        plan.execute_sequential(ops, stream);
        break;
    }
    check(cudaMemcpyAsync(out_host.p, out_dev.p, out_count * 4, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync(out)");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(caller's stream)");

    // fp64 reference of this rank's output shard.
    const Shape& ol = plan.out_local();
    const Shape oo = plan.out_offset();
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t b = 0; b < ol[0]; ++b) {
      for (int64_t s = 0; s < ol[1]; ++s) {
        for (int64_t j = 0; j < ol[2]; ++j) {
          double acc = 0.0, mag = 0.0;
          const int64_t gb = oo[0] + b, gs = oo[1] + s, gj = oo[2] + j;
          for (int64_t kk = 0; kk < k; ++kk) {
            const double a = x_global[static_cast<size_t>((gb * seq + gs) * k + kk)];
            const double v = w_global[static_cast<size_t>(kk * n + gj)];
            acc += a * v;
            mag += std::abs(a * v);
          }
          const double got = out_host.p[static_cast<size_t>((b * ol[1] + s) * ol[2] + j)];
          const double err = std::abs(got - acc);
          // fp32 products summed in fp32: k + 2 roundings of at most eps relative to sum |a w|.
          const double bound = static_cast<double>(k + 2) * 1.1920929e-7 * mag;
          if (!(err <= bound)) {  // NaN (a poisoned element) fails here
            ++bad;
            worst = std::isnan(err) ? err : std::max(worst, err / bound);
          }
        }
      }
    }
    if (bad > 0) {
      ADD_FAILURE() << "rank " << world_rank() << ", call " << call << " (" << plan.path_summary()
                    << "): " << bad << " of " << out_count
                    << " output elements wrong (worst error / bound " << worst
                    << "; NaN: the call was not ordered on the caller's stream)";
      ++failures;
    }
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return failures;
}

// The CUDA backend on a borrowed communicator (one rank per GPU: no gpu_sharing).
Context make_context(void* nccl_comm, int dp = 1) {
  BackendOptions b;
  b.kind = BackendKind::kCuda;
  b.nccl_comm = nccl_comm;
  return Context(MPI_COMM_WORLD, MeshConfig{.dp = dp, .tp = 0}, b, OverlapOptions{});
}

TEST(CallerStream, OrderedBeforeAndAfterWithoutDeviceSync) {
  if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  Context ctx(MPI_COMM_WORLD, MeshConfig{.dp = 1, .tp = 0},
              BackendOptions{.kind = BackendKind::kCuda, .gpu_sharing = true}, OverlapOptions{});
  if (world_rank() == 0) std::printf("%s\n", ctx.backend().describe().c_str());
  EXPECT_EQ(run_on_caller_stream(ctx, Path::kOverlapped, 3, 11), 0);
  EXPECT_EQ(run_on_caller_stream(ctx, Path::kSequential, 3, 22), 0);
  EXPECT_EQ(run_on_caller_stream(ctx, Path::kDefault, 2, 33), 0);
}

// The call issued inside the caller's own capture (cudaStreamBeginCapture on its stream, as
// torch.cuda.graph does): the caller's graph, launched 5 times into a poisoned output, gives the
// eager call's bytes; a call that cannot be captured (a trace being taken) throws before it
// records anything, and the caller's capture is still valid (it ends into an empty graph).
TEST(CallerStream, InsideTheCallersCapture) {
  if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  Context ctx(MPI_COMM_WORLD, MeshConfig{.dp = 1, .tp = 0},
              BackendOptions{.kind = BackendKind::kCuda, .gpu_sharing = true}, OverlapOptions{});
  const int tp = ctx.comms().tp();
  GemmPlan plan(
      ctx, tensor_sequence_parallel_gemm(ctx, "in_capture", CollectiveOp::kAllGather, 2, 64 * tp,
                                         256, 64 * tp, DType::kFloat32, false, false));
  const std::vector<float> x = normals(static_cast<size_t>(num_elements(plan.lhs_local())),
                                       70 + static_cast<uint64_t>(world_rank()));
  const std::vector<float> w = normals(static_cast<size_t>(num_elements(plan.rhs_local())),
                                       90 + static_cast<uint64_t>(world_rank()));
  const auto out_count = static_cast<size_t>(num_elements(plan.out_local()));
  Device x_dev(x.size() * 4), w_dev(w.size() * 4), out_dev(out_count * 4);
  check(cudaMemcpy(x_dev.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy(x)");
  check(cudaMemcpy(w_dev.p, w.data(), w.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy(w)");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const Operands ops(x_dev.p, w_dev.p, nullptr, out_dev.p);
  std::vector<float> eager(out_count), got(out_count);
  plan.execute(ops, stream);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaMemcpy(eager.data(), out_dev.p, out_count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");

  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  plan.execute(ops, stream);
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaMemsetAsync(out_dev.p, 0xff, out_count * 4, stream), "cudaMemsetAsync(poison)");
  for (int i = 0; i < 5; ++i) check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaMemcpy(got.data(), out_dev.p, out_count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(std::memcmp(got.data(), eager.data(), out_count * 4), 0)
      << "rank " << world_rank() << ": the caller's graph differs from the eager call";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  ctx.backend().set_tracing(true);
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  std::string msg;
  try {
    plan.execute(ops, stream);
  } catch (const Error& e) {
    msg = e.what();
  }
  graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  ctx.backend().set_tracing(false);
  static_cast<void>(ctx.backend().take_trace());
  EXPECT_NE(msg.find("GEMM 'in_capture' cannot be captured into a CUDA graph: "), std::string::npos)
      << msg;
  EXPECT_EQ(end, cudaSuccess) << "the refusal broke the caller's capture: "
                              << cudaGetErrorString(end);
  size_t nodes = 99;
  if (graph != nullptr) {
    check(cudaGraphGetNodes(graph, nullptr, &nodes), "cudaGraphGetNodes");
    cudaGraphDestroy(graph);
  }
  EXPECT_EQ(nodes, 0u) << "the refused call recorded work into the caller's graph";

  // cgemm's own capture replayed on one stream while eager calls of the same plan go on
  // another: the backend orders them as it orders two eager calls (they share the plan's ring
  // and the copy-engine flags; unordered, they would race or hang).
  cudaStream_t other = nullptr;
  check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  Device out2(out_count * 4);
  const Operands ops2(x_dev.p, w_dev.p, nullptr, out2.p);
  {
    CapturedCall captured = plan.capture(ops, stream);
    check(cudaMemsetAsync(out_dev.p, 0xff, out_count * 4, stream), "cudaMemsetAsync(poison)");
    for (int i = 0; i < 20; ++i) {
      captured.replay(stream);
      plan.execute(ops2, other);
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    check(cudaStreamSynchronize(other), "cudaStreamSynchronize");
    // Its replay inside the caller's capture is refused, the capture left valid.
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    std::string nested;
    try {
      captured.replay(stream);
    } catch (const Error& e) {
      nested = e.what();
    }
    cudaGraph_t empty = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream, &empty), cudaSuccess);
    if (empty != nullptr) cudaGraphDestroy(empty);
    EXPECT_NE(nested.find("issue the call itself inside that capture"), std::string::npos)
        << nested;
  }
  check(cudaMemcpy(got.data(), out_dev.p, out_count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(std::memcmp(got.data(), eager.data(), out_count * 4), 0)
      << "rank " << world_rank() << ": replays beside eager calls on another stream differ";
  check(cudaMemcpy(got.data(), out2.p, out_count * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(std::memcmp(got.data(), eager.data(), out_count * 4), 0)
      << "rank " << world_rank() << ": eager calls beside replays on another stream differ";
  check(cudaStreamDestroy(other), "cudaStreamDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

// ncclCommInitRank over the world (the TP group with dp 1), on the GPU the backend rule gives
// this rank (local rank modulo the GPUs it sees).
ncclComm_t make_world_nccl() {
  const int devices = cuda_device_count();
  check(cudaSetDevice(local_rank_size().first % devices), "cudaSetDevice");
  ncclUniqueId id{};
  if (world_rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, world_size(), id, world_rank()), "ncclCommInitRank");
  return comm;
}

constexpr const char* kSharedSkip =
    "ranks share a GPU: NCCL refuses two ranks of one communicator on one GPU, so no "
    "communicator can be lent; run with one rank per GPU (mpirun -np 1 on a one-GPU machine)";

TEST(BorrowedNccl, CollectiveGemmThenStillUsable) {
  if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  if (ranks_share_a_gpu()) GTEST_SKIP() << kSharedSkip;
  ncclComm_t comm = make_world_nccl();
  {
    Context ctx = make_context(comm);
    EXPECT_NE(ctx.backend().describe().find("borrowed communicator"), std::string::npos)
        << ctx.backend().describe();
    EXPECT_EQ(run_on_caller_stream(ctx, Path::kSequential, 2, 44), 0);  // NCCL's all-gather
    EXPECT_EQ(run_on_caller_stream(ctx, Path::kOverlapped, 2, 55), 0);
  }
  // The Context did not destroy it: an all-reduce on it still sums every rank's value.
  Device buf(sizeof(float));
  const float mine = static_cast<float>(world_rank() + 1);
  check(cudaMemcpy(buf.p, &mine, sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check_nccl(ncclAllReduce(buf.p, buf.p, 1, ncclFloat32, ncclSum, comm, nullptr),
             "ncclAllReduce after the Context");
  float sum = 0.0f;
  check(cudaMemcpy(&sum, buf.p, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  const int n = world_size();
  EXPECT_EQ(sum, static_cast<float>(n * (n + 1) / 2));
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(BorrowedNccl, CommunicatorOfAnotherGroupRefused) {
  if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  if (ranks_share_a_gpu()) GTEST_SKIP() << kSharedSkip;
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks (a TP group smaller than the world)";
  ncclComm_t comm = make_world_nccl();
  // dp = world: TP groups of one rank, the communicator has every rank.
  const std::string want = "the borrowed NCCL communicator has " + std::to_string(world_size()) +
                           " ranks, the TP group 1, on tp rank 0 (world rank " +
                           std::to_string(world_rank()) + ")";
  try {
    Context ctx = make_context(comm, world_size());
    ADD_FAILURE() << "a communicator over the world was accepted for TP groups of 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// ncclCommInitRank over the world ranks of `color` (MPI_Comm_split), NCCL rank `nccl_rank`, on
// the GPU the backend rule gives this rank.
ncclComm_t make_group_nccl(int color, int nccl_rank) {
  const int devices = cuda_device_count();
  check(cudaSetDevice(local_rank_size().first % devices), "cudaSetDevice");
  MPI_Comm group = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color, nccl_rank, &group);
  int size = 0;
  MPI_Comm_size(group, &size);
  ncclUniqueId id{};
  if (nccl_rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
  MPI_Comm_free(&group);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, size, id, nccl_rank), "ncclCommInitRank");
  return comm;
}

// tp 2 x dp 2: TP groups are world ranks {0, 1} and {2, 3}. Communicators over {0, 3} and
// {2, 1} (NCCL rank = tp rank) have the right size, rank and GPU on every rank, so only their
// members tell them apart: refused on every rank with the lowest mismatching rank's message.
// Then the right ones are accepted (no false refusal with dp > 1). Needs 4 ranks with a GPU
// each: NCCL refuses two ranks of one communicator on one GPU, and with fewer ranks no wrong
// communicator passes the size and rank checks (tp 2 x dp 1 has one group; tp 1 groups are
// single ranks), so on 1 or 2 GPUs this case skips.
TEST(BorrowedNccl, MembersOfAnotherGroupRefused) {
  if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (tp 2 x dp 2), one GPU each";
  if (ranks_share_a_gpu()) GTEST_SKIP() << kSharedSkip;
  const int me = world_rank();
  const int tp_rank = me % 2;
  ncclComm_t crossed = make_group_nccl(me == 0 || me == 3 ? 0 : 1, tp_rank);
  const std::string want =
      "nccl_comm: the borrowed NCCL communicator's members are world ranks {0, 3} in NCCL rank "
      "order, this rank's TP group is world ranks {0, 1}, on world rank 0: pass a communicator "
      "over this rank's TP group";
  try {
    Context ctx = make_context(crossed, 2);
    ADD_FAILURE() << "communicators over world ranks {0, 3} and {2, 1} were accepted";
  } catch (const BackendRuleError& e) {
    // The same message on every rank: rank 0's, although rank 2 is refused too.
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // The communicators still work (not destroyed): an all-reduce over {0, 3} sums 1 + 4.
  Device buf(sizeof(float));
  const float mine = static_cast<float>(me + 1);
  check(cudaMemcpy(buf.p, &mine, sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check_nccl(ncclAllReduce(buf.p, buf.p, 1, ncclFloat32, ncclSum, crossed, nullptr),
             "ncclAllReduce after the refusal");
  float sum = 0.0f;
  check(cudaMemcpy(&sum, buf.p, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  EXPECT_EQ(sum, 5.0f);  // {0, 3}: 1 + 4; {2, 1}: 3 + 2
  EXPECT_EQ(ncclCommDestroy(crossed), ncclSuccess);

  ncclComm_t right = make_group_nccl(me / 2, tp_rank);
  {
    Context ctx = make_context(right, 2);
    EXPECT_NE(ctx.backend().describe().find("borrowed communicator"), std::string::npos)
        << ctx.backend().describe();
  }
  EXPECT_EQ(ncclCommDestroy(right), ncclSuccess);
}

}  // namespace
}  // namespace cgemm
