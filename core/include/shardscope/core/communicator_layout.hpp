#pragma once
// Which ranks share each communicator instance of a schedule, for whoever runs or simulates every
// rank: the host executor's world and the simulator's per-rank replay.
//
// Communicators smaller than the world are contiguous blocks of ranks (FSDP's shard groups),
// except "replicate", whose members are strided across the shard groups (HSDP: rank r replicates
// with r ± shard size), as torch's DeviceMesh lays out (replicate, shard).

#include "shardscope/core/schedule.hpp"

namespace shardscope {

/// Which instance of a communicator a rank belongs to and its position in it.
struct Membership {
  int instance = 0;
  int position = 0;
  int size = 1;
};

Membership membership(const Communicator& comm, int world_size, int rank);
/// The inverse: the rank at `position` of `instance`.
int rank_at(const Communicator& comm, int world_size, int instance, int position);

}  // namespace shardscope
