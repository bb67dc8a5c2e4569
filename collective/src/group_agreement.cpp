// agree_on_problems (group_agreement.hpp).

#include "cgemm/collective/group_agreement.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"

namespace cgemm::detail {

bool agree_on_problems(MPI_Comm comm, int size, const std::string& mine, std::string& why,
                       const char* what) {
  constexpr int kLen = 240;
  std::array<char, kLen> buf{};
  std::memcpy(buf.data(), mine.data(), std::min<size_t>(mine.size(), kLen - 1));
  std::vector<char> all(static_cast<size_t>(kLen) * static_cast<size_t>(size));
  check_mpi(MPI_Allgather(buf.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, comm), what);
  why.clear();
  for (int r = 0; r < size; ++r) {
    const char* s = all.data() + static_cast<size_t>(r) * kLen;
    if (*s == '\0') continue;
    if (!why.empty()) why += "; ";
    why += "tp rank " + std::to_string(r) + ": " + std::string(s, strnlen(s, kLen));
  }
  return why.empty();
}

}  // namespace cgemm::detail
