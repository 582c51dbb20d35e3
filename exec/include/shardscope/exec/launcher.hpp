#pragma once
// Joining a multi-process job. A job comes from torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm's (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE, SLURM_NODELIST: the first node is
// the master), or Open MPI's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, with
// MASTER_ADDR), in that order of precedence; MASTER_PORT defaults to 29500 as torchrun's does.
//
// Rank 0 serves a rendezvous over TCP: every rank connects (retrying until the timeout), says who
// it is (its rank and the job's identity: a rank of another job is refused), and the job then
// exchanges short messages through rank 0: gather (rank 0 receives one message per rank) and
// broadcast (every rank receives rank 0's). The run uses it to check that every rank runs the same
// schedule (its hash) in the same world, to hand out the bootstrap blob (the shared-memory name
// here; NCCL's unique id with the CUDA backend), and to collect results.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardscope/core/schedule.hpp"

struct sockaddr_in;  // <netinet/in.h>

namespace shardscope::exec {

struct JobEnv {
  std::string launcher;  // "torchrun", "slurm", "openmpi", "shardscope" (--nproc-per-node)
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// What every rank of one job shares and another job does not: the launcher's id of the run
  /// (--nproc-per-node's random SHARDSCOPE_JOB_ID, torchrun's TORCHELASTIC_RUN_ID, Slurm's job
  /// and step, Open MPI's job), to which the caller may add (the command line's hash). The
  /// rendezvous refuses a peer whose identity differs: two jobs given one MASTER_PORT do not mix.
  std::string identity;
  std::string run_id;  // the launcher's id alone (SHARDSCOPE_JOB_ID under --nproc-per-node)
};

/// The shared-memory object of a --nproc-per-node run: named by its run id, so that the launcher
/// removes it even when a rank was killed before it could.
std::string launched_run_shared_memory(const std::string& run_id);

using GetEnv = std::function<const char*(const char*)>;

/// The job this process belongs to, or nullopt when no launcher set one. Throws
/// ValidationError naming each missing or malformed variable.
std::optional<JobEnv> job_from_environment(const GetEnv& getenv);

/// The first host of a Slurm node list: "gpu[003-006,9],login1" → "gpu003".
std::string first_slurm_host(const std::string& nodelist);

/// The CUDA device a rank uses among the `visible` ones: its local rank where every rank of the
/// node sees all the node's GPUs (torchrun, --nproc-per-node), device 0 where each sees one
/// (Slurm --gpus-per-task=1, CUDA_VISIBLE_DEVICES set per rank). Throws when neither holds.
int device_for_local_rank(int local_rank, int local_world_size, int visible);

/// A stable hash of a schedule (FNV-1a, 64 bits, over its IR JSON): equal on every rank that
/// lowered the same scenario.
std::uint64_t schedule_hash(const Schedule& schedule);

class Rendezvous {
 public:
  /// Connects the job (rank 0 listens, the others connect); throws Error after `timeout`.
  Rendezvous(const JobEnv& job, std::chrono::milliseconds timeout);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  /// Rank 0 gets every rank's message, by rank; the others get an empty list. `what` names the
  /// exchange in a timeout's message ("the ranks' results").
  std::vector<std::string> gather(const std::string& mine, std::string_view what = "a message");
  /// Every rank gets rank 0's `message` (ignored on the others).
  std::string broadcast(const std::string& message, std::string_view what = "a message");

 private:
  using Clock = std::chrono::steady_clock;
  void accept_ranks(Clock::time_point deadline);
  void join(const ::sockaddr_in& addr, Clock::time_point deadline);
  void send(int fd, const std::string& message);
  std::string receive(int fd);
  std::string receive_until(int fd, Clock::time_point deadline);
  /// receive() from `peer`, a timeout or a closed connection named with the exchange and rank.
  std::string receive_from(int peer, std::string_view what);

  JobEnv job_;
  std::chrono::milliseconds timeout_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: the socket of each rank (index 0 unused); others: [rank 0]
};

/// A free TCP port on the loopback interface (for --nproc-per-node).
int free_loopback_port();

/// Runs `argv` as `processes` local ranks (fork + exec, each with torchrun's variables set and a
/// random SHARDSCOPE_JOB_ID) and waits for them. Each rank dies with the launcher (parent-death
/// signal). The first to fail stops the others (SIGTERM, and SIGKILL after `grace` for a rank
/// that does not stop); returns its exit status (0 if none failed). `on_exit(rank, status)` is
/// told about each.
int spawn_local_ranks(const std::vector<std::string>& argv, int processes,
                      const std::function<void(int rank, int status)>& on_exit,
                      std::chrono::milliseconds grace = std::chrono::milliseconds(5'000));

}  // namespace shardscope::exec
