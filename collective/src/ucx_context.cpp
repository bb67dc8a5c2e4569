// What UCX offers this process (UcxTransport::query_context, device_path) and the UCP context
// helpers UcxTransport shares with it (ucx_context.hpp).
#include <cstdio>
#include <cstdlib>

#include "cgemm/collective/ucx_transport.hpp"
#include "ucx_context.hpp"

namespace cgemm {
namespace ucx {

std::string status_text(ucs_status_t s) {
  return std::string(ucs_status_string(s)) + " (" + std::to_string(static_cast<int>(s)) + ")";
}

ucs_status_t make_context(ucp_context_h* context) {
  ucp_config_t* config = nullptr;
  if (const ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) return s;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  const ucs_status_t s = ucp_init(&params, config, context);
  ucp_config_release(config);
  return s;
}

bool fence_is_strong() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return major > 1 || (major == 1 && minor >= 14);
}

const char* flag_ordering(bool strong_fence) {
  return strong_fence ? "ucp_worker_fence (a strong fence from UCX 1.14)"
                      : "ucp_ep_flush_nbx completed before the flag put (UCX < 1.14: "
                        "ucp_worker_fence orders only within a lane)";
}

}  // namespace ucx

namespace {

// Memory type names of UCS's enum where 1.13 and 1.16 agree; later ones by number.
std::string memory_type_name(int bit) {
  static const char* const kNames[] = {"host", "cuda", "cuda-managed", "rocm", "rocm-managed"};
  if (bit >= 0 && bit < 5) return kNames[bit];
  return "type " + std::to_string(bit);
}

}  // namespace

using ucx::fence_is_strong;
using ucx::flag_ordering;
using ucx::make_context;
using ucx::status_text;

UcxContextInfo UcxTransport::query_context(bool with_transports) {
  UcxContextInfo info;
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  info.text = "UCX library: " + std::to_string(major) + "." + std::to_string(minor) + "." +
              std::to_string(release) + " (" + ucp_get_version_string() + ")\n";
  ucp_context_h context = nullptr;
  if (const ucs_status_t s = make_context(&context); s != UCS_OK) {
    info.text += "no UCP context with RMA: ucp_init failed: " + status_text(s) + "\n";
    return info;
  }
  info.ok = true;
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (const ucs_status_t s = ucp_context_query(context, &attr); s != UCS_OK) {
    info.text += "memory types: ucp_context_query failed: " + status_text(s) + "\n";
  } else {
    std::string types;
    for (int bit = 0; bit < 64; ++bit) {
      if ((attr.memory_types >> bit) & 1ULL) {
        types += (types.empty() ? "" : ", ") + memory_type_name(bit);
      }
    }
    info.cuda_memory = ((attr.memory_types >> UCS_MEMORY_TYPE_CUDA) & 1ULL) != 0;
    info.text += "memory types: " + (types.empty() ? std::string("none") : types) + "\n";
  }
  info.text += std::string("flag ordering: ") + flag_ordering(fence_is_strong()) + "\n";
  info.text += std::string("device buffers: ") +
               (info.cuda_memory
                    ? "direct (the context reports cuda memory: UCP takes device pointers)"
                    : "staged through pinned host memory (the context reports no cuda memory)") +
               "\n";
  if (with_transports) {
    char* text = nullptr;
    size_t len = 0;
    if (FILE* f = open_memstream(&text, &len); f != nullptr) {
      ucp_context_print_info(context, f);
      std::fclose(f);
      info.text += "transports (ucp_context_print_info):\n" + std::string(text, len);
      std::free(text);
    }
  }
  ucp_cleanup(context);
  return info;
}

UcxDevicePath UcxTransport::device_path() {
  static const UcxDevicePath path =
      query_context(false).cuda_memory ? UcxDevicePath::kDirect : UcxDevicePath::kStaged;
  return path;
}

}  // namespace cgemm
