#include "output_dump.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/core/watchdog.hpp"
#include "output_files.hpp"
#include "printable_text.hpp"

namespace cgemm::launcher {

namespace {

constexpr const char* kMagic = "cgemm-output-dump 1";

// Copies a row-major block of shape `local` into `global` (shape `gshape`) at `offset`.
void place(const char* block, const Shape& local, const Shape& offset, char* global,
           const Shape& gshape, size_t elem) {
  const size_t nd = local.size();
  if (nd == 0 || num_elements(local) == 0) return;
  const size_t run = static_cast<size_t>(local[nd - 1]) * elem;
  std::vector<int64_t> idx(nd, 0);  // index over all dims but the last
  const int64_t rows = num_elements(local) / local[nd - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t flat = 0;
    for (size_t d = 0; d < nd; ++d) {
      const int64_t i = d + 1 == nd ? offset[d] : offset[d] + idx[d];
      flat = flat * gshape[d] + i;
    }
    std::copy_n(block + static_cast<size_t>(r) * run, run,
                global + static_cast<size_t>(flat) * elem);
    for (size_t d = nd - 1; d-- > 0;) {  // odometer over the leading dims
      if (++idx[d] < local[d]) break;
      idx[d] = 0;
    }
  }
}

// Reading: a dump is input a user names, perhaps hostile or damaged, so every header field
// is checked before the data it describes is read.

// Read at most this much at a time where the stream's size is unknown.
constexpr uint64_t kReadPiece = uint64_t{64} << 20;

// The size of a seekable file (and the stream back at its start), or none (a pipe).
std::optional<uint64_t> stream_size(std::istream& f) {
  std::streambuf& buf = *f.rdbuf();
  const std::streamoff end = buf.pubseekoff(0, std::ios::end, std::ios::in);
  if (end < 0 || buf.pubseekoff(0, std::ios::beg, std::ios::in) != 0) return std::nullopt;
  return static_cast<uint64_t>(end);
}

uint64_t stream_at(std::istream& f) {
  const std::streamoff at = f.rdbuf()->pubseekoff(0, std::ios::cur, std::ios::in);
  return at < 0 ? 0 : static_cast<uint64_t>(at);
}

std::string truncated(const std::string& where, const std::string& name, uint64_t have,
                      uint64_t bytes) {
  return where + " ('" + printable(name) + "'): truncated, " + std::to_string(have) + " of " +
         std::to_string(bytes) + " bytes";
}

// Fills `r`'s name, dtype and shape from a header line; returns its "bytes". Throws for a
// field missing or of another type, a dtype a dump cannot hold, a dimension that is not a
// whole number >= 1 (a zero-element tensor has nothing to compare), or bytes that do not
// match shape and dtype.
uint64_t read_header(const std::string& line, DumpRecord& r) {
  const nlohmann::json h = nlohmann::json::parse(line);
  r.name = h.at("name").get<std::string>();
  r.dtype = parse_dtype(h.at("dtype").get<std::string>());
  if (r.dtype == DType::kFloat4E2M1) {
    throw Error(
        "dtype float4_e2m1fn: dumps hold float32, bfloat16, float16, float8_e4m3fn "
        "or float8_e5m2 (float4's packing in memory is not defined)");
  }
  const nlohmann::json& shape = h.at("shape");
  if (!shape.is_array()) throw Error("shape " + shape.dump() + " is not a list");
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_integer()) {
      throw Error("shape " + shape.dump() + ": dimensions must be whole numbers");
    }
    if (d.get<int64_t>() < 0 || (d.is_number_unsigned() && d.get<uint64_t>() > INT64_MAX)) {
      throw Error("shape " + shape.dump() + ": negative dimension or past 64 bits");
    }
    if (d.get<int64_t>() == 0) {
      throw Error("shape " + shape.dump() + " has no elements: nothing to compare");
    }
    r.shape.push_back(d.get<int64_t>());
  }
  const nlohmann::json& bytes = h.at("bytes");
  if (!bytes.is_number_unsigned()) {
    throw Error("bytes " + bytes.dump() + " is not a whole number >= 0");
  }
  // Checked: a shape of 2^62 + 1 float32 elements wrapped to 4 bytes and passed.
  const auto want = static_cast<uint64_t>(
      checked_bytes(num_elements(r.shape), dtype_size(r.dtype),
                    "shape " + shape_str(r.shape) + " of " + std::string(dtype_name(r.dtype))));
  if (bytes.get<uint64_t>() != want) {
    throw Error("bytes " + bytes.dump() + " do not match shape " + shape_str(r.shape) + " of " +
                std::string(dtype_name(r.dtype)));
  }
  return want;
}

}  // namespace

DumpRecord gather_output(Backend& be, const GemmPlan& plan, const void* out, MPI_Comm comm) {
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const DType dt = plan.desc().out_dtype;
  const size_t elem = dtype_size(dt);
  const Shape& local = plan.out_local();
  const size_t bytes = static_cast<size_t>(num_elements(local)) * elem;
  if (bytes > static_cast<size_t>(INT_MAX)) {
    throw Error("output_dump: GEMM '" + plan.desc().name + "' has an output shard of " +
                std::to_string(bytes) + " bytes; dumps are for check-sized runs (< 2 GiB a shard)");
  }
  std::vector<char> mine(bytes);
  be.copy_to_host(mine.data(), out, bytes);
  const Shape off = plan.out_offset();
  const int nd = static_cast<int>(local.size());
  std::vector<int64_t> offsets(static_cast<size_t>(nd * size));
  const watchdog::WaitScope wait("the gather of GEMM '" + plan.desc().name +
                                 "''s outputs on rank 0");
  check_mpi(MPI_Gather(off.data(), nd, MPI_INT64_T, offsets.data(), nd, MPI_INT64_T, 0, comm),
            "MPI_Gather(output offsets)");
  std::vector<char> all(rank == 0 ? bytes * static_cast<size_t>(size) : 0);
  check_mpi(MPI_Gather(mine.data(), static_cast<int>(bytes), MPI_CHAR, all.data(),
                       static_cast<int>(bytes), MPI_CHAR, 0, comm),
            "MPI_Gather(outputs)");
  DumpRecord rec;
  if (rank != 0) return rec;
  rec.name = plan.desc().name;
  rec.dtype = dt;
  rec.shape = plan.out_global();
  rec.data.assign(static_cast<size_t>(num_elements(rec.shape)) * elem, 0);
  for (int r = 0; r < size; ++r) {
    const Shape o(offsets.begin() + r * nd, offsets.begin() + (r + 1) * nd);
    place(all.data() + static_cast<size_t>(r) * bytes, local, o, rec.data.data(), rec.shape, elem);
  }
  return rec;
}

void write_dump(const std::string& path, const std::vector<DumpRecord>& records) {
  write_replacing("output_dump", path, [&](std::ostream& f) {
    f << kMagic << "\n";
    for (const DumpRecord& r : records) {
      const nlohmann::json h = {{"name", r.name},
                                {"dtype", std::string(dtype_name(r.dtype))},
                                {"shape", r.shape},
                                {"bytes", r.data.size()}};
      f << h.dump() << "\n";
      f.write(r.data.data(), static_cast<std::streamsize>(r.data.size()));
    }
  });
}

std::vector<DumpRecord> read_dump(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open the file for reading");
  const std::optional<uint64_t> file_bytes = stream_size(f);
  std::string line;
  if (!std::getline(f, line) || line != kMagic) {
    throw Error(path + ": not a cgemm output dump (first line is not '" + kMagic + "')");
  }
  std::vector<DumpRecord> out;
  while (std::getline(f, line)) {
    const std::string where = path + ", tensor " + std::to_string(out.size() + 1);
    DumpRecord r;
    uint64_t bytes = 0;
    try {
      bytes = read_header(line, r);
    } catch (const std::exception& e) {
      throw Error(where + ": bad header line: " + e.what());
    }
    // The size the header claims is checked against the file before anything is allocated
    // for it (a 3 KB file claiming 2 GiB was zero-filled first).
    if (file_bytes) {
      const uint64_t left = *file_bytes - std::min<uint64_t>(*file_bytes, stream_at(f));
      if (bytes > left) throw Error(truncated(where, r.name, left, bytes));
    }
    try {
      if (file_bytes) r.data.reserve(static_cast<size_t>(bytes));
      // In bounded pieces: a stream of unknown size grows the buffer as bytes arrive.
      while (r.data.size() < bytes) {
        const size_t have = r.data.size();
        const size_t piece = static_cast<size_t>(std::min<uint64_t>(bytes - have, kReadPiece));
        r.data.resize(have + piece);
        f.read(r.data.data() + have, static_cast<std::streamsize>(piece));
        if (static_cast<size_t>(f.gcount()) != piece) {
          throw Error(truncated(where, r.name, have + static_cast<uint64_t>(f.gcount()), bytes));
        }
      }
      out.push_back(std::move(r));
    } catch (const std::bad_alloc&) {
      throw Error(where + " ('" + printable(r.name) + "'): its " + std::to_string(bytes) +
                  " bytes do not fit in memory");
    }
  }
  return out;
}

}  // namespace cgemm::launcher
