#pragma once
// Measured runs lined up with a scenario's schedule, for calibration: each sample is what one
// measured iteration spent on something the schedule prices, beside the schedule ops that price
// it. A measured run may record an op as many kernels (a Kineto trace has one event per kernel,
// the simulator one op per group and pass), so compute is compared in aggregate:
//   compute      all forward, backward and recompute time of one (iteration, phase, group)
//   memory-bound all time of one copy kind (copy_in, copy_out, reduce_copy_in, grad_div,
//                reshard, optimizer_step) of one (iteration, phase, group)
//   collective   the k-th all-gather, reduce-scatter or all-reduce of one (iteration, phase,
//                group), one op each
//   host copy    the k-th h2d or d2h of one (iteration, phase, group)
// The schedule side is the steady-state (last) iteration of a simulation of the scenario, whatever
// the measured iteration's number: a profiler trace's first step is rarely the run's first.

#include <string>
#include <vector>

#include "shardscope/core/schedule.hpp"
#include "shardscope/core/timeline.hpp"

namespace shardscope::sim {

enum class SampleClass { compute, collective, host_copy };
std::string_view to_string(SampleClass cls);

struct CalibrationSample {
  SampleClass cls = SampleClass::compute;
  int run = 0;  // index of the measured timeline
  int iteration = 0;
  bool held_out = false;  // kept out of the fit, for the error on unseen iterations
  Phase phase = Phase::forward;
  std::string group;
  OpKind kind = OpKind::forward;  // compute: forward stands for forward, backward and recompute
  int order = 0;                  // k-th op of this key (0 for aggregates)
  TimeNs measured = 0;            // measured time (summed over the aggregate's ops)
  // Compute: the simulator's view of the measured time. GPU ops running at once share the GPU
  // equally (k of them) and lose σ·L(t) of their throughput while collectives run beside them,
  // L the SM model's loss (contention_loss) at the SMs the running collectives hold and σ the
  // contention scale, so the work the op did is gpu_work − σ·slowed_work, with
  // gpu_work = ∫ 1/k dt and slowed_work = ∫ L/k dt (ns).
  double gpu_work = 0;
  double slowed_work = 0;
  Bytes measured_bytes = 0;  // collectives: the bytes the run recorded (0: none)
  std::vector<OpId> ops;     // the schedule ops it is priced by
};

/// What the SM model says of a schedule's ops (docs/simulator.md, "SMs held by collectives"), by
/// op id: a GPU op's time with `contended_sms` SMs held over its own (OpCost::contended), the SMs
/// a collective holds (OpCost::sms).
struct ContentionFacts {
  std::vector<double> contended;  // 1: SMs do not bound it
  std::vector<int> sms;           // 0: not a collective
  int contended_sms = 0;
};

/// A measured iteration's step time: its last op's end less the previous iteration's.
struct MeasuredStep {
  int run = 0;
  int iteration = 0;
  bool held_out = false;
  TimeNs time = 0;
};

struct SampleSet {
  std::vector<CalibrationSample> samples;
  std::vector<MeasuredStep> steps;
  int iterations = 0;           // measured (run, iteration) pairs
  int held_out_iterations = 0;  // the last ceil(holdout × iterations) of them, in run order
  int unmatched_ops = 0;        // measured ops of a kind the schedule prices, with no counterpart
  TimeNs unmatched_time = 0;
  int other_ops = 0;  // measured ops of kinds calibration does not use (other, bookkeeping)
};

/// Lines `measured` up with `predicted`, a simulation of the scenario (its ops carry schedule op
/// ids). The last ceil(holdout × n) of the n measured (run, iteration) pairs are held out (none
/// when n < 2). A measured op carries no schedule op id: it takes the contention `facts` of the
/// schedule ops of its sample key (compute: their mean contended time, weighted by their time in
/// `predicted`).
SampleSet match_samples(const Timeline& predicted, const std::vector<Timeline>& measured,
                        double holdout, const ContentionFacts& facts);

/// Each sample's time in another simulation of the same schedule (its steady-state iteration's
/// ops with the sample's key), in sample order; −1 where that simulation lacks the key.
std::vector<TimeNs> simulated_times(const SampleSet& set, const Timeline& simulation);

}  // namespace shardscope::sim
