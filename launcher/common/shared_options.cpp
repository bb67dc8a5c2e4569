#include "shared_options.hpp"

#include <cmath>

#include <boost/program_options.hpp>

#include "cgemm/core/process_timer.hpp"

namespace cgemm::launcher {

namespace po = boost::program_options;

namespace {

using Row = OptionRow<SharedOptions>;
using G = OptionGroup;

template <typename T, typename Field>
Row number(std::string name, G group, const char* value_name, std::string unit, std::string help,
           Field field, T min, std::string what, Sweep sweep = Sweep::kYes) {
  return number_row<SharedOptions, T>(std::move(name), group, value_name, std::move(unit),
                                      std::move(help), field, min, std::move(what), sweep);
}

template <typename Field>
Row boolean(std::string name, G group, std::string help, Field field, Sweep sweep = Sweep::kYes) {
  return bool_row<SharedOptions>(std::move(name), group, std::move(help), field, sweep);
}

// --help and --version: switches of the command line only.
Row command_switch(std::string name, std::string help) {
  return Row{std::move(name), G::kGeneral, std::move(help), "", true, Sweep::kPlain, {}, {}, {}};
}

std::vector<Row> make_rows() {
  std::vector<Row> rows;
  rows.push_back(command_switch("help,h", "print this help and exit"));
  rows.push_back(command_switch("version", "print the version and exit"));
  Row config{"config",
             G::kGeneral,
             "INI file of options: one 'NAME = VALUE' per line (names as below, without the "
             "dashes), '#' starts a comment, no [sections]; the command line overrides the file",
             "path",
             false,
             Sweep::kPlain,
             [](const SharedOptions&) { return po::value<std::string>()->value_name("FILE"); },
             [](const OptionReader& r, SharedOptions& s) { s.config_file = r.file(); },
             {}};
  rows.push_back(std::move(config));

  rows.push_back(number<int>(
      "dp", G::kMesh, "N", "ranks",
      "data-parallel size: groups of tp ranks, each running its own batch / dp sequences",
      [](auto& s) -> auto& { return s.dp; }, 1, "must be at least 1 [ranks]", Sweep::kRefused));

  rows.push_back(number<int>(
      "warmup", G::kRun, "N", "iterations", "untimed iterations before the timed ones",
      [](auto& s) -> auto& { return s.warmup; }, 0, "must be 0 or more [iterations]"));
  rows.push_back(number<int>(
      "iterations", G::kRun, "N", "iterations",
      "timed iterations; times are reported in ms (cgemm-bench adds GB/s)",
      [](auto& s) -> auto& { return s.iterations; }, 1, "must be at least 1 [iterations]"));
  rows.push_back(Row{
      "timeout", G::kRun,
      "seconds any wait may last (a peer's data, a collective, a barrier, the GPU, the "
      "bootstrap) before the rank names what it waited for and ends the job (exit 4); 0: wait "
      "forever; at most 1e7 (about 115 days)",
      "s", true, Sweep::kPlain,
      [](const SharedOptions& d) {
        return po::value<double>()->value_name("S")->default_value(
            d.timeout, float_text(static_cast<float>(d.timeout)));
      },
      [](const OptionReader& r, SharedOptions& s) {
        s.timeout = r.get<double>("timeout");
        if (!std::isfinite(s.timeout) || s.timeout < 0 || s.timeout > kMaxTimeoutSeconds) {
          r.fail("timeout", float_text(static_cast<float>(s.timeout)),
                 "must be 0 (wait forever) or a positive number of seconds up to 1e7 (about "
                 "115 days)");
        }
      },
      [](std::ostream& out, const SharedOptions& s) { out << "timeout = " << s.timeout << "\n"; }});
  rows.push_back(Row{
      "backend", G::kRun,
      "auto | cpu | cuda. auto: cuda when this cgemm has CUDA and every rank has a GPU of its "
      "own, else cpu (said so when GPUs are short). cuda: ends with one message when a GPU is "
      "missing or shared, unless gpu_sharing is on",
      "", true, Sweep::kRefused,
      [](const SharedOptions& d) {
        return po::value<std::string>()->value_name("B")->default_value(backend_name(d.backend));
      },
      [](const OptionReader& r, SharedOptions& s) {
        const auto text = r.get<std::string>("backend");
        try {
          s.backend = parse_backend(text);
        } catch (const Error& e) {
          r.fail("backend", text, e.what());
        }
      },
      [](std::ostream& out, const SharedOptions& s) {
        out << "backend = " << backend_name(s.backend) << "\n";
      }});
  rows.push_back(boolean(
      "gpu_sharing", G::kRun,
      "let ranks of a host share its GPUs on the CUDA backend (rank -> GPU by local rank "
      "modulo the GPU count). For correctness runs of any tp on few GPUs: no NCCL (it refuses "
      "two ranks of a communicator on one GPU), every collective over the copy engines, "
      "use_ce must stay on, and times are not a speed measurement",
      [](auto& s) -> auto& { return s.gpu_sharing; }, Sweep::kRefused));
  rows.push_back(
      Row{"transport", G::kRun,
          "auto | mpi | ucx | nccl | ce: how the ring's chunks move between tensor-parallel peers. "
          "auto: today's choice (cpu: MPI; cuda: copy engines inside a node, NCCL across), as UCX "
          "has not measured faster. mpi: the CPU backend; nccl, ce: the CUDA backend; ucx (UCP "
          "puts, needs a cgemm built with UCX): both, the CUDA backend staging device buffers "
          "through pinned host memory. A forced transport that cannot be made or cannot reach a "
          "peer ends the job with one message",
          "", true, Sweep::kRefused,
          [](const SharedOptions& d) {
            return po::value<std::string>()->value_name("T")->default_value(
                transport_kind_name(d.transport));
          },
          [](const OptionReader& r, SharedOptions& s) {
            const auto text = r.get<std::string>("transport");
            try {
              s.transport = parse_transport_kind(text);
            } catch (const Error& e) {
              r.fail("transport", text, e.what());
            }
          },
          [](std::ostream& out, const SharedOptions& s) {
            out << "transport = " << transport_kind_name(s.transport) << "\n";
          }});
  rows.push_back(path_row<SharedOptions>(
      "trace", G::kRun, "FILE",
      "record one extra overlapped call of each GEMM on every rank (every GEMM chunk, "
      "transfer, reorder and partial sum) and write it as Chrome trace-event JSON to FILE "
      "(open in Perfetto) and as an SVG timeline to FILE.svg",
      [](auto& s) -> auto& { return s.trace; }));

  rows.push_back(
      Row{"overlap", G::kOverlap,
          "auto | on | off: whether execute() overlaps; auto decides by a rule from the shape and "
          "the mesh, the same on every run (overlapped when tp > 1 and a chunk's GEMM, with "
          "chunks_per_rank one piece's, is at least 2^34 FLOP, else sequential). "
          "cgemm-run checks and times the overlapped schedule whatever this says (cgemm-bench "
          "times both paths and reports which one execute() keeps)",
          "", true, Sweep::kYes,
          [](const SharedOptions& d) {
            return po::value<std::string>()->value_name("P")->default_value(
                overlap_policy_name(d.overlap.policy));
          },
          [](const OptionReader& r, SharedOptions& s) {
            const auto text = r.get<std::string>("overlap");
            try {
              s.overlap.policy = parse_overlap_policy(text);
            } catch (const Error& e) {
              r.fail("overlap", text, e.what());
            }
          },
          [](std::ostream& out, const SharedOptions& s) {
            out << "overlap = " << overlap_policy_name(s.overlap.policy) << "\n";
          }});
  rows.push_back(number<int>(
      "num_max_streams", G::kOverlap, "N", "streams",
      "GEMM (compute) streams the all-gather's chunk GEMMs may use (aggregate mode computes "
      "two chunks at once); the reduce-scatter's partials run in order on one stream so each "
      "is sent as soon as it is done; shapes the schedule on both backends",
      [](auto& s) -> auto& { return s.overlap.num_max_streams; }, 1,
      "must be at least 1 [streams]"));
  rows.push_back(number<int>(
      "compute_stream_priority", G::kOverlap, "P", "priority level",
      "priority of the compute streams, 0 = highest; CUDA only, the CPU backend ignores it",
      [](auto& s) -> auto& { return s.overlap.compute_stream_priority; }, 0,
      "must be 0 (highest) or more"));
  rows.push_back(number<int>(
      "communication_stream_priority", G::kOverlap, "P", "priority level",
      "priority of the communication streams, 0 = highest; CUDA only, the CPU backend ignores "
      "it",
      [](auto& s) -> auto& { return s.overlap.communication_stream_priority; }, 0,
      "must be 0 (highest) or more"));
  rows.push_back(number<int>(
      "num_sm_for_communication", G::kOverlap, "N", "SMs",
      "Transformer Engine's bound on the SMs the transport may take: accepted for its configs "
      "but without effect in cgemm: the copy engines take no SMs, and capping NCCL's CTAs "
      "starves it (2 CTAs: 43 against about 300 GB/s); NCCL's bounds come from "
      "CGEMM_NCCL_MIN_CTAS / CGEMM_NCCL_MAX_CTAS",
      [](auto& s) -> auto& { return s.overlap.num_sm_for_communication; }, 1,
      "must be at least 1 [SMs]"));
  rows.push_back(boolean(
      "use_ce", G::kOverlap,
      "move chunks with copy engines over CUDA IPC where the TP group shares "
      "a node; CUDA only, the CPU backend ignores it",
      [](auto& s) -> auto& { return s.overlap.use_ce; }));
  rows.push_back(boolean(
      "aggregate_all_gather", G::kOverlap,
      "all-gather two chunks per step, opposite ways round the ring; shapes "
      "the schedule on both backends",
      [](auto& s) -> auto& { return s.overlap.aggregate_all_gather; }));
  rows.push_back(number<int>(
      "chunks_per_rank", G::kOverlap, "N", "pieces",
      "pieces each ring chunk moves and multiplies in (tp x N transfers and GEMMs per call): "
      "a step's first GEMM waits for one piece instead of the whole chunk, but smaller GEMMs "
      "cost more (docs/PERFORMANCE.md's chunking table); N must divide a chunk's rows, or "
      "the local batch for batch-first activations; shapes the schedule on both backends",
      [](auto& s) -> auto& { return s.overlap.chunks_per_rank; }, 1,
      "must be at least 1 [pieces]"));
  return rows;
}

}  // namespace

const std::vector<OptionRow<SharedOptions>>& shared_rows() {
  static const std::vector<OptionRow<SharedOptions>> rows = make_rows();
  return rows;
}

void resolve_dp_tp(int& tp, int dp, int64_t batch, int64_t seq_len, int world_size,
                   const std::string& batch_use, int fsdp) {
  const std::string world = std::to_string(world_size);
  if (world_size < 1) throw OptionError("world size " + world + ": must be at least 1");
  if (dp < 1) throw OptionError("--dp " + std::to_string(dp) + ": must be at least 1");
  if (fsdp < 1) throw OptionError("--fsdp " + std::to_string(fsdp) + ": must be at least 1");
  if (tp < 0) {
    throw OptionError("--tp " + std::to_string(tp) + ": must be 0 (world size / dp) or more");
  }
  // The data-parallel ranks of one tp position: dp replicas of fsdp ranks each (fsdp 1: dp).
  const std::string dps =
      fsdp == 1 ? std::to_string(dp) : std::to_string(dp) + " x --fsdp " + std::to_string(fsdp);
  const int64_t data = static_cast<int64_t>(dp) * fsdp;
  if (world_size % data != 0) {
    throw OptionError("--dp " + dps + " does not divide the world size " + world);
  }
  if (tp == 0) {
    tp = static_cast<int>(world_size / data);
  } else if (tp * data != world_size) {
    throw OptionError("--tp " + std::to_string(tp) + " x --dp " + dps + " = " +
                      std::to_string(tp * data) + " ranks, but the world size is " + world +
                      (fsdp == 1 ? " (tp = 0 takes world size / dp)"
                                 : " (tp = 0 takes world size / (dp x fsdp))"));
  }
  if (batch % data != 0) {
    throw OptionError("--batch " + std::to_string(batch) + " is not divisible by --dp " + dps +
                      " (" + batch_use + ")");
  }
  if (seq_len % tp != 0) {
    throw OptionError("--seq_len " + std::to_string(seq_len) + " is not divisible by tp " +
                      std::to_string(tp) +
                      " (the sequence is sharded over the tensor-parallel group)");
  }
}

}  // namespace cgemm::launcher
