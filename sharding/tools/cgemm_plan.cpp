// cgemm-plan: answers collective-GEMM planning cases (JSON Lines on stdin) with the
// planner of libcgemm_sharding.

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "build_info.hpp"
#include "line_protocol.hpp"

namespace {

constexpr const char* kUsage =
    R"(usage: cgemm-plan [--help | --version] < cases.jsonl > answers.jsonl

Answers collective-GEMM planning cases with cgemm's planner, which reproduces the rules of
Transformer Engine's JAX cpp_extensions/gemm.py exactly, quirks included.

Input: JSON Lines on standard input, one case object per line; blank lines are skipped.
Output: one JSON object per case, in input order: "id" (copied from the case) first, then
the result fields of the op, or "error": "<message>" when gemm.py would raise or the case
is unusable (missing or ill-typed field, unknown op).

Ops (the case's "op" field):
  gemm_sharding  partition specs of the operands, output, reduce axis and sequence dim
                 (GemmPrimitive._parse_operand_output_specs).
                 Fields: mesh_resource, lhs/rhs {ndim, spec}, bias, contracting_dims,
                 collective_op, scaling_mode, transpose_batch_sequence.
  gemm_abstract  validation, output shape and cuBLAS workspace size (GemmPrimitive.abstract).
                 Fields: lhs/rhs {shape, dtype}, lhs_scale_shape, rhs_scale_shape, bias,
                 alpha/beta {size, dtype}, out_dtype, contracting_dims, scaling_mode,
                 collective_op, is_outer, sequence_dim, tpsp_size, compute_capability,
                 num_max_streams.
  reorder        source flat index of each output element of _reorder_tpsp_leading or
                 _reorder_dp_leading. Fields: kind ("tpsp_leading" | "dp_leading"), shape,
                 dp_size, tpsp_size.
  grouped_gemm   a grouped GEMM's layouts, axis boundaries, sizes, output shape and dtype,
                 checks, v2 (graph-safe) path and workspace sizes (grouped_gemm, then
                 GroupedGemmPrimitive.abstract). Fields: lhs/rhs {kind, original_shape,
                 dtype, first_dims, last_dims[, scaling_mode, dq_dtype, data_layout,
                 scale_inv_size]}, contracting_dims, setup_workspace_size; optional: bias,
                 preferred_element_type, group_offset, compute_capability,
                 num_compute_streams, v2_available, enforce_v2_env.

Limits: every line is answered. Beyond a limit, or when a case cannot be answered (a
number beyond a double's range, memory running out), the answer is an error naming the
limit, with the case's id when it can be recovered from the text (else null):
  line length 1048576 bytes (such a line also counts as not JSON), nesting 256 levels,
  ndim and the length of shapes, specs and dim lists 1024, reorder elements 1048576
  (2^20), answer length 16777216 bytes, and 64-bit integer arithmetic.
Numeric ids keep their input text (e.g. integers beyond 64 bits).

The full contract (encodings, comparison rule, the corners reproduced literally) is
tests/data/PLANNER_SCHEMA.md; tests/data/planner_public.jsonl
holds answered examples.

--version prints the version and the git commit, as cgemm-run's does.

Exit status: 0 when every non-blank line was JSON (even if some answers are errors);
1 when a line was not JSON or too long (reported on standard error and answered with an
error line);
2 on bad command-line arguments, or when standard input cannot be read (a folder, a closed
descriptor);
3 when the answers cannot be written (standard output full, closed or gone): no more
lines are read.
)";

// The memory reserve: cgemm-plan answers every line even when memory runs out. 16 MiB of
// address space is mapped and never touched; when an allocation fails, the new-handler
// unmaps it and lets the allocation retry (it may be in a destructor, where throwing would
// terminate), and the next checkpoint throws std::bad_alloc from a place where unwinding
// is safe, with the reserve's room to unwind in (nlohmann's destructors allocate). The
// case is answered with an error and the reserve is set aside again before the next line.
constexpr size_t kMemoryReserveBytes = size_t{16} << 20;
void* g_reserve = nullptr;
bool g_memory_short = false;

void map_reserve() noexcept {
  if (g_reserve) return;
  void* p = mmap(nullptr, kMemoryReserveBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  g_reserve = p == MAP_FAILED ? nullptr : p;
}

void on_allocation_failure() {
  if (!g_reserve) throw std::bad_alloc();
  munmap(g_reserve, kMemoryReserveBytes);
  g_reserve = nullptr;
  g_memory_short = true;
}

class MemoryReserve final : public cgemm::plan::MemoryPolicy {
 public:
  MemoryReserve() {
    map_reserve();
    std::set_new_handler(on_allocation_failure);
  }
  void rearm() noexcept override {
    map_reserve();
    g_memory_short = false;
  }
  void checkpoint() override {
    if (g_memory_short) {
      g_memory_short = false;
      throw std::bad_alloc();
    }
  }
};

// --help's and --version's text, flushed and checked like the answers.
int print(const std::string& text) {
  std::cout << text << std::flush;
  if (std::cout) return 0;
  std::cerr << "cgemm-plan: "
            << cgemm::plan::stream_failure("cannot write to standard output", errno) << '\n';
  return cgemm::plan::kExitOutputLost;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      return print(kUsage);
    }
    if (std::strcmp(argv[i], "--version") == 0) {
      return print(cgemm::build_info::version_line("cgemm-plan"));
    }
    std::cerr << "cgemm-plan: unknown argument '" << argv[i] << "'\n\n" << kUsage;
    return 2;
  }
  std::ios::sync_with_stdio(false);
  MemoryReserve reserve;
  return cgemm::plan::run_plan_lines(std::cin, std::cout, std::cerr, &reserve);
}
