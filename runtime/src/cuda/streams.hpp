#pragma once
// The CUDA backend's streams: num_max_streams compute streams and one communication stream, at
// the priorities OverlapOptions asks for, and the events that order them. Ordering between
// streams is expressed with events only, never host waits.

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace cgemm::cuda {

/// OverlapOptions priorities count from 0 = highest; CUDA's are numerically lowest = highest.
int cuda_priority(int option, int least, int greatest);

class Streams {
 public:
  /// On the current device: `count` (>= 1) compute streams at OverlapOptions priority
  /// `compute_priority`, the communication stream at `communication_priority`.
  Streams(int count, int compute_priority, int communication_priority, std::string where);
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  int count() const { return static_cast<int>(streams_.size()); }
  const std::vector<cudaStream_t>& compute() const { return streams_; }
  cudaStream_t main() const { return streams_[0]; }
  cudaStream_t communication() const { return comm_stream_; }
  /// Compute stream `s`; throws naming `call` when there is no such stream.
  cudaStream_t at(int s, const char* call) const;

  /// Every stream (compute and communication) except stream 0 joins into stream 0, so work
  /// issued next on stream 0 runs after everything issued so far.
  void gather_into_main();
  /// Every other stream waits for what stream 0 has issued so far.
  void fork_from_main();
  /// Compute stream `s` waits for what every other compute stream has issued so far.
  void join_into(int s);
  /// The communication stream waits for what compute stream `s` has issued so far (an
  /// exchange's dependency).
  void communication_after(int s);
  /// The communication stream waits for what every compute stream has issued so far.
  void communication_after_all();
  /// Stream 0 waits for what the caller's stream `external` has issued so far (the start of a
  /// call on a caller's stream). `external` must be a stream of this device: an event of this
  /// device cannot be recorded on another's (the error says so).
  void main_after(cudaStream_t external);
  /// `external` waits for what every compute stream and the communication stream have issued
  /// so far (the end of such a call). Stream 0 gains no dependency.
  void external_after_all(cudaStream_t external);

  /// Whether the work issued now is being captured into a CUDA graph (Backend::begin_capture):
  /// what must not happen inside a capture (a cudaFree, a host wait) asks this first.
  bool capturing() const { return capturing_; }
  void set_capturing(bool on) { capturing_ = on; }

  /// One line: the streams and their priorities, as options and as CUDA numbers.
  std::string describe() const;

 private:
  void check(cudaError_t rc, const std::string& call) const;

  std::string where_;
  int compute_priority_ = 0, communication_priority_ = 0;  // as OverlapOptions numbers them
  int priority_least_ = 0, priority_greatest_ = 0;
  std::vector<cudaStream_t> streams_;
  cudaStream_t comm_stream_ = nullptr;
  std::vector<cudaEvent_t> stream_events_;  // one per compute stream, then the comm stream
  cudaEvent_t after_event_ = nullptr;
  // The caller's stream's point at the start of a call; own events so that no wait of the
  // plan's streams is disturbed by recording them.
  cudaEvent_t external_event_ = nullptr;
  std::vector<cudaEvent_t> external_done_;  // one per compute stream, then the comm stream
  bool capturing_ = false;
};

}  // namespace cgemm::cuda
