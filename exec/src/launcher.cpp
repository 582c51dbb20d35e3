#include "shardscope/exec/launcher.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>
#include <thread>

#include "shardscope/core/error.hpp"
#include "shardscope/core/schedule_io.hpp"

namespace shardscope::exec {
namespace {

using Clock = std::chrono::steady_clock;

std::string system_error(std::string_view what) {
  return fmt::format("{}: {}", what, std::strerror(errno));
}

// Reads an integer variable into `out`; a problem when it is missing or malformed.
void read_int(const GetEnv& getenv, const char* name, int& out, std::vector<Problem>& problems,
              int min_value = 0) {
  const char* text = getenv(name);
  if (text == nullptr) {
    problems.push_back({"", name, "is not set", "an integer"});
    return;
  }
  const std::string_view v(text);
  int value = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc() || end != v.data() + v.size() || value < min_value) {
    problems.push_back(
        {"", name, fmt::format("'{}' is not an integer ≥ {}", v, min_value), "an integer"});
    return;
  }
  out = value;
}

void check_job(const JobEnv& job, std::vector<Problem>& problems) {
  if (job.rank >= job.world_size)
    problems.push_back(
        {"", "rank",
         fmt::format("rank {} is not below the world size {}", job.rank, job.world_size), ""});
  if (job.local_rank >= job.local_world_size)
    problems.push_back({"", "local rank",
                        fmt::format("local rank {} is not below the local world size {}",
                                    job.local_rank, job.local_world_size),
                        ""});
  if (job.master_port < 1 || job.master_port > 65535)
    problems.push_back(
        {"", "MASTER_PORT", fmt::format("{} is not a port", job.master_port), "1..65535"});
}

// The launcher's id of this run of the job, the same on every rank and different for another
// run: --nproc-per-node's random id, torchrun's run id, Slurm's job and step, Open MPI's job.
std::string launcher_job_id(const GetEnv& getenv) {
  const auto get = [&](const char* name) {
    const char* v = getenv(name);
    return v ? std::string(v) : std::string();
  };
  if (auto id = get("SHARDSCOPE_JOB_ID"); !id.empty()) return "shardscope:" + id;
  if (auto id = get("TORCHELASTIC_RUN_ID"); !id.empty()) return "torchrun:" + id;
  if (auto id = get("SLURM_JOB_ID"); !id.empty()) {
    const auto step = get("SLURM_STEP_ID");
    return "slurm:" + id + (step.empty() ? "" : "." + step);
  }
  if (auto id = get("OMPI_MCA_ess_base_jobid"); !id.empty()) return "openmpi:" + id;
  if (auto id = get("PMIX_NAMESPACE"); !id.empty()) return "pmix:" + id;
  return {};
}

void write_all(int fd, const char* data, std::size_t size, Clock::time_point deadline) {
  while (size > 0) {
    pollfd p{fd, POLLOUT, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      throw Error("rendezvous: timed out sending to a peer");
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) throw Error(system_error("rendezvous: a peer closed the connection"));
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void read_all(int fd, char* data, std::size_t size, Clock::time_point deadline) {
  while (size > 0) {
    pollfd p{fd, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      throw Error("rendezvous: timed out");
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n <= 0) throw Error("rendezvous: a peer closed the connection (did it fail?)");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    throw Error(fmt::format("rendezvous: cannot resolve MASTER_ADDR '{}'", host));
  sockaddr_in addr{};
  std::memcpy(&addr, found->ai_addr, sizeof(addr));
  ::freeaddrinfo(found);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

}  // namespace

std::optional<JobEnv> job_from_environment(const GetEnv& getenv) {
  JobEnv job;
  std::vector<Problem> problems;
  if (const char* port = getenv("MASTER_PORT")) {
    (void)port;
    read_int(getenv, "MASTER_PORT", job.master_port, problems, 1);
  }
  if (getenv("RANK") != nullptr || getenv("WORLD_SIZE") != nullptr) {
    job.launcher = "torchrun";
    read_int(getenv, "RANK", job.rank, problems);
    read_int(getenv, "WORLD_SIZE", job.world_size, problems, 1);
    job.local_world_size = job.world_size;
    job.local_rank = job.rank;
    if (getenv("LOCAL_RANK")) read_int(getenv, "LOCAL_RANK", job.local_rank, problems);
    if (getenv("LOCAL_WORLD_SIZE"))
      read_int(getenv, "LOCAL_WORLD_SIZE", job.local_world_size, problems, 1);
    if (const char* addr = getenv("MASTER_ADDR")) job.master_addr = addr;
  } else if (getenv("SLURM_PROCID") != nullptr) {
    job.launcher = "slurm";
    read_int(getenv, "SLURM_PROCID", job.rank, problems);
    read_int(getenv, "SLURM_NTASKS", job.world_size, problems, 1);
    read_int(getenv, "SLURM_LOCALID", job.local_rank, problems);
    job.local_world_size = job.world_size;
    if (getenv("SLURM_NTASKS_PER_NODE")) {
      read_int(getenv, "SLURM_NTASKS_PER_NODE", job.local_world_size, problems, 1);
    } else if (const char* per_node = getenv("SLURM_TASKS_PER_NODE")) {  // "4(x2)" or "4,3"
      const std::string_view v(per_node);
      int n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec == std::errc() && n > 0) job.local_world_size = n;
    }
    if (const char* addr = getenv("MASTER_ADDR")) {
      job.master_addr = addr;
    } else if (const char* nodes = getenv("SLURM_NODELIST")) {
      job.master_addr = first_slurm_host(nodes);
    } else {
      problems.push_back(
          {"", "SLURM_NODELIST", "is not set", "the job's node list, or MASTER_ADDR"});
    }
  } else if (getenv("OMPI_COMM_WORLD_RANK") != nullptr) {
    job.launcher = "openmpi";
    read_int(getenv, "OMPI_COMM_WORLD_RANK", job.rank, problems);
    read_int(getenv, "OMPI_COMM_WORLD_SIZE", job.world_size, problems, 1);
    read_int(getenv, "OMPI_COMM_WORLD_LOCAL_RANK", job.local_rank, problems);
    read_int(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE", job.local_world_size, problems, 1);
    if (const char* addr = getenv("MASTER_ADDR")) {
      job.master_addr = addr;
    } else if (job.local_world_size != job.world_size) {
      problems.push_back({"", "MASTER_ADDR", "is not set (Open MPI does not name a master)",
                          "rank 0's host name or address"});
    }
  } else {
    return std::nullopt;
  }
  if (const char* by = getenv("SHARDSCOPE_LAUNCHER"); by && std::string_view(by) == "shardscope")
    job.launcher = "shardscope";
  if (const char* id = getenv("SHARDSCOPE_JOB_ID")) job.run_id = id;
  job.identity = launcher_job_id(getenv);
  check_job(job, problems);
  throw_if_any(std::move(problems));
  return job;
}

int device_for_local_rank(int local_rank, int local_world_size, int visible) {
  if (visible < 1) throw Error("no CUDA device is visible to this rank");
  if (visible == 1) return 0;
  if (visible >= local_world_size && local_rank < visible) return local_rank;
  throw Error(
      fmt::format("{} local ranks share {} visible CUDA devices: give each rank one GPU "
                  "(CUDA_VISIBLE_DEVICES, Slurm --gpus-per-task=1) or every rank all of them",
                  local_world_size, visible));
}

std::string first_slurm_host(const std::string& nodelist) {
  std::string first = nodelist.substr(0, nodelist.find(','));
  const auto open = first.find('[');
  if (open == std::string::npos) return first;
  // "gpu[003-006,9]": the prefix and the first number of the range, zero padding kept.
  const std::string inside = nodelist.substr(open + 1);
  const auto stop = inside.find_first_of("-,]");
  return first.substr(0, open) + inside.substr(0, stop);
}

std::uint64_t schedule_hash(const Schedule& schedule) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : schedule_to_json(schedule)) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

namespace {

// A joining rank's hello: "rank R IDENTITY". nullopt when it is not one.
std::optional<std::pair<int, std::string>> parse_hello(const std::string& hello) {
  if (!hello.starts_with("rank ")) return std::nullopt;
  const std::string_view rest = std::string_view(hello).substr(5);
  int rank = -1;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), rank);
  if (ec != std::errc() || (end != rest.data() + rest.size() && *end != ' ')) return std::nullopt;
  const std::size_t used = static_cast<std::size_t>(end - rest.data());
  return std::pair{rank, std::string(rest.substr(std::min(rest.size(), used + 1)))};
}

// How long rank 0 waits for a connected peer's hello: a stranger that connects and says nothing
// must not hold up the job's own ranks.
constexpr std::chrono::milliseconds kHelloTimeout{5'000};

}  // namespace

Rendezvous::Rendezvous(const JobEnv& job, std::chrono::milliseconds timeout)
    : job_(job), timeout_(timeout) {
  const auto deadline = Clock::now() + timeout_;
  const sockaddr_in addr = resolve(job.master_addr, job.master_port);
  if (job.rank == 0) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int yes = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    sockaddr_in any = addr;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&any), sizeof(any)) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      const std::string why = system_error(fmt::format("port {}", job.master_port));
      ::close(listen_fd_);
      listen_fd_ = -1;
      throw Error(fmt::format(
          "rendezvous: rank 0 cannot listen on {} (MASTER_PORT; another job on this port?)", why));
    }
    accept_ranks(deadline);
    return;
  }
  join(addr, deadline);
}

// Rank 0: accepts until every rank of this job has said hello. A peer of another job (another
// identity: two jobs given one MASTER_PORT) or a rank already taken is told why and closed, and
// the wait goes on for the job's own ranks.
void Rendezvous::accept_ranks(Clock::time_point deadline) {
  peers_.assign(static_cast<std::size_t>(job_.world_size), -1);
  std::string refused;  // the last stranger, for the timeout message
  for (int joined = 1; joined < job_.world_size;) {
    pollfd p{listen_fd_, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      std::string missing;
      for (int r = 1; r < job_.world_size; ++r) {
        if (peers_[static_cast<std::size_t>(r)] < 0)
          missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      }
      throw Error(
          fmt::format("rendezvous: only {} of {} ranks joined within {} ms (not joined: "
                      "rank {}){}",
                      joined, job_.world_size, timeout_.count(), missing,
                      refused.empty() ? "" : "; refused: " + refused));
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;   // the peer gave up between poll and accept
    const int nodelay = 1;  // small messages: Nagle plus delayed ACKs would add 40 ms to each
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
    std::optional<std::pair<int, std::string>> hello;
    try {
      hello = parse_hello(receive_until(fd, std::min(deadline, Clock::now() + kHelloTimeout)));
    } catch (const Error&) {
    }
    std::string why;
    if (!hello) {
      why = "a connection that did not say which rank it is";
    } else if (hello->second != job_.identity) {
      why = fmt::format("a rank {} of another job ('{}', this job is '{}')", hello->first,
                        hello->second, job_.identity);
    } else if (hello->first <= 0 || hello->first >= job_.world_size) {
      why = fmt::format("a peer claiming rank {} (world {})", hello->first, job_.world_size);
    } else if (peers_[static_cast<std::size_t>(hello->first)] != -1) {
      why = fmt::format("a second rank {}", hello->first);
    }
    if (!why.empty()) {
      try {
        send(fd, "refused: rank 0 at " + job_.master_addr + ":" + std::to_string(job_.master_port) +
                     " refused " + why);
      } catch (const Error&) {
      }
      ::close(fd);
      refused = why;
      continue;
    }
    send(fd, "ok");
    peers_[static_cast<std::size_t>(hello->first)] = fd;
    ++joined;
  }
}

// A rank other than 0: connects (rank 0 may not listen yet: retried until the deadline), says
// who it is and learns whether it was let in.
void Rendezvous::join(const sockaddr_in& addr, Clock::time_point deadline) {
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      peers_ = {fd};
      send(fd, fmt::format("rank {} {}", job_.rank, job_.identity));
      const std::string answer = receive_until(fd, deadline);
      if (answer == "ok") return;
      // Two jobs on one port: bad input, as a wrong variable is.
      throw ValidationError(
          {Problem{"", "MASTER_PORT",
                   fmt::format("rank {}: {}", job_.rank,
                               answer.starts_with("refused: ") ? answer.substr(9) : answer),
                   "a MASTER_PORT of its own for each job"}});
    }
    ::close(fd);
    if (Clock::now() > deadline) {
      throw Error(fmt::format("rendezvous: rank {} could not reach rank 0 at {}:{} within {} ms",
                              job_.rank, job_.master_addr, job_.master_port, timeout_.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Rendezvous::~Rendezvous() {
  for (int fd : peers_) {
    if (fd >= 0) ::close(fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void Rendezvous::send(int fd, const std::string& message) {
  const auto deadline = Clock::now() + timeout_;
  const auto size = static_cast<std::uint32_t>(message.size());
  const std::uint32_t wire = htonl(size);
  write_all(fd, reinterpret_cast<const char*>(&wire), sizeof(wire), deadline);
  write_all(fd, message.data(), message.size(), deadline);
}

std::string Rendezvous::receive(int fd) {
  return receive_until(fd, Clock::now() + timeout_);
}

std::string Rendezvous::receive_until(int fd, Clock::time_point deadline) {
  std::uint32_t wire = 0;
  read_all(fd, reinterpret_cast<char*>(&wire), sizeof(wire), deadline);
  const std::uint32_t size = ntohl(wire);
  if (size > (1u << 20)) throw Error("rendezvous: a peer sent a message over 1 MiB");
  std::string message(size, '\0');
  read_all(fd, message.data(), size, deadline);
  return message;
}

std::string Rendezvous::receive_from(int peer, std::string_view what) {
  try {
    return receive(peers_[static_cast<std::size_t>(peer)]);  // a rank other than 0 has [rank 0]
  } catch (const Error& e) {
    throw Error(
        fmt::format("rank {}, waiting for {} from rank {}: {} (--timeout {} ms; is rank "
                    "{} stopped, stuck or gone?)",
                    job_.rank, what, peer, e.what(), timeout_.count(), peer));
  }
}

std::vector<std::string> Rendezvous::gather(const std::string& mine, std::string_view what) {
  if (job_.rank != 0) {
    send(peers_[0], mine);
    return {};
  }
  std::vector<std::string> all(static_cast<std::size_t>(job_.world_size));
  all[0] = mine;
  for (std::size_t r = 1; r < all.size(); ++r) all[r] = receive_from(static_cast<int>(r), what);
  return all;
}

std::string Rendezvous::broadcast(const std::string& message, std::string_view what) {
  if (job_.rank != 0) return receive_from(0, what);
  for (std::size_t r = 1; r < peers_.size(); ++r) send(peers_[r], message);
  return message;
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw Error(system_error("cannot find a free loopback port"));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string launched_run_shared_memory(const std::string& run_id) {
  return "/shardscope-run-" + run_id;
}

namespace {

// A random id for one --nproc-per-node run, so that its ranks refuse another run's.
std::string random_job_id() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}", device(), device());
}

// Stops the ranks still running: SIGTERM (with SIGCONT, so a stopped one receives it), then
// SIGKILL for those still there after `grace`. Reaps them and reports each to `on_exit`.
void stop_ranks(std::vector<pid_t>& pids, std::chrono::milliseconds grace,
                const std::function<void(int rank, int status)>& on_exit) {
  for (pid_t pid : pids) {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);
    }
  }
  const auto deadline = Clock::now() + grace;
  for (;;) {
    bool running = false;
    for (std::size_t rank = 0; rank < pids.size(); ++rank) {
      if (pids[rank] <= 0) continue;
      int status = 0;
      const pid_t done = ::waitpid(pids[rank], &status, WNOHANG);
      if (done == 0) {
        running = true;
        continue;
      }
      if (done == pids[rank] && on_exit)
        on_exit(static_cast<int>(rank),
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
      pids[rank] = -1;
    }
    if (!running) return;
    if (Clock::now() > deadline) {
      for (pid_t pid : pids) {
        if (pid > 0) ::kill(pid, SIGKILL);
      }
      for (std::size_t rank = 0; rank < pids.size(); ++rank) {
        if (pids[rank] <= 0) continue;
        int status = 0;
        ::waitpid(pids[rank], &status, 0);
        if (on_exit) on_exit(static_cast<int>(rank), 128 + SIGKILL);
        pids[rank] = -1;
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int spawn_local_ranks(const std::vector<std::string>& argv, int processes,
                      const std::function<void(int rank, int status)>& on_exit,
                      std::chrono::milliseconds grace) {
  const int port = free_loopback_port();
  const std::string job_id = random_job_id();
  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < processes; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      stop_ranks(pids, grace, on_exit);
      throw Error(system_error("fork"));
    }
    if (pid == 0) {
      // A rank dies with its launcher, as torchrun's workers do: killed launcher, no orphans.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher) std::_Exit(128 + SIGTERM);  // it died before the prctl
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(processes).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(processes).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("SHARDSCOPE_LAUNCHER", "shardscope", 1);
      ::setenv("SHARDSCOPE_JOB_ID", job_id.c_str(), 1);
      std::vector<char*> args;
      args.reserve(argv.size() + 1);
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv("/proc/self/exe", args.data());
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  // Each rank bounds its own waits (--timeout); the first to fail stops the others, and a rank
  // that does not stop (stopped by a signal, stuck) is killed after `grace`.
  int first_failure = 0;
  for (int left = processes; left > 0; --left) {
    int status = 0;
    const pid_t pid = ::wait(&status);
    if (pid < 0) break;
    const auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end()) {
      ++left;
      continue;
    }
    const int rank = static_cast<int>(it - pids.begin());
    *it = -1;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (on_exit) on_exit(rank, code);
    if (code != 0) {
      first_failure = code;
      stop_ranks(pids, grace, on_exit);
      break;
    }
  }
  // Rank 0 removes it once every rank has it mapped; a rank killed before then cannot.
  ::shm_unlink(launched_run_shared_memory(job_id).c_str());
  return first_failure;
}

}  // namespace shardscope::exec
