// cgemm-bench --parts: runs the chosen studies on one rank's backend and writes their tables.

#include <mpi.h>

#include <algorithm>
#include <sstream>

#include "bench/l2_flush_memory.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/context.hpp"
#include "common/job.hpp"
#include "common/output_files.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

int run_parts(const BenchConfig& cfg, const std::string& command, const std::string& when) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string error;
  if (world != 1) {
    error = "--parts measures one rank's device alone: run it with one rank (mpirun -np 1), not " +
            std::to_string(world);
  }
  const bool interference_asked =
      std::find(cfg.parts.begin(), cfg.parts.end(), "interference") != cfg.parts.end();
  if (error.empty() && interference_asked && cfg.overlap.num_max_streams < 2) {
    error = "--parts interference needs a second compute stream for the copy: --num_max_streams " +
            std::to_string(cfg.overlap.num_max_streams) + " (at least 2)";
  }
  if (error.empty()) {
    try {
      for (const NamedPath& out : parts_outputs(cfg.out, cfg.parts)) check_writable(out);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  TorchChunkTable torch;
  if (error.empty() && !cfg.torch_chunks.empty()) {
    try {
      torch = read_torch_chunks(cfg.torch_chunks);
    } catch (const std::exception& e) {
      error = e.what();
    }
    // A file of the other dtype would join no row: refused, not left blank.
    const std::string dtype = chunk_dtype(cfg.quantization);
    if (error.empty() && torch.dtype != dtype) {
      error = "--torch_chunks: '" + cfg.torch_chunks + "' holds " + torch.peer + " times of " +
              torch.dtype + " chunks, but --parts chunking times " + dtype + " chunks (" +
              (dtype == "bf16" ? "bench/peers/torch_chunking.py's CSV joins bf16; no --scaling"
                               : "bench/peers/torch_scaled_mm.py's CSV joins e4m3 x e4m3") +
              ")";
    }
  }
  if (any_rank_failed(error)) return kExitUsage;

  Settings s;
  s.warmup = cfg.warmup;
  s.iterations = cfg.iterations;
  s.l2_bytes = static_cast<size_t>(cfg.l2_mib * 1048576.0);
  s.tps = cfg.parts_tp;
  s.chunks_per_rank = cfg.parts_chunks_per_rank;
  s.max_copy_mib = cfg.parts_max_copy_mib;
  s.quantization = cfg.quantization;
  s.grouped_divide = cfg.parts_grouped_divide;
  // The grouped study asked for first ("": none), named in the CPU's refusal below.
  std::string grouped_asked;
  for (const std::string& study : cfg.parts) {
    if (grouped_asked.empty() && (study == "grouped" || study == "grouped_fp8")) {
      grouped_asked = study;
    }
  }
  std::vector<BenchShape> shapes;
  for (const std::string& name : cfg.cases) shapes.push_back(bench_shape(name));

  std::ostringstream md;
  std::vector<std::pair<std::string, std::string>> csvs;  // study, CSV text
  try {
    Context ctx(MPI_COMM_WORLD, MeshConfig{1, 1, "dp", "tpsp"},
                BackendOptions{cfg.backend, cfg.gpu_sharing, cfg.timeout, nullptr, cfg.transport},
                cfg.overlap);
    if (any_rank_failed(l2_memory_refusal(cfg.l2_mib, ctx))) return kExitUsage;
    Backend& be = ctx.backend();
    // The full MoE cases are tens of TFLOP a round: hours on a CPU.
    const bool cpu_full =
        !grouped_asked.empty() && be.kind() == BackendKind::kCpu && s.grouped_divide < 16;
    if (any_rank_failed(cpu_full ? "--parts " + grouped_asked +
                                       " on the CPU backend needs "
                                       "--parts_grouped_divide 16 or more (the full MoE cases are "
                                       "for the GPU); got " +
                                       std::to_string(s.grouped_divide)
                                 : "")) {
      return kExitUsage;
    }
    md << "Run " << when << ", one rank, command: `" << command << "`\n\n```\n"
       << be.describe() << "\n```\n";
    for (const std::string& study : cfg.parts) {
      say("== " + study);
      Table t = study == "chunking"       ? chunking(be, shapes, s, torch)
                : study == "interference" ? interference(be, shapes, s)
                : study == "quantize"     ? quantize_bandwidth(be, s)
                : study == "grouped"      ? grouped(be, s)
                : study == "grouped_fp8"  ? grouped_fp8(be, s)
                                          : copy_bandwidth(be, s);
      md << "\n### " << study << "\n\n" << t.markdown();
      csvs.emplace_back(study, t.csv());
    }
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  std::string werr;
  try {
    for (const auto& [study, csv] : csvs) {
      write_replacing("--out", cfg.out + "/cgemm_parts_" + study + ".csv", csv);
    }
    write_replacing("--out", cfg.out + "/cgemm_parts.md", md.str());
    say("\n" + md.str());
    std::string files = cfg.out + "/cgemm_parts.md";
    for (const auto& [study, csv] : csvs) files += ", cgemm_parts_" + study + ".csv";
    say("written: " + files);
  } catch (const std::exception& e) {
    werr = e.what();
  }
  return any_rank_failed(werr) ? kExitUsage : 0;
}

}  // namespace cgemm::launcher::parts
