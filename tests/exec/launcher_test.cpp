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

// Rank `rank` of a one-machine job of `world` ranks whose rank 0 listens on `port`.
JobEnv loopback_job(int rank, int world, int port, std::string identity) {
  JobEnv job;
  job.launcher = "test";
  job.rank = job.local_rank = rank;
  job.world_size = job.local_world_size = world;
  job.master_port = port;
  job.identity = std::move(identity);
  return job;
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
      const JobEnv job = loopback_job(r, kRanks, port, "job-a");
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
  const JobEnv job = loopback_job(0, 2, port, "job-a");
  EXPECT_THROW(Rendezvous(job, std::chrono::milliseconds(300)), Error);
}

TEST(Launcher, ARankOfAnotherJobOnThePortIsRefusedAndTheJobWaitsForItsOwn) {
  // Job B's rank 1 reaches job A's rank 0 first (one MASTER_PORT for two jobs): it is told so
  // and fails; job A's own rank 1 then joins and the job runs.
  const int port = free_loopback_port();
  std::string a0_got, a1_got, stranger_error;
  std::thread a0([&] {
    Rendezvous rdv(loopback_job(0, 2, port, "job-a"), std::chrono::milliseconds(10'000));
    a0_got = rdv.broadcast("for job a")[0] == 'f' ? "ran" : "wrong";
  });
  std::thread b1([&] {
    try {
      Rendezvous rdv(loopback_job(1, 2, port, "job-b"), std::chrono::milliseconds(10'000));
    } catch (const Error& e) {
      stranger_error = e.what();
    }
  });
  b1.join();
  std::thread a1([&] {
    Rendezvous rdv(loopback_job(1, 2, port, "job-a"), std::chrono::milliseconds(10'000));
    a1_got = rdv.broadcast("");
  });
  a0.join();
  a1.join();
  EXPECT_NE(stranger_error.find("refused a rank 1 of another job ('job-b', this job is 'job-a')"),
            std::string::npos)
      << stranger_error;
  EXPECT_EQ(a0_got, "ran");
  EXPECT_EQ(a1_got, "for job a");
}

TEST(Launcher, TheTimeoutNamesTheRanksThatDidNotJoin) {
  const int port = free_loopback_port();
  try {
    const Rendezvous rdv(loopback_job(0, 3, port, "job-a"), std::chrono::milliseconds(300));
    FAIL() << "rank 0 of 3 started alone";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 3 ranks joined within 300 ms (not joined: "
                                         "rank 1, 2)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Launcher, EachLauncherGivesItsJobAnIdentity) {
  const auto id = [](std::map<std::string, std::string> env) {
    env["RANK"] = "0";
    env["WORLD_SIZE"] = "1";
    const auto job = job_from_environment([&](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
    return job->identity;
  };
  EXPECT_EQ(id({{"TORCHELASTIC_RUN_ID", "abc"}}), "torchrun:abc");
  EXPECT_EQ(id({{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "2"}}), "slurm:77.2");
  EXPECT_EQ(id({{"SHARDSCOPE_JOB_ID", "f00d"}, {"TORCHELASTIC_RUN_ID", "x"}}), "shardscope:f00d");
  EXPECT_EQ(id({}), "");
}

}  // namespace
}  // namespace shardscope::exec
