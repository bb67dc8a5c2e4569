#pragma once
// Overlap knobs, with the meaning of Transformer Engine's collective_gemm_bootstrap.

#include <string>

namespace cgemm {

enum class BackendKind { kAuto, kCpu, kCuda };
std::string backend_name(BackendKind k);  // "auto", "cpu", "cuda"
BackendKind parse_backend(const std::string& name);

/// Which transport moves the ring's chunks between the ranks of a TP group.
/// kAuto: today's choice, which UCX has not beaten on any machine measured so far
/// (docs/PERFORMANCE.md): MPI on the CPU backend; on the CUDA backend the copy engines inside a
/// node (use_ce) and NCCL for the rest. kMpi, kUcx: CPU backend only (kUcx: UCP puts, see
/// collective/ucx_transport.hpp; needs a cgemm built with UCX). kNccl, kCe: CUDA backend only
/// (kNccl: no copy engines; kCe: the copy engines for every peer). A forced transport that some
/// rank cannot create, or that cannot reach a peer, or that the backend has not, is refused on
/// every rank with one message (BackendRuleError).
enum class TransportKind { kAuto, kMpi, kUcx, kNccl, kCe };
std::string transport_kind_name(TransportKind k);  // "auto", "mpi", "ucx", "nccl", "ce"
TransportKind parse_transport_kind(const std::string& name);

/// Which backend a Context builds, and whether ranks may share a GPU (Context's backend rule).
struct BackendOptions {
  BackendKind kind = BackendKind::kAuto;
  /// Off (the default): one rank per GPU; a host with more ranks than GPUs gets the CPU
  /// backend under kAuto and a BackendRuleError under kCuda. On: ranks of a host share its
  /// GPUs (rank -> GPU by local rank modulo the GPUs it sees). NCCL refuses two ranks of one
  /// communicator on one GPU, so a job in which any GPU is shared creates no NCCL
  /// communicator: the ring and the sequential path's collectives go through the copy
  /// engines (use_ce must stay on), and times are not a speed measurement (kernels of
  /// different processes time-slice one GPU).
  bool gpu_sharing = false;
  /// Seconds any wait of the job may last (a peer's data, a collective, a barrier, the GPU,
  /// the bootstrap) before the watchdog (cgemm/core/watchdog.hpp) names it and ends the job;
  /// <= 0: wait forever.
  double timeout_s = 300.0;
  /// The caller's NCCL communicator over this rank's tensor-parallel group (an ncclComm_t,
  /// passed as void* so this header needs no NCCL header), which the CUDA backend uses instead
  /// of making its own: for a framework that has one already. Borrowed: the caller keeps it
  /// alive until the Context is destroyed, then destroys it itself (the Context never does;
  /// the watchdog aborts it only when it ends the job on a timeout). The NCCL ranks must be
  /// the TP ranks, on the GPU the backend rule gives each rank (its local rank modulo the
  /// GPUs it sees): checked (ncclCommCount, ncclCommUserRank, ncclCommCuDevice, then its
  /// members by an all-gather of world ranks over it: check_borrowed_nccl_members in
  /// backends.hpp); a mismatch throws BackendRuleError on every rank of the job (one message
  /// per TP group for the first checks, one for the whole job for the members). Every rank of the
  /// job passes one or none (else BackendRuleError on all). Refused with BackendRuleError when
  /// the backend is not cuda (kCpu, kAuto that chose the CPU backend, a build without CUDA)
  /// and with gpu_sharing. Null (the default): the backend makes its own.
  void* nccl_comm = nullptr;
  /// The ring's transport (TransportKind): auto keeps the backend's own choice.
  TransportKind transport = TransportKind::kAuto;
};

/// Whether a collective GEMM overlaps its collective with chunked GEMMs.
/// kAuto: a rule from the shape and the mesh, the same on every run and every rank, so the
/// path (and with it the order of the sums, and so the bits) never depends on a timing:
/// overlapped when tp > 1 and one chunk's GEMM (one piece of it with chunks_per_rank > 1) is
/// at least kAutoOverlapMinChunkFlop, else
/// sequential (chunks too small to hide a transfer behind). kAlways / kNever force one.
enum class OverlapPolicy { kAuto, kAlways, kNever };
/// 2^34 FLOP (about 23 us of bf16 GEMM on an H200): provisional, until the 2-GPU sweep of
/// docs/PERFORMANCE.md measures where overlap starts to pay.
constexpr double kAutoOverlapMinChunkFlop = 17179869184.0;
std::string overlap_policy_name(OverlapPolicy p);  // "auto", "on", "off"
OverlapPolicy parse_overlap_policy(const std::string& name);

struct OverlapOptions {
  OverlapPolicy policy = OverlapPolicy::kAuto;
  int num_max_streams = 3;                // GEMM (compute) streams a collective GEMM may use
  int compute_stream_priority = 0;        // 0 = highest; CUDA only
  int communication_stream_priority = 0;  // 0 = highest; CUDA only
  int num_sm_for_communication = 2;       // TE's SM bound for the transport: accepted, no effect
  bool use_ce = true;                     // copy engines over CUDA IPC inside a node; CUDA only
  bool aggregate_all_gather = false;      // all-gather both ways round the ring at once
  /// Pieces each ring chunk moves and multiplies in: tp x this transfers and GEMMs per call.
  /// A piece is contiguous in its slot (rows, or whole batch blocks for batch-first
  /// activations), so it must divide those (PlanError otherwise). Not in Transformer Engine.
  int chunks_per_rank = 1;

  /// Every knob: a Context is built for one set of them.
  bool operator==(const OverlapOptions&) const = default;
};

}  // namespace cgemm
