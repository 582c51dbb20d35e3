#include "shardscope/core/communicator_layout.hpp"

#include <algorithm>

namespace shardscope {

Membership membership(const Communicator& comm, int world_size, int rank) {
  const int size = std::min(comm.size, world_size);
  if (size >= world_size) return {0, rank, world_size};
  if (comm.name == "replicate") {
    const int stride = world_size / size;
    return {rank % stride, rank / stride, size};
  }
  return {rank / size, rank % size, size};
}

int rank_at(const Communicator& comm, int world_size, int instance, int position) {
  const int size = std::min(comm.size, world_size);
  if (size >= world_size) return position;
  if (comm.name == "replicate") return position * (world_size / size) + instance;
  return instance * size + position;
}

}  // namespace shardscope
