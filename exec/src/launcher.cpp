#include "shardscope/exec/launcher.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
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
      throw Error("rendezvous: timed out waiting for a peer");
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
      throw Error(fmt::format("rendezvous: rank 0 cannot listen on {} (MASTER_PORT)", why));
    }
    peers_.assign(static_cast<std::size_t>(job.world_size), -1);
    for (int joined = 1; joined < job.world_size; ++joined) {
      pollfd p{listen_fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        throw Error(fmt::format("rendezvous: only {} of {} ranks joined within {} ms", joined,
                                job.world_size, timeout_.count()));
      }
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) throw Error(system_error("rendezvous: accept"));
      const int nodelay = 1;  // small messages: Nagle plus delayed ACKs would add 40 ms to each
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay));
      const int rank = std::stoi(receive(fd));
      if (rank <= 0 || rank >= job.world_size || peers_[static_cast<std::size_t>(rank)] != -1) {
        ::close(fd);
        throw Error(
            fmt::format("rendezvous: a peer claimed rank {} (world {})", rank, job.world_size));
      }
      peers_[static_cast<std::size_t>(rank)] = fd;
    }
    return;
  }
  for (;;) {  // rank 0 may not listen yet: retry until the deadline
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      peers_ = {fd};
      send(fd, std::to_string(job.rank));
      return;
    }
    ::close(fd);
    if (Clock::now() > deadline) {
      throw Error(fmt::format("rendezvous: rank {} could not reach rank 0 at {}:{} within {} ms",
                              job.rank, job.master_addr, job.master_port, timeout_.count()));
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
  const auto deadline = Clock::now() + timeout_;
  std::uint32_t wire = 0;
  read_all(fd, reinterpret_cast<char*>(&wire), sizeof(wire), deadline);
  const std::uint32_t size = ntohl(wire);
  if (size > (1u << 20)) throw Error("rendezvous: a peer sent a message over 1 MiB");
  std::string message(size, '\0');
  read_all(fd, message.data(), size, deadline);
  return message;
}

std::vector<std::string> Rendezvous::gather(const std::string& mine) {
  if (job_.rank != 0) {
    send(peers_[0], mine);
    return {};
  }
  std::vector<std::string> all(static_cast<std::size_t>(job_.world_size));
  all[0] = mine;
  for (std::size_t r = 1; r < all.size(); ++r) all[r] = receive(peers_[r]);
  return all;
}

std::string Rendezvous::broadcast(const std::string& message) {
  if (job_.rank != 0) return receive(peers_[0]);
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

int spawn_local_ranks(const std::vector<std::string>& argv, int processes,
                      const std::function<void(int rank, int status)>& on_exit) {
  const int port = free_loopback_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < processes; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(system_error("fork"));
    if (pid == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(processes).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(processes).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("SHARDSCOPE_LAUNCHER", "shardscope", 1);
      std::vector<char*> args;
      args.reserve(argv.size() + 1);
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv("/proc/self/exe", args.data());
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  int first_failure = 0;
  for (int left = processes; left > 0; --left) {
    int status = 0;
    const pid_t pid = ::wait(&status);
    if (pid < 0) break;
    const auto it = std::find(pids.begin(), pids.end(), pid);
    const int rank = static_cast<int>(it - pids.begin());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (on_exit) on_exit(rank, code);
    if (code != 0 && first_failure == 0) {
      first_failure = code;
      for (pid_t other : pids) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
  }
  return first_failure;
}

}  // namespace shardscope::exec
