// `shardscope run --backend cuda`: the schedule on this machine's GPU(s) through the CUDA/NCCL
// backend, measured op by op and compared with the simulation. One process per GPU under a
// launcher (torchrun, Slurm, Open MPI, or --nproc-per-node) with --comm nccl; or one GPU playing
// rank 0 of the scenario's world with --comm emulate.
#include <fmt/format.h>

#include "commands.hpp"

#if SHARDSCOPE_HAVE_CUDA
#include <cmath>
#include <cstdlib>

#include "shardscope/core/device_memory.hpp"
#include "shardscope/exec/cuda_backend.hpp"
#include "shardscope/exec/executor.hpp"
#include "shardscope/exec/launcher.hpp"
#endif

namespace shardscope::cli {

#if !SHARDSCOPE_HAVE_CUDA

int run_cuda(const RunArgs&) {
  throw ValidationError({Problem{"--backend", "cuda",
                                 "this build has no CUDA backend (it is built when the CUDA "
                                 "toolkit, cuBLASLt and NCCL are found; see docs/exec.md)",
                                 "host"}});
}

#else

int run_cuda(const RunArgs& args) {
  const auto job = job_of_this_process(args);
  if (args.nproc_per_node > 0 && !job)
    return exec::spawn_local_ranks(child_argv(args.argv), args.nproc_per_node, {});
  const bool several = job && job->world_size > 1;
  const exec::CommMode comm =
      args.comm.empty() ? (several ? exec::CommMode::nccl : exec::CommMode::emulate)
                        : (args.comm == "nccl" ? exec::CommMode::nccl : exec::CommMode::emulate);
  const bool reports = !job || job->rank == 0;
  if (reports) check_run_outputs(args.scenario, args.outputs);
  const auto planned = plan_run(args);
  if (std::string why; !exec::cuda_device_available(&why))
    throw Error(fmt::format("--backend cuda: {}", why));

  exec::CudaBackendOptions options;
  options.rank = job ? job->rank : 0;
  options.world = job ? job->world_size : 1;
  options.device = job ? exec::device_for_local_rank(job->local_rank, job->local_world_size,
                                                     exec::visible_cuda_devices())
                       : 0;
  options.comm = comm;
  options.modelled_time = [&planned](OpId id, const Op&) {
    return simulated_duration(planned, id);
  };
  options.pinned_host = planned.scenario.fsdp.cpu_offload.pin_memory;
  options.memory_capacity = planned.timeline().memory_capacity;
  options.nccl_outside_to_come =
      memory_outside_allocator(planned.scenario.cluster, planned.schedule).nccl_buffers;
  options.allocator = planned.scenario.allocator;
  options.timeout = std::chrono::milliseconds(std::llround(args.timeout_s * 1000));
  if (comm == exec::CommMode::nccl && job) {
    exec::Rendezvous rendezvous(*job, options.timeout);
    options.nccl_id = rendezvous.broadcast(job->rank == 0 ? exec::make_nccl_id() : std::string(),
                                           "NCCL's unique id");
  }
  const auto backend = exec::make_cuda_backend(options);

  Timeline timeline;
  const bool finished = run_interruptible([&] {
    timeline = exec::run(planned.schedule, *backend, run_options(planned, args, reports));
  });
  if (!finished) return kExitFailure;
  if (!reports) return kExitOk;
  const auto measured = analysis::summarize(timeline);
  fmt::print("{}", analysis::summary_table(measured));
  fmt::print("  {:<28}{}\n", "device", timeline.provenance.device);
  for (const auto& note : backend->setup_notes()) fmt::print("  {:<28}{}\n", "device memory", note);
  for (const auto& [stream, busy] : measured.stream_busy) {
    if (stream != "compute" || !busy || measured.step_time <= 0) continue;
    const TimeNs idle = measured.step_time - *busy;
    fmt::print("  {:<28}{} ({:.1f} % of the step)\n", "compute stream idle", format_duration(idle),
               100.0 * static_cast<double>(idle) / static_cast<double>(measured.step_time));
  }
  print_against_simulation(measured, planned.summary);
  write_run_outputs(args.outputs, measured, timeline);
  return kExitOk;
}

#endif

}  // namespace shardscope::cli
