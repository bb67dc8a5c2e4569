#pragma once
// UCX for the CUDA backend (`transport = ucx`): the ring's device buffers staged through pinned
// host memory, moved between hosts by the UCX transport of the CPU backend (ucx_transport.hpp,
// its puts, flags and watchdog unchanged). Staged because it works with every UCX build: the
// GPU machine's UCX 1.16 reports host memory only (cgemm-ucx-info), and where a UCX build
// reports CUDA memory (UcxTransport::device_path) passing device pointers straight to UCP would
// save the two copies. Only built with CUDA and UCX (CGEMM_HAVE_CUDA, CGEMM_HAVE_UCX).
//
// Memory. Each attached symmetric buffer (device memory) gets a pinned host mirror of the same
// size (cudaHostAlloc), and the mirror is what the UCX transport registers and peers put into.
// Each rank also has a pinned send staging area (grown when a group needs more) and a gate: a
// 64-bit word of mapped pinned memory, written by this host, waited on by the GPU.
//
// Protocol. Group s, started on the communication stream (start()), is enqueued there as
//   1. device to host: every chunk this rank sends, from its source into the send staging;
//      then the stream writes s into the staged word (E_s below)
//   2. cuStreamWaitValue64(gate >= s)
//   3. host to device: every chunk this rank receives, from the mirror of its destination into
//      the destination (the same offset)
// and driven by a proxy thread of this rank (as NCCL's proxy): once E_s completed, it starts
// the UCX group s (the chunks from the staging into the peers' mirrors, as the CPU backend
// would); once UCX says it is complete (every put of this rank completed, every peer's data
// here), it writes s into the gate, and the stream goes on with step 3. Groups are started on
// UCX in their order, and the gate only grows.
//
// Why it is right:
//  - Mirror reuse: a peer writes this rank's mirror for group s only after this rank announced
//    s to UCX, i.e. after E_s, which follows every earlier group's step 3 on the stream: no
//    host-to-device copy still reads the slots it writes.
//  - Staging reuse: group s+1's step 1 follows, on the stream, group s's gate, which the host
//    opens only after every put of group s completed locally.
//  - Stream order: the destination is written in step 3, before the group's completion event
//    (the backend's ExchangeFifo), so compute streams that wait for the exchange see the data.
//
// Driving. The proxy thread owns the transfers: the backend's thread only enqueues (start)
// and, before any host wait on the device (synchronize, a timed run, host copies, the amax
// all-reduce, making or releasing a symmetric buffer), waits until every started group is
// through the gate (drain), under the watchdog, whose line names the group, the step and the
// peer as the CPU backend's UCX transport does. A thread of its own because the backend's
// thread can block inside CUDA calls that wait for the device (the first launch of a lazily
// loaded kernel, cudaFree, ...): a gate only that thread could open would then never open.
// (The first version drove UCX from the backend's thread and hung on the H200 inside the
// first timed run, with no watchdog line, i.e. inside such a CUDA call.) The UCP worker is made
// serialized (UCS_THREAD_MODE_SERIALIZED) and every call to it holds the transport's mutex; the
// proxy yields the CPU after a run of idle steps. When a step fails, the gate is opened for good
// (the stream cannot hang the process's teardown), every later drain() throws the error (what those
// groups copied back is not the peers' data), and start() refuses any later group. The proxy makes
// no CUDA call: it learns that step 1 is done from a second mapped word, which the stream writes
// (cuStreamWriteValue64) after it. Every group must start on one stream (the backend's
// communication stream), or the reuse rules above would not hold: another is refused.

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

#include "cgemm/collective/transport.hpp"

namespace cgemm {

/// Collective over `tp_comm`, with the CUDA device that is current. Every rank gets the same
/// answer: a transport, or nullptr and `why_not` (no 64-bit stream memory operations, no
/// pinned memory, or UcxTransport::create's reason). `where` prefixes errors and watchdog
/// lines; `describe_peer(tp_rank)` names a peer in them ("world rank R (host H)").
std::unique_ptr<Transport> make_ucx_staged_transport(MPI_Comm tp_comm, const std::string& where,
                                                     std::function<std::string(int)> describe_peer,
                                                     std::string& why_not);

}  // namespace cgemm
