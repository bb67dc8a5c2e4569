// The copy-engine transport on its own, under mpirun: a ring all-gather that forwards what the
// previous step received, repeated with new data and no host synchronisation, the slots reused
// every iteration; then a group with both ring directions; then the push bandwidth. Ranks may
// share a GPU (device = node-local rank mod GPUs), so the protocol can be checked on a
// one-GPU machine too. Exit 77 (skipped) without a GPU or when copy engines are unavailable.

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cgemm/collective/ce_transport.hpp"

namespace {

int g_rank = 0;

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, what, cudaGetErrorString(rc));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

unsigned char value(int rank, int iter, size_t i) {
  return static_cast<unsigned char>((rank * 131 + iter * 17 + i * 7) % 251);
}

int ring_all_gather(cgemm::CeTransport& ce, int me, int tp) {
  const size_t chunk = 1000003;  // bytes: odd on purpose
  const int iters = 32;
  const int right = (me + 1) % tp, left = (me + tp - 1) % tp;
  std::vector<unsigned char> staging(chunk * iters);
  for (int it = 0; it < iters; ++it) {
    for (size_t i = 0; i < chunk; ++i) staging[it * chunk + i] = value(me, it, i);
  }
  void *d_staging = nullptr, *d_out = nullptr, *d_slots = nullptr;
  check(cudaMalloc(&d_staging, staging.size()), "cudaMalloc");
  check(cudaMalloc(&d_out, chunk * tp * iters), "cudaMalloc");
  check(cudaMalloc(&d_slots, chunk * tp), "cudaMalloc");
  check(cudaMemcpy(d_staging, staging.data(), staging.size(), cudaMemcpyHostToDevice), "copy");
  const cgemm::SymmetricBuffer sym{d_slots, chunk * tp, 1};
  ce.attach(sym);
  char* slots = static_cast<char*>(d_slots);

  cudaStream_t comm, prod, cons;
  check(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&prod, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&cons, cudaStreamNonBlocking), "stream");
  cudaEvent_t prod_done, ex_done, cons_done;
  for (cudaEvent_t* e : {&prod_done, &ex_done, &cons_done}) {
    check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "event");
  }
  check(cudaEventRecord(cons_done, cons), "record");
  for (int it = 0; it < iters; ++it) {
    // The producer overwrites this rank's slot only after the last consumer read it; the
    // exchanges start after the producer (the backend's join_streams + after_stream).
    check(cudaStreamWaitEvent(prod, cons_done, 0), "wait");
    check(cudaMemcpyAsync(slots + me * chunk, static_cast<char*>(d_staging) + it * chunk, chunk,
                          cudaMemcpyDeviceToDevice, prod),
          "produce");
    check(cudaEventRecord(prod_done, prod), "record");
    check(cudaStreamWaitEvent(comm, prod_done, 0), "wait");
    for (int s = 0; s < tp - 1; ++s) {
      const int send_slot = (me - s + tp) % tp;
      const int recv_slot = (me - s - 1 + 2 * tp) % tp;
      cgemm::Exchange op;
      op.src = slots + send_slot * chunk;
      op.bytes = chunk;
      op.send_peer = right;
      op.send_offset = send_slot * chunk;
      op.recv_peer = left;
      op.recv_offset = recv_slot * chunk;
      op.dst = &sym;
      ce.start({&op, 1}, comm);
    }
    check(cudaEventRecord(ex_done, comm), "record");
    check(cudaStreamWaitEvent(cons, ex_done, 0), "wait");
    check(cudaMemcpyAsync(static_cast<char*>(d_out) + it * chunk * tp, slots, chunk * tp,
                          cudaMemcpyDeviceToDevice, cons),
          "consume");
    check(cudaEventRecord(cons_done, cons), "record");
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<unsigned char> got(chunk * tp * iters);
  check(cudaMemcpy(got.data(), d_out, got.size(), cudaMemcpyDeviceToHost), "copy");
  long bad = 0;
  for (int it = 0; it < iters; ++it) {
    for (int r = 0; r < tp; ++r) {
      for (size_t i = 0; i < chunk; ++i) {
        if (got[(it * tp + r) * chunk + i] != value(r, it, i) && ++bad <= 5) {
          std::fprintf(stderr, "rank %d: iteration %d slot %d byte %zu wrong\n", me, it, r, i);
        }
      }
    }
  }
  ce.detach(sym);
  cudaFree(d_slots);
  cudaFree(d_out);
  cudaFree(d_staging);
  for (cudaEvent_t e : {prod_done, ex_done, cons_done}) cudaEventDestroy(e);
  for (cudaStream_t s : {comm, prod, cons}) cudaStreamDestroy(s);
  std::printf("rank %d: ring all-gather x%d, %zu-byte chunks: %s\n", me, iters, chunk,
              bad == 0 ? "ok" : "WRONG");
  return bad == 0 ? 0 : 1;
}

// One group, both directions; with two ranks both pushes go to the same peer.
int bidirectional(cgemm::CeTransport& ce, int me, int tp) {
  const size_t n = 4099;
  const int right = (me + 1) % tp, left = (me + tp - 1) % tp;
  std::vector<unsigned char> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = value(me, 0, i);
  void *src = nullptr, *buf = nullptr;
  check(cudaMalloc(&src, n), "cudaMalloc");
  check(cudaMalloc(&buf, 2 * n * tp), "cudaMalloc");
  check(cudaMemcpy(src, mine.data(), n, cudaMemcpyHostToDevice), "copy");
  const cgemm::SymmetricBuffer sym{buf, 2 * n * tp, 2};
  ce.attach(sym);
  cudaStream_t comm;
  check(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "stream");
  for (int rep = 0; rep < 10; ++rep) {
    cgemm::Exchange ops[2];
    ops[0] = {src, n, right, me * n, left, left * n, &sym, nullptr};
    ops[1] = {src, n, left, (tp + me) * n, right, (tp + right) * n, &sym, nullptr};
    ce.start(ops, comm);
  }
  check(cudaStreamSynchronize(comm), "sync");
  std::vector<unsigned char> got(2 * n * tp);
  check(cudaMemcpy(got.data(), buf, got.size(), cudaMemcpyDeviceToHost), "copy");
  long bad = 0;
  for (size_t i = 0; i < n; ++i) {
    bad += got[left * n + i] != value(left, 0, i);
    bad += got[(tp + right) * n + i] != value(right, 0, i);
  }
  ce.detach(sym);
  cudaStreamDestroy(comm);
  cudaFree(buf);
  cudaFree(src);
  std::printf("rank %d: bidirectional group: %s\n", me, bad == 0 ? "ok" : "WRONG");
  return bad == 0 ? 0 : 1;
}

// Push bandwidth of one exchange per step, both directions at once (every rank pushes).
void bandwidth(cgemm::CeTransport& ce, int me, int tp) {
  const size_t bytes = size_t{256} << 20;
  void *src = nullptr, *buf = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&buf, bytes), "cudaMalloc");
  const cgemm::SymmetricBuffer sym{buf, bytes, 3};
  ce.attach(sym);
  cudaStream_t comm;
  check(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "stream");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  cgemm::Exchange op{src, bytes, (me + 1) % tp, 0, (me + tp - 1) % tp, 0, &sym, nullptr};
  ce.start({&op, 1}, comm);  // warm-up
  const int reps = 10;
  check(cudaEventRecord(a, comm), "record");
  for (int r = 0; r < reps; ++r) ce.start({&op, 1}, comm);
  check(cudaEventRecord(b, comm), "record");
  check(cudaEventSynchronize(b), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "elapsed");
  std::printf("rank %d: copy-engine push 256 MiB: %.3f ms = %.0f GB/s per direction\n", me,
              ms / reps, static_cast<double>(bytes) / (ms / reps * 1e-3) / 1e9);
  ce.detach(sym);
  cudaStreamDestroy(comm);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(buf);
  cudaFree(src);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  int local = 0;
  MPI_Comm_rank(node, &local);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  int min_count = count;
  MPI_Allreduce(MPI_IN_PLACE, &min_count, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (min_count == 0) {
    if (g_rank == 0) std::printf("SKIPPED: no GPU\n");
    MPI_Finalize();
    return 77;
  }
  if (size < 2) {  // e.g. a script running every test binary on its own: nothing to check
    std::printf("SKIPPED: needs at least 2 ranks (mpirun -np 2 %s)\n", argv[0]);
    MPI_Finalize();
    return 0;
  }
  check(cudaSetDevice(local % count), "cudaSetDevice");
  int rc = 0;
  {
    std::string why;
    auto ce = cgemm::CeTransport::create(MPI_COMM_WORLD, "rank " + std::to_string(g_rank), why);
    if (!ce) {
      if (g_rank == 0) std::printf("SKIPPED: copy engines unavailable: %s\n", why.c_str());
      MPI_Finalize();
      return 77;
    }
    if (g_rank == 0) std::printf("%s\n", ce->describe().c_str());
    rc |= ring_all_gather(*ce, g_rank, size);
    rc |= bidirectional(*ce, g_rank, size);
    bandwidth(*ce, g_rank, size);
  }
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("%s\n", rc == 0 ? "PASSED" : "FAILED");
  MPI_Comm_free(&node);
  MPI_Finalize();
  return rc;
}
