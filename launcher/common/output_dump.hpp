#pragma once
// Output dumps: the global output tensors of a cgemm-run, gathered on rank 0 and written to one
// file, so that two runs (another backend, another mesh, another machine) of the same config
// and seed can be compared element by element with cgemm-compare. The CPU backend is the
// oracle for the GPU this way.
//
// File format (version 1): the line "cgemm-output-dump 1", then per tensor one JSON line
// {"name": ..., "dtype": ..., "shape": [...], "bytes": N} followed by N bytes: the tensor,
// row-major, in its dtype, little-endian as the machine writes it.

#include <mpi.h>

#include <iosfwd>
#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm::launcher {

struct DumpRecord {
  std::string name;
  DType dtype = DType::kBFloat16;
  Shape shape;             // global shape
  std::vector<char> data;  // num_elements(shape) * dtype_size(dtype) bytes
};

/// Collective over `comm`: every rank sends its output shard (`out`, backend memory, the plan's
/// out_local() at out_offset()); rank 0 returns the global tensor, the others an empty record.
/// Where ranks hold replicas of a block, the highest rank's copy is kept. Throws cgemm::Error.
DumpRecord gather_output(Backend& be, const GemmPlan& plan, const void* out, MPI_Comm comm);

/// Writes the header line and the records. Throws cgemm::Error naming the path.
void write_dump(const std::string& path, const std::vector<DumpRecord>& records);
/// Reads a dump. Throws cgemm::Error naming the path and what is wrong (not a dump, truncated,
/// a size that does not match the shape and dtype, or more than the file holds, checked before
/// allocating; a dimension that is not a whole number >= 1; float4_e2m1fn, which a dump cannot
/// hold).
std::vector<DumpRecord> read_dump(const std::string& path);

}  // namespace cgemm::launcher
