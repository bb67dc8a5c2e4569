#pragma once
// The watchdog's PeerChannel over MPI (cgemm/core/watchdog.hpp): the ranks that time out on
// one stall agree, by small messages on a communicator of their own, that one of them prints
// the line, and it names the ranks that did not time out.

#include "cgemm/collective/mesh_comms.hpp"

namespace cgemm {

/// Collective over comms.world(): installs the channel once per process (later calls do
/// nothing). Only under MPI_THREAD_MULTIPLE, as the watchdog's thread sends and probes while
/// the main thread waits inside MPI; otherwise every rank that times out reports, as before.
void install_watchdog_channel(const MeshComms& comms);
/// The same over `world` without a mesh (the tools, right after MPI_Init: their own waits
/// before the first Context get one line per stall too); gathers the host names.
void install_watchdog_channel(MPI_Comm world);

}  // namespace cgemm
