#include "cgemm/collective/watchdog_channel.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/core/watchdog.hpp"

namespace cgemm {

namespace {

constexpr int kTag = 22;  // on the channel's own communicator: no other message matches

struct Channel {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::vector<std::string> names;  // describe_rank of every rank, copied: comms may go first
  std::array<int, 2> kinds{0, 1};  // the send buffers: 0 timed out, 1 reported
  std::vector<MPI_Request> sent;   // never waited: the process ends after a timeout
};

bool installed = false;

// False when the channel is installed already or cannot be (no MPI_THREAD_MULTIPLE): alike on
// every rank, so the collective calls after it are made by all or none.
bool want_channel() {
  if (installed) return false;
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread");
  return level == MPI_THREAD_MULTIPLE;
}

void install(MPI_Comm world, std::vector<std::string> names) {
  installed = true;
  // Never freed: the watchdog's thread may use it until the process ends.
  auto ch = std::make_shared<Channel>();
  check_mpi(MPI_Comm_dup(world, &ch->comm), "MPI_Comm_dup(watchdog)");
  check_mpi(MPI_Comm_rank(ch->comm, &ch->rank), "MPI_Comm_rank(watchdog)");
  check_mpi(MPI_Comm_size(ch->comm, &ch->size), "MPI_Comm_size(watchdog)");
  ch->names = std::move(names);
  watchdog::PeerChannel channel;
  channel.size = ch->size;
  channel.tell = [ch](bool reported) {
    for (int r = 0; r < ch->size; ++r) {
      if (r == ch->rank) continue;
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_Isend(&ch->kinds[reported ? 1 : 0], 1, MPI_INT, r, kTag, ch->comm, &request);
      ch->sent.push_back(request);
    }
  };
  channel.hear = [ch](std::vector<int>& timed_out, bool& reported) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTag, ch->comm, &flag, &status) != MPI_SUCCESS || !flag) {
        return;
      }
      int kind = 0;
      MPI_Recv(&kind, 1, MPI_INT, status.MPI_SOURCE, kTag, ch->comm, MPI_STATUS_IGNORE);
      reported = reported || kind == 1;
      if (std::find(timed_out.begin(), timed_out.end(), status.MPI_SOURCE) == timed_out.end()) {
        timed_out.push_back(status.MPI_SOURCE);
      }
    }
  };
  channel.describe = [ch](int r) {
    return r >= 0 && r < ch->size ? ch->names[static_cast<size_t>(r)]
                                  : "world rank " + std::to_string(r);
  };
  watchdog::set_peer_channel(std::move(channel));
}

}  // namespace

void install_watchdog_channel(const MeshComms& comms) {
  if (!want_channel()) return;
  std::vector<std::string> names;
  for (int r = 0; r < comms.world_size(); ++r) names.push_back(comms.describe_rank(r));
  install(comms.world(), std::move(names));
}

void install_watchdog_channel(MPI_Comm world) {
  if (!want_channel()) return;
  const std::vector<std::string> hosts = gather_host_names(world);
  std::vector<std::string> names;
  for (size_t r = 0; r < hosts.size(); ++r) {
    names.push_back("world rank " + std::to_string(r) + " (host " + hosts[r] + ")");
  }
  install(world, std::move(names));
}

}  // namespace cgemm
