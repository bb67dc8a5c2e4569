// cgemm-ucx-info: what the UCX library of this machine offers cgemm's UCX transport, asked of
// the library itself (the GPU machine has no ucx_info): its version, the memory types a UCP
// context with RMA supports (ucp_context_query), whether device buffers would go to UCX directly
// or through pinned host staging (UcxTransport::device_path), and the transports and devices
// UCP selected (ucp_context_print_info). Honours UCX_TLS, UCX_NET_DEVICES, ... like any UCX
// program. No MPI: runs on a login node. Exit status 1 when no UCP context can be made, 2
// when cgemm was built without UCX. --version prints the line every cgemm tool prints.

#include <cstring>
#include <iostream>

#include "build_info.hpp"

#ifdef CGEMM_HAVE_UCX
#include "cgemm/collective/ucx_transport.hpp"
#endif

int main(int argc, char** argv) {
  bool transports = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no_transports") == 0) {
      transports = false;
    } else if (std::strcmp(argv[i], "--version") == 0) {
      std::cout << cgemm::build_info::version_line("cgemm-ucx-info");
      return 0;
    } else {
      std::cout << "usage: cgemm-ucx-info [--no_transports] [--help] [--version]\n"
                   "Prints the UCX library's version, the memory types of a UCP context with "
                   "RMA, the path device buffers would take, and (unless --no_transports) the "
                   "transports UCP selected.\n"
                   "  --no_transports  skip the transport list (ucp_context_print_info)\n"
                   "  --version        print cgemm-ucx-info's version and git commit\n";
      return std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
#ifdef CGEMM_HAVE_UCX
  const cgemm::UcxContextInfo info = cgemm::UcxTransport::query_context(transports);
  if (!info.ok) {
    std::cerr << "cgemm-ucx-info: error: " << info.text;
    return 1;
  }
  std::cout << info.text;
  return 0;
#else
  static_cast<void>(transports);
  std::cerr << "cgemm-ucx-info: error: this cgemm was built without UCX (configure found no "
               "ucx.pc: install libucx-dev, then configure and build again)\n";
  return 2;
#endif
}
