#include "output_dump.hpp"

#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/watchdog.hpp"
#include "output_files.hpp"

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
  std::string line;
  if (!std::getline(f, line) || line != kMagic) {
    throw Error(path + ": not a cgemm output dump (first line is not '" + kMagic + "')");
  }
  std::vector<DumpRecord> out;
  while (std::getline(f, line)) {
    const std::string where = path + ", tensor " + std::to_string(out.size() + 1);
    DumpRecord r;
    try {
      const nlohmann::json h = nlohmann::json::parse(line);
      r.name = h.at("name").get<std::string>();
      r.dtype = parse_dtype(h.at("dtype").get<std::string>());
      r.shape = h.at("shape").get<Shape>();
      const auto bytes = h.at("bytes").get<uint64_t>();
      for (int64_t d : r.shape) {
        if (d < 0) throw Error("negative dimension");
      }
      if (bytes != static_cast<uint64_t>(num_elements(r.shape)) * dtype_size(r.dtype)) {
        throw Error("bytes " + std::to_string(bytes) + " do not match shape " + shape_str(r.shape) +
                    " of " + std::string(dtype_name(r.dtype)));
      }
      r.data.resize(bytes);
    } catch (const std::exception& e) {
      throw Error(where + ": bad header line: " + e.what());
    }
    f.read(r.data.data(), static_cast<std::streamsize>(r.data.size()));
    if (static_cast<size_t>(f.gcount()) != r.data.size()) {
      throw Error(where + " ('" + r.name + "'): truncated, " + std::to_string(f.gcount()) + " of " +
                  std::to_string(r.data.size()) + " bytes");
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace cgemm::launcher
