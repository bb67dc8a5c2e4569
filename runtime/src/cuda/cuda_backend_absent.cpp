// Built when cgemm is configured without CUDA: the factory says so clearly.
#include "cgemm/runtime/backends.hpp"

namespace cgemm {

bool cuda_backend_built() { return false; }
bool cuda_backend_available() { return false; }
int cuda_device_count() { return 0; }
std::vector<std::string> cuda_device_uuids() { return {}; }

std::unique_ptr<Backend> make_cuda_backend(const MeshComms&, const OverlapOptions&,
                                           const CudaPlacement&, TransportKind) {
  throw Error(
      "backend 'cuda' requested, but this cgemm was built without CUDA "
      "(configure with the CUDA toolkit installed and -DCGEMM_WITH_CUDA=ON)");
}

void check_borrowed_nccl_members(const MeshComms&, void*) {
  throw Error(
      "nccl_comm: a borrowed NCCL communicator needs the CUDA backend, and this cgemm was "
      "built without CUDA");
}

}  // namespace cgemm
