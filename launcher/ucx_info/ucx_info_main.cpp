// cgemm-ucx-info: what the UCX library of this machine offers cgemm's UCX transport, asked of
// the library itself (the GPU machine has no ucx_info): its version, the memory types a UCP
// context with RMA supports (ucp_context_query), whether device buffers would go to UCX directly
// or through pinned host staging (UcxTransport::device_path), and the transports and devices
// UCP selected (ucp_context_print_info). Honours UCX_TLS, UCX_NET_DEVICES, ... like any UCX
// program. No MPI: runs on a login node. Exit status 1 when no UCP context can be made, 2
// when cgemm was built without UCX or on an unknown argument (one message on stderr, as every
// tool), 3 when standard output cannot be written (as cgemm-plan). --version prints the line
// every cgemm tool prints.

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "build_info.hpp"

#ifdef CGEMM_HAVE_UCX
#include "cgemm/collective/ucx_transport.hpp"
#endif

namespace {

// What was printed must have reached standard output: a full disk or a closed descriptor is
// an error, not exit status 0 with nothing written.
int flushed(int status) {
  errno = 0;
  std::cout.flush();
  if (std::cout) return status;
  const int e = errno;
  std::cerr << "cgemm-ucx-info: error: cannot write to standard output"
            << (e != 0 ? std::string(": ") + std::strerror(e) : std::string()) << "\n";
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  bool transports = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no_transports") == 0) {
      transports = false;
    } else if (std::strcmp(argv[i], "--version") == 0) {
      std::cout << cgemm::build_info::version_line("cgemm-ucx-info");
      return flushed(0);
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: cgemm-ucx-info [--no_transports] [--help] [--version]\n"
                   "Prints the UCX library's version, the memory types of a UCP context with "
                   "RMA, the path device buffers would take, and (unless --no_transports) the "
                   "transports UCP selected.\n"
                   "  --no_transports  skip the transport list (ucp_context_print_info)\n"
                   "  --version        print cgemm-ucx-info's version and git commit\n"
                   "Exit status: 0 done, 1 no UCP context, 2 a bad argument or a build without "
                   "UCX, 3 standard output cannot be written.\n";
      return flushed(0);
    } else {
      std::cerr << "cgemm-ucx-info: error: unknown argument '" << argv[i]
                << "' (see cgemm-ucx-info --help)\n";
      return 2;
    }
  }
#ifdef CGEMM_HAVE_UCX
  const cgemm::UcxContextInfo info = cgemm::UcxTransport::query_context(transports);
  if (!info.ok) {
    std::cerr << "cgemm-ucx-info: error: " << info.text;
    return 1;
  }
  std::cout << info.text;
  return flushed(0);
#else
  static_cast<void>(transports);
  std::cerr << "cgemm-ucx-info: error: this cgemm was built without UCX (configure found no "
               "ucx.pc: install libucx-dev, then configure and build again)\n";
  return 2;
#endif
}
