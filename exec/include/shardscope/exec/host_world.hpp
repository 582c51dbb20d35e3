#pragma once
// The ranks of a host run and the collectives between them, over one shared memory region: the
// heap when ranks are threads of one process, a POSIX shared-memory object when they are
// processes. Collectives move real data: all-gather concatenates the ranks' chunks, reduce-scatter
// and all-reduce sum them in the IR's dtype (dtype_codec.hpp).
//
// Protocol, per communicator instance (the ranks that share one NCCL communicator): a collective
// is the n-th on its communicator for every rank (each rank counts its own). A rank publishes its
// chunk and what it issued (op id, kind, dtype, elements, arrival time), then waits until all
// peers have published their n-th; every rank checks that all issued the same op (else an error
// naming both ops), reads the peers' chunks into its own output, and waits until all have read
// before its chunk slot may be reused. Waits end at a deadline or when any rank aborts, never hang.
// Memory ordering: slots are written before the release increment of the arrival counter, and
// read after an acquire load that sees all arrivals.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shardscope/core/communicator_layout.hpp"
#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule.hpp"

namespace shardscope::exec {

/// A collective that could not complete: peers issued different ops, a peer never came, or the
/// run was aborted. The message names the op.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

struct HostWorldLayout {
  int world_size = 1;
  std::vector<Communicator> communicators;
  std::int64_t max_chunk_bytes =
      std::int64_t{64} * 1024;  // per rank per collective: larger chunks are capped
};

/// One collective as a rank issues it. Input and output hold elements of `dtype`:
///   all_gather      input: chunk        output: size × chunk (rank order)
///   reduce_scatter  input: size × chunk output: chunk (this rank's position)
///   all_reduce      input: size × chunk output: size × chunk
struct CollectiveCall {
  OpId op = kNone;
  OpKind kind = OpKind::all_gather;
  CommId comm = kNone;
  DType dtype = DType::fp32;
  std::int64_t chunk_elements = 0;
  std::span<const std::byte> input;
  std::span<std::byte> output;
};

class HostWorld {
 public:
  using Clock = std::chrono::steady_clock;

  /// Bytes of shared memory a world with `layout` needs.
  static std::size_t region_bytes(const HostWorldLayout& layout);
  /// Elements per rank of a collective of `bytes` in `dtype` on a communicator of `size` ranks,
  /// capped so the chunk fits its slot (at least one).
  static std::int64_t chunk_elements(const HostWorldLayout& layout, Bytes bytes, DType dtype,
                                     int size);

  /// Uses `region` (region_bytes long, zero-filled by whoever created it) for the world's state.
  /// Throws ValidationError when a communicator does not divide the world.
  HostWorld(std::byte* region, HostWorldLayout layout);

  const HostWorldLayout& layout() const { return layout_; }

  /// Runs `call` for `rank`; returns when every peer has read this rank's data. `arrival` is
  /// when this rank arrived (reported to peers); returns when the last peer arrived. Throws
  /// CollectiveError without aborting the world: the caller records the error, then aborts.
  Clock::time_point run(int rank, const CollectiveCall& call, Clock::time_point deadline);

  /// Tells every rank to stop waiting (first error anywhere, Ctrl-C).
  void abort();
  bool aborted() const;

 private:
  struct Slot;
  Slot slot(CommId comm, int instance) const;

  std::byte* region_;
  HostWorldLayout layout_;
  std::vector<std::size_t> comm_offset_;  // byte offset of each communicator's first instance
  std::vector<std::int64_t> sequence_;    // per rank × communicator: collectives issued so far
};

}  // namespace shardscope::exec
