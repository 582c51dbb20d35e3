#include "shardscope/exec/launcher.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "shardscope/core/error.hpp"

namespace shardscope::exec {
namespace {

GetEnv env(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    const auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

TEST(Launcher, NoLauncherMeansNoJob) {
  EXPECT_FALSE(job_from_environment(env({})).has_value());
}

TEST(Launcher, ReadsTorchrun) {
  const auto job = job_from_environment(env({{"RANK", "3"},
                                             {"WORLD_SIZE", "8"},
                                             {"LOCAL_RANK", "3"},
                                             {"LOCAL_WORLD_SIZE", "4"},
                                             {"MASTER_ADDR", "node7"},
                                             {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->launcher, "torchrun");
  EXPECT_EQ(job->rank, 3);
  EXPECT_EQ(job->world_size, 8);
  EXPECT_EQ(job->local_world_size, 4);
  EXPECT_EQ(job->master_addr, "node7");
  EXPECT_EQ(job->master_port, 29400);
}

TEST(Launcher, ReadsSlurmWithTheFirstNodeAsMaster) {
  const auto job = job_from_environment(env({{"SLURM_PROCID", "5"},
                                             {"SLURM_NTASKS", "16"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_TASKS_PER_NODE", "4(x4)"},
                                             {"SLURM_NODELIST", "gpu[003-006],login1"}}));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->launcher, "slurm");
  EXPECT_EQ(job->local_world_size, 4);
  EXPECT_EQ(job->master_addr, "gpu003");
  EXPECT_EQ(job->master_port, 29500);
  EXPECT_EQ(first_slurm_host("a1,b2"), "a1");
  EXPECT_EQ(first_slurm_host("n[9,11-12]"), "n9");
}

TEST(Launcher, ReadsOpenMpi) {
  const auto job = job_from_environment(env({{"OMPI_COMM_WORLD_RANK", "1"},
                                             {"OMPI_COMM_WORLD_SIZE", "2"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->launcher, "openmpi");
  EXPECT_EQ(job->master_addr, "127.0.0.1");
}

TEST(Launcher, MalformedVariablesAreNamed) {
  try {
    (void)job_from_environment(env({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}}));
    FAIL() << "accepted";
  } catch (const ValidationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("RANK"), std::string::npos) << what;
    EXPECT_NE(what.find("MASTER_PORT"), std::string::npos) << what;
  }
  EXPECT_THROW((void)job_from_environment(env({{"RANK", "4"}, {"WORLD_SIZE", "4"}})),
               ValidationError);
}

TEST(Launcher, EachRankTakesItsOwnGpuWhetherItSeesAllOrOne) {
  EXPECT_EQ(device_for_local_rank(3, 8, 8), 3);  // torchrun: every rank sees the node's GPUs
  EXPECT_EQ(device_for_local_rank(3, 8, 1), 0);  // Slurm --gpus-per-task=1: one visible
  EXPECT_EQ(device_for_local_rank(0, 1, 8), 0);
  EXPECT_THROW(device_for_local_rank(0, 1, 0), Error);
  try {
    (void)device_for_local_rank(5, 8, 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 local ranks share 4 visible CUDA devices"),
              std::string::npos);
  }
}

TEST(Launcher, RendezvousGathersAndBroadcastsOnLoopback) {
  const int port = free_loopback_port();
  constexpr int kRanks = 4;
  std::vector<std::vector<std::string>> gathered(kRanks);
  std::vector<std::string> received(kRanks);
  std::vector<std::thread> threads;
  threads.reserve(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      JobEnv job{"test", r, kRanks, r, kRanks, "127.0.0.1", port};
      Rendezvous rdv(job, std::chrono::milliseconds(10'000));
      gathered[static_cast<std::size_t>(r)] = rdv.gather(fmt::format("hello from {}", r));
      received[static_cast<std::size_t>(r)] = rdv.broadcast("blob");
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(gathered[0].size(), 4u);
  EXPECT_EQ(gathered[0][3], "hello from 3");
  EXPECT_TRUE(gathered[1].empty());
  for (const auto& r : received) EXPECT_EQ(r, "blob");
}

TEST(Launcher, ARankThatNeverComesIsATimeoutNotAHang) {
  const int port = free_loopback_port();
  JobEnv job{"test", 0, 2, 0, 2, "127.0.0.1", port};
  EXPECT_THROW(Rendezvous(job, std::chrono::milliseconds(300)), Error);
}

}  // namespace
}  // namespace shardscope::exec
