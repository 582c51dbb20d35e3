#!/usr/bin/env bash
# Exit codes and messages of the shardscope CLI. Usage: cli_test.sh SHARDSCOPE EXAMPLES_DIR DATA_DIR
set -u
bin=$1 examples=$2 data=$3
passed=0 failed=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# expect NAME CODE PATTERN(stdout+stderr, grep -E) -- ARGS...
expect() {
  local name=$1 code=$2 pattern=$3; shift 4
  "$bin" "$@" >"$out" 2>"$err"
  local rc=$?
  if [[ $rc -ne $code ]]; then
    echo "FAIL $name: exit $rc, expected $code"; cat "$out" "$err"; failed=$((failed + 1)); return
  fi
  if [[ -n "$pattern" ]] && ! cat "$out" "$err" | grep -Eq -- "$pattern"; then
    echo "FAIL $name: output lacks /$pattern/"; cat "$out" "$err"; failed=$((failed + 1)); return
  fi
  echo "ok   $name"; passed=$((passed + 1))
}

expect version 0 '^shardscope [0-9]+\.[0-9]+\.[0-9]+' -- --version
expect presets-8b 0 'llama3.1-8b +8,030,261,248' -- presets
expect presets-70b 0 'llama3.1-70b +70,553,706,496' -- presets
expect presets-405b 0 'llama3.1-405b +405,853,388,800' -- presets
expect presets-h200 0 'h200-sxm-141gb' -- presets
expect presets-sources 0 'h200-sxm-141gb +132 +76.0 % +30.0 % +65.0 % +19.8 % +69.8 %  NVIDIA H200 datasheet' -- presets
# The fp8 GEMMs' efficiency where the GPU has fp8 tensor cores, and where it comes from.
expect presets-fp8 0 'h100-sxm-80gb +132 +60.0 % +24.0 % +51.0 % +19.8 % +55.1 %  NVIDIA H100' -- presets
expect presets-no-fp8 0 'a100-sxm-80gb +108 +74.9 % +40.3 % +35.0 % +34.9 % +none  NVIDIA A100' -- presets
# A preset no measurement checks says so where its numbers are listed (issue 34).
expect presets-b200 0 'b200-sxm-180gb +148 +66.0 % +30.0 % +65.0 % +19.8 % +60.6 %  datasheet, not yet validated' -- presets
expect presets-b200-efficiencies 0 'efficiencies: not validated: GEMMs from XLA.s published B200' -- presets
expect presets-gb200 0 'gb200-nvl72 +148 +66.0 % +30.0 % +65.0 % +19.8 % +60.6 %  datasheet, not yet validated' -- presets
expect nvlink-domain-whole-nodes 2 'cluster.nvlink.domain: 6 GPUs is not a whole number of 8-GPU nodes' -- simulate "$examples/llama3-8b-h100x8.yaml" --set cluster.nvlink.domain=6
expect network-fabric-choices 2 "cluster.network.fabric: 'omnipath' is not allowed \(allowed: efa, infiniband, roce\)" -- simulate "$examples/llama3-8b-h100x8.yaml" --set cluster.network.fabric=omnipath
expect network-nics-shared 0 '4 NICs of 50.0 GB/s a node \(25.0 GB/s per GPU\)' -- validate "$examples/llama3-8b-h100x8.yaml" --set cluster.network.nics_per_node=4
expect network-nics-range 2 'cluster.network.nics_per_node: 0 is out of range \(1\.\.256 NICs\)' -- validate "$examples/llama3-8b-h100x8.yaml" --set cluster.network.nics_per_node=0
expect presets-efficiency-source 0 'efficiencies: PyTorch.s GEMMs \(kernel_sweep.csv\) and FlashAttention-2' -- presets
expect validate-default 0 'valid: yes' -- validate "$examples/llama3-8b-h100x8.yaml"
expect validate-shard-size 0 'sharded parameters 1,003,782,656' -- validate "$examples/llama3-8b-h100x8.yaml"
expect validate-set 0 '2 nodes × 8 GPUs = 16 ranks' -- validate "$examples/llama3-8b-h100x8.yaml" --set cluster.nodes=2
expect validate-all-problems 2 '^error: 5 problems' -- validate "$data/scenarios/bad.yaml"
expect validate-names-file-and-key 2 'bad.yaml: fsdp.mesh: replicate 3' -- validate "$data/scenarios/bad.yaml"
expect validate-did-you-mean 2 "training.micro_bach: unknown key \(did you mean 'training.micro_batch'\?\)" -- validate "$data/scenarios/bad.yaml"
expect validate-missing-file 2 'nope.yaml: cannot read' -- validate "$data/nope.yaml"
expect validate-bad-set 2 'key.path=value' -- validate "$examples/llama3-8b-h100x8.yaml" --set nonsense
expect validate-set-unknown-key 2 "fsdp.reshard_after_froward: unknown key" -- validate "$examples/llama3-8b-h100x8.yaml" --set fsdp.reshard_after_froward=false
# Help screens: whole first lines, an example each, defaults where they are values.
expect help-plan-first-line 0 '^find the fastest FSDP configurations that fit, exactly, without simulating most of the space$' -- plan --help
expect help-plan-default 0 '--top UINT:1..100=5 ' -- plan --help
for cmd in validate simulate sweep plan run compare calibrate summarize; do
  expect "help-$cmd-example" 0 "^example:$" -- "$cmd" --help
done
expect unknown-command 2 "unknown command 'valdate'; did you mean 'validate'\?" -- valdate x
expect unknown-flag 2 'not expected: --frobnicate' -- validate "$examples/llama3-8b-h100x8.yaml" --frobnicate
expect no-command 2 'subcommand' --

expect expandable-flag 0 'peak reserved +54.42 GiB' -- simulate "$examples/llama2-13b-fsdp1-hybrid.yaml" --expandable-segments
expect expandable-key 0 'peak reserved +54.42 GiB' -- simulate "$examples/llama2-13b-fsdp1-hybrid.yaml" --set allocator.expandable_segments=true
expect loss-chunk-needs-chunked 2 'training.loss_chunk_tokens: sets the chunk of a chunked loss' -- validate "$examples/llama3-8b-h100x8.yaml" --set training.loss_chunk_tokens=512
expect lower-summary 0 'lowered .*: [0-9]+ ops' -- lower "$examples/llama3-8b-h100x8.yaml"
expect lower-order-first 0 '^ +0  copy_in root  forward it0 mb0 on all_gather_copy_in' -- lower "$examples/llama3-8b-h100x8.yaml" --order
expect lower-order-hsdp 0 'all_reduce layers.3  backward it0 mb1 on all_reduce via replicate\(2 ranks\)' -- lower "$examples/llama3-405b-hsdp-128-nodes.yaml" --order --set training.grad_accum=2
expect lower-bad-input 2 'fsdp.reshard_after_forward' -- lower "$examples/llama3-8b-h100x8.yaml" --set fsdp.reshard_after_forward=3
tmpdir=$(mktemp -d)
expect lower-json 0 'wrote' -- lower "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/ir.json"
if grep -q '"schema": "shardscope.schedule/3"' "$tmpdir/ir.json"; then echo "ok   lower-json-schema"; passed=$((passed + 1)); else echo "FAIL lower-json-schema"; failed=$((failed + 1)); fi
expect lower-json-unwritable 2 'cannot open for writing' -- lower "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/missing/ir.json"
if [[ ! -e "$tmpdir/missing" ]]; then echo "ok   lower-json-nothing-half-written"; passed=$((passed + 1)); else echo "FAIL lower-json-nothing-half-written"; failed=$((failed + 1)); fi
rm -rf "$tmpdir"

tmpdir=$(mktemp -d)
expect simulate-table 0 'tokens/s per GPU' -- simulate "$examples/llama3-8b-h100x8.yaml"
expect simulate-units 0 'step time +[0-9.]+ (s|ms)' -- simulate "$examples/llama3-8b-h100x8.yaml"
expect simulate-shortcuts 0 'llama2-7b \(16 GPUs\)' -- simulate "$examples/llama3-8b-h100x8.yaml" --model llama2-7b --nodes 2
expect simulate-outputs 0 'wrote .*trace.json' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/s.json" --timeline "$tmpdir/t.json" --trace "$tmpdir/trace.json"
for key in step_time_s tokens_per_s_per_gpu mfu phase_time_s peak_memory allocated_bytes reserved_bytes capacity_bytes fits by_category peak_allocated_by_phase_bytes overlap_fraction exposed_s collectives; do
  if grep -q "\"$key\"" "$tmpdir/s.json"; then passed=$((passed + 1)); else echo "FAIL summary lacks $key"; failed=$((failed + 1)); fi
done
if grep -q '"schema": "shardscope.timeline/3"' "$tmpdir/t.json" && grep -q '"traceEvents"' "$tmpdir/trace.json"; then echo "ok   simulate-files"; passed=$((passed + 1)); else echo "FAIL simulate-files"; failed=$((failed + 1)); fi
# Every rank replayed with one node slow: the straggler named, the others' lost time shown; the
# trace holds a process per class of ranks; bad ranks and nodes refused before anything prints.
expect simulate-slow-node 0 '^  straggler +ranks 8-15 \(GPU time × 1.20\): the last to be ready at [0-9]+ of [0-9]+ collectives' -- simulate "$examples/llama3-8b-h100x8.yaml" --nodes 2 --slow-node 1:1.2 --trace "$tmpdir/ranks.json"
expect simulate-slow-node-classes 0 '^  0-7 \(8\) +× 1.00 +[0-9.]+ s +[0-9.]+ ms +0 of [0-9]+ +all_gather' -- simulate "$examples/llama3-8b-h100x8.yaml" --nodes 2 --slow-node 1:1.2
expect simulate-slow-link 0 '^  8-15 \(8\) +× 1.00 +× 1.50 +[0-9.]+ s' -- simulate "$examples/llama3-8b-h100x8.yaml" --nodes 2 --slow-link 1:1.5
expect simulate-variation-keys 0 '^  straggler +ranks 8-15 \(GPU time × 1.20\)' -- simulate "$examples/llama3-8b-h100x8.yaml" --nodes 2 --set variation.slow_nodes=1:1.2
expect simulate-issue-delay 0 '^every rank replayed \(16 ranks in 16 classes' -- simulate "$examples/llama3-8b-h100x8.yaml" --set model.layers=4 --nodes 2 --issue-delay 20us
expect simulate-slow-link-outside 2 '--slow-link: 2:2: node 2 is not in the cluster \(0..1\)' -- simulate "$examples/llama3-8b-h100x8.yaml" --nodes 2 --slow-link 2:2
expect simulate-variation-key-outside 2 'variation.slow_links: node 2 is not in the cluster \(0..1\)' -- simulate "$examples/llama3-8b-h100x8.yaml" --nodes 2 --set variation.slow_links=2:2
mkdir -p "$tmpdir/ranks"
"$bin" simulate "$examples/llama3-8b-h100x8.yaml" --set model.layers=4 --set training.iterations=3 --slow-rank 3:1.3 --jitter 0.05 --issue-delay 20us --seed 5 --rank-timelines "$tmpdir/ranks" >/dev/null
expect calibrate-variation 0 '^    rank 3 +× 1\.(2[6-9]|3[0-4])[0-9]* \[.*\]  slow' -- calibrate --variation --scenario "$examples/llama3-8b-h100x8.yaml" "$tmpdir/ranks/rank-0.json" "$tmpdir/ranks/rank-3.json" "$tmpdir/ranks/rank-5.json" "$tmpdir/ranks/rank-6.json" --set model.layers=4 --set training.iterations=3
expect calibrate-variation-one-rank 2 'a variation needs the timelines of at least 2 ranks' -- calibrate --variation --scenario "$examples/llama3-8b-h100x8.yaml" "$tmpdir/ranks/rank-0.json" --set model.layers=4 --set training.iterations=3
expect simulate-rank-timelines-no-variation 2 '--rank-timelines: .*: every rank is alike' -- simulate "$examples/llama3-8b-h100x8.yaml" --rank-timelines "$tmpdir/ranks"
expect simulate-rank-timelines-not-a-directory 2 '--rank-timelines: .*: is not a directory' -- simulate "$examples/llama3-8b-h100x8.yaml" --slow-rank 1:1.2 --rank-timelines "$tmpdir/ranks/rank-0.json"
expect simulate-jitter-distribution 0 '^  step time distribution  p50 [0-9.]+ (s|ms), p95 [0-9.]+ (s|ms), p99 [0-9.]+ (s|ms), max [0-9.]+ (s|ms) \(over 3 iterations after the first\)' -- simulate "$examples/llama3-8b-h100x8.yaml" --set model.layers=4 --set training.iterations=4 --jitter 0.05 --seed 3
expect simulate-gpu-sigma 0 '^every rank replayed \(16 ranks in 16 classes' -- simulate "$examples/llama3-8b-h100x8.yaml" --set model.layers=4 --nodes 2 --gpu-sigma 0.03
expect simulate-jitter-out-of-range 2 '--jitter' -- simulate "$examples/llama3-8b-h100x8.yaml" --jitter 2
expect simulate-slow-rank-outside 2 '--slow-rank: 8:1.1: rank 8 is not in the world \(0..7\)' -- simulate "$examples/llama3-8b-h100x8.yaml" --slow-rank 8:1.1
expect simulate-slow-node-malformed 2 '--slow-node: 1:fast: is not NODE:FACTOR' -- simulate "$examples/llama3-8b-h100x8.yaml" --slow-node 1:fast
if grep -q 'step time' "$out"; then echo "FAIL simulate-slow-node-malformed-prints-nothing"; failed=$((failed + 1)); else echo "ok   simulate-slow-node-malformed-prints-nothing"; passed=$((passed + 1)); fi
expect simulate-bad-model 2 "unknown model preset 'llama9'" -- simulate "$examples/llama3-8b-h100x8.yaml" --model llama9
expect simulate-unwritable 2 'cannot open for writing' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --trace "$tmpdir/no/such/dir.json"
expect sweep-table 0 '4 configurations, [0-9]+ fit' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid fsdp.reshard_after_forward=true,false --grid training.micro_batch=1,2 --csv "$tmpdir/s.csv" --threads 2
if [[ $(wc -l < "$tmpdir/s.csv") -eq 5 ]] && head -1 "$tmpdir/s.csv" | grep -q 'tokens_per_s_per_gpu'; then echo "ok   sweep-csv"; passed=$((passed + 1)); else echo "FAIL sweep-csv"; failed=$((failed + 1)); fi
expect sweep-progress 0 'sweep: 100 % \(2/2 configurations\)' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid training.micro_batch=1,2
expect sweep-invalid-point 0 'invalid: fsdp.reshard_after_forward' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid fsdp.reshard_after_forward=true,3
expect sweep-bad-grid 2 'key=v1,v2' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid nonsense
expect sweep-bad-budget 2 'memory-budget' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid training.micro_batch=1 --memory-budget lots
# A quantity flag needs its unit (80 alone would be 80 bytes); a budget above the GPU is flagged.
expect sweep-budget-needs-unit 2 '--memory-budget: 80: a size needs a unit' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid training.micro_batch=1 --memory-budget 80
expect sweep-budget-above-gpu 0 'warning: --memory-budget 100.00 GiB is above the 78.93 GiB' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid training.micro_batch=1 --memory-budget 100GiB
expect reshard-takes-booleans 2 'reshard_after_forward: expected true, false or an integer' -- validate "$examples/llama3-8b-h100x8.yaml" --set fsdp.reshard_after_forward=yes
expect range-in-words 2 '--jitter: 2 is outside the allowed 0..1' -- run "$examples/fsdp2-overlap-oracle.yaml" --jitter 2
expect simulate-a-trace 2 'fsdp2_tiny.json: traceEvents: is a PyTorch profiler trace, not a scenario \(summarize, compare, import and calibrate read traces' -- simulate "$data/traces/fsdp2_tiny.json"
expect validate-a-gzip 2 'is compressed \(a trace\?\), not a YAML or JSON document' -- validate "$data/traces/hta/hta_trace_filter_sampled_rank-0.json.gz"
expect summarize-a-scenario 2 'is a scenario, not a run .*shardscope simulate' -- summarize "$examples/llama3-8b-h100x8.yaml"
# run: the host backend as threads and as processes (the launcher on loopback), summarize, compare.
oracle="$examples/fsdp2-overlap-oracle.yaml"
default="$examples/llama3-8b-h100x8.yaml"
expect run-threads 0 'custom \(2 GPUs\), measured.*' -- run "$oracle" --timeline "$tmpdir/m.json" --json "$tmpdir/m-summary.json"
expect run-checks-collectives 0 'collectives checked +18 on this process.s ranks' -- run "$oracle"
expect run-processes 0 'host, rank 0 of 2 \(processes\)|collectives checked +9 on this process' -- run "$oracle" --nproc-per-node 2 --timeline "$tmpdir/p.json"
if grep -q '"device":"host, rank 0 of 2 (processes)"' "$tmpdir/p.json"; then echo "ok   run-processes-timeline"; passed=$((passed + 1)); else echo "FAIL run-processes-timeline"; failed=$((failed + 1)); fi
# Multi-process runs under faults. Two jobs on one MASTER_PORT: the stranger is refused (exit 2)
# and the job runs with its own rank.
port=$(( 20000 + RANDOM % 20000 ))
RANK=0 WORLD_SIZE=2 MASTER_PORT=$port "$bin" run "$oracle" --timeout 20 >"$tmpdir/a0.txt" 2>&1 &
a0=$!
sleep 0.5
RANK=1 WORLD_SIZE=2 MASTER_PORT=$port expect run-stranger-refused 2 'MASTER_PORT: rank 1: rank 0 at 127.0.0.1:[0-9]+ refused a rank 1 of another job' -- run "$oracle" --slow-rank 1:3 --timeout 20
RANK=1 WORLD_SIZE=2 MASTER_PORT=$port "$bin" run "$oracle" --timeout 20 >/dev/null 2>&1
if wait $a0 && grep -q 'against the simulation' "$tmpdir/a0.txt"; then echo "ok   run-job-keeps-its-rank"; passed=$((passed + 1)); else echo "FAIL run-job-keeps-its-rank"; cat "$tmpdir/a0.txt"; failed=$((failed + 1)); fi
# What a launched run may leave in /dev/shm, by name: its run's region (shardscope-run-<job id>,
# the id its ranks carry in SHARDSCOPE_JOB_ID) and what each of its processes created
# (shardscope-<pid>-…). Named, not counted: tests running beside this one make their own.
shm_names=""
note_shm_names() {  # PIDS: the launcher and its ranks, while they run
  local p id
  for p in "$@"; do
    id=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^SHARDSCOPE_JOB_ID=//p')
    [[ -n $id ]] && shm_names="$shm_names shardscope-run-$id"
    shm_names="$shm_names shardscope-$p-"
  done
}
# A stopped rank: the other's collective times out naming the op and the missing rank, and the
# launcher stops the stopped one; nothing is left in /dev/shm.
"$bin" run "$oracle" --nproc-per-node 2 --iterations 400 --timeout 2 >"$tmpdir/stop.txt" 2>&1 &
launcher=$!
# Stopped once the ranks are running their iterations (slow to start under a sanitizer); a stop
# still inside the rendezvous is named there.
for _ in $(seq 300); do grep -q 'iteration 2 of' "$tmpdir/stop.txt" && break; sleep 0.1; done
note_shm_names $launcher $(pgrep -P $launcher)
kill -STOP "$(pgrep -P $launcher | tail -1)"
wait $launcher; stop_rc=$?
if [[ $stop_rc -ne 0 ]] && grep -Eq 'timed out waiting for its peers( to read)?: [0-9] of 2 ranks arrived \(not yet: rank 1\)|from rank 1: rendezvous: timed out' "$tmpdir/stop.txt"; then
  echo "ok   run-stopped-rank-named"; passed=$((passed + 1))
else
  echo "FAIL run-stopped-rank-named: exit $stop_rc"; cat "$tmpdir/stop.txt"; failed=$((failed + 1))
fi
# A killed launcher takes its ranks with it (parent-death signal), and leaves no shared memory.
"$bin" run "$oracle" --nproc-per-node 2 --iterations 400 >/dev/null 2>&1 &
launcher=$!
for _ in $(seq 50); do [[ $(pgrep -P $launcher | wc -l) -eq 2 ]] && break; sleep 0.1; done
ranks=$(pgrep -P $launcher | tr '\n' ' ')
note_shm_names $launcher $ranks
sleep 0.5
kill -KILL $launcher; wait $launcher 2>/dev/null
alive=""
for _ in $(seq 50); do
  alive=""
  for r in $ranks; do ps -o stat= -p "$r" 2>/dev/null | grep -qv Z && alive="$alive $r"; done
  [[ -z "$alive" ]] && break; sleep 0.1
done
if [[ -n "$ranks" && -z "$alive" ]]; then echo "ok   run-ranks-die-with-launcher"; passed=$((passed + 1)); else echo "FAIL run-ranks-die-with-launcher: ranks '$ranks', alive '$alive'"; kill -KILL $alive 2>/dev/null; failed=$((failed + 1)); fi
sleep 0.2
left=""
for n in $shm_names; do left="$left $(ls /dev/shm | grep -F "$n" | tr '\n' ' ')"; done
if [[ $shm_names == *shardscope-run-* && -z ${left// /} ]]; then echo "ok   run-faults-leave-no-shared-memory"; passed=$((passed + 1)); else echo "FAIL run-faults-leave-no-shared-memory: left '$left' of '$shm_names'"; failed=$((failed + 1)); fi
expect run-wrong-nproc 2 'nproc-per-node.*the scenario has 2 GPUs' -- run "$oracle" --nproc-per-node 3
RANK=0 WORLD_SIZE=3 expect run-torchrun-world 2 'WORLD_SIZE.*3 ranks but the schedule is for 2' -- run "$oracle"
if grep -q '^cuda=ON' "$(dirname "$bin")/../shardscope-parts.txt" 2>/dev/null; then
  # Built with the CUDA backend: without a GPU it says why; with one, two ranks need two processes.
  expect run-cuda-here 1 'backend cuda: no|one process per rank' -- run "$oracle" --backend cuda --comm nccl
else
  expect run-no-cuda 2 'no CUDA backend' -- run "$oracle" --backend cuda
fi
expect run-comm-needs-cuda 2 'is a cuda backend option' -- run "$oracle" --comm emulate
profile="$data/device_profile_bandwidth_only.json"
expect simulate-device-profile 0 'device profile +14 of 210 compute ops fully measured \(17 GEMM/attention shapes' -- simulate "$examples/llama3-8b-h100x8.yaml" --device-profile "$profile"
expect validate-device-profile 0 'device profile +14 of 210 compute ops' -- validate "$examples/llama3-8b-h100x8.yaml" --device-profile "$profile"
expect simulate-bad-profile 2 'schema: not a shardscope device profile' -- simulate "$examples/llama3-8b-h100x8.yaml" --device-profile "$data/schedule_small.json"
expect run-bad-slow-rank 2 'RANK:FACTOR' -- run "$oracle" --slow-rank 1x2
expect run-slow-rank-outside 2 'rank 5 is not in the world' -- run "$oracle" --slow-rank 5:2
expect run-slow-rank 0 'slowest: rank 1' -- run "$oracle" --slow-rank 1:1.5
expect run-slow-link-replayed 0 'against every rank replayed +[0-9.]+ ms measured, [0-9.]+ ms simulated with the same variation' -- run "$oracle" --set cluster.nodes=2 --set cluster.gpus_per_node=1 --set variation.slow_links=1:3 --set variation.issue_delay=50us
expect run-slow-rank-replayed 0 'against every rank replayed +[0-9.]+ ms measured, [0-9.]+ ms simulated with the same variation' -- run "$oracle" --slow-rank 1:1.5
expect summarize 0 'custom \(2 GPUs\), measured' -- summarize "$tmpdir/m.json"
"$bin" simulate "$oracle" --timeline "$tmpdir/s.json" >/dev/null
expect compare-self 0 'step time +255.135 ms +255.135 ms +\+0 ns +0.0 %' -- compare "$tmpdir/s.json" "$tmpdir/s.json"
expect compare-per-op 0 'matched ops: 58; only in A: 0; only in B: 0' -- compare "$tmpdir/s.json" "$tmpdir/m.json" --per-op --json "$tmpdir/c.json"
trace="$data/traces/fsdp2_tiny.json"
expect import-report 0 'GPU ops +11 ops \(2 with no CPU launch found\)' -- import "$trace"
expect import-timeline 0 'wrote .*/imported.json' -- import "$trace" --timeline "$tmpdir/imported.json"
expect hf-moe-refused 2 'hf_config → num_local_experts: is a mixture of experts \(Mixtral\), which shardscope does not model' -- validate "$data/scenarios/hf_import.yaml" --set model.hf_config=../hf/mixtral-8x7b.json
expect summarize-trace 0 'fsdp2_tiny.json \(8 GPUs\), imported' -- summarize "$trace"
# What a trace does not record is unknown, never 0: tokens, FLOPs, and reserved memory on a CPU run.
gloo_trace="$examples/../traces/samples/fsdp2_rank0.json.gz"
expect summarize-unknown-throughput 0 'throughput +unknown' -- summarize "$gloo_trace"
expect summarize-unknown-mfu 0 'MFU / HFU +unknown' -- summarize "$gloo_trace"
expect summarize-unknown-reserved 0 'peak reserved +unknown of unknown \(fit unknown\)' -- summarize "$gloo_trace"
expect summarize-no-communication 0 'communication +none' -- summarize "$trace"
expect compare-unknown-delta 0 'throughput +[0-9]+ tokens/s/GPU +unknown +unknown' -- compare "$tmpdir/s.json" "$gloo_trace"
sed -e 's/"rank": 0/"rank": 1/' "$trace" > "$tmpdir/rank1.json"
expect import-two-ranks 0 'aligned 2 ranks by their collectives' -- import "$trace" "$tmpdir/rank1.json" --rank 1 --timeline "$tmpdir/r1.json"
if grep -Eq '"rank": *1' "$tmpdir/r1.json"; then echo "ok   import-rank-written"; passed=$((passed + 1)); else echo "FAIL import-rank-written"; failed=$((failed + 1)); fi
# --trace writes every rank, one Perfetto process each.
expect import-trace-every-rank 0 'wrote .*/both.perfetto.json \(open it in ui.perfetto.dev\)' -- import "$trace" "$tmpdir/rank1.json" --trace "$tmpdir/both.perfetto.json"
if grep -q '"name":"rank 0: ' "$tmpdir/both.perfetto.json" && grep -q '"name":"rank 1: ' "$tmpdir/both.perfetto.json"; then
  echo "ok   import-trace-both-processes"; passed=$((passed + 1))
else
  echo "FAIL import-trace-both-processes"; failed=$((failed + 1))
fi
expect import-no-such-rank 2 'no trace of rank 5' -- import "$trace" "$tmpdir/rank1.json" --rank 5 --timeline "$tmpdir/r5.json"
expect import-same-rank-twice 2 'rank 0 again' -- import "$trace" "$trace"
printf '{"traceEvents": [' > "$tmpdir/truncated.json"
expect import-truncated 2 'truncated.json: .*not valid JSON' -- import "$tmpdir/truncated.json"
expect import-missing 2 'nope.json.gz: cannot read the file' -- import "$tmpdir/nope.json.gz"
# Four 400 Gb/s NICs shared by a node's 8 GPUs are, to every collective, one 200 Gb/s NIC per GPU.
shared=$("$bin" simulate "$default" --set cluster.nodes=4 --set cluster.network.nics_per_node=4 | grep -E 'step time|communication')
own=$("$bin" simulate "$default" --set cluster.nodes=4 --set cluster.network.bandwidth=25GB/s | grep -E 'step time|communication')
if [[ -n "$shared" && "$shared" == "$own" ]]; then echo "ok   network-nics-shared-is-a-share-per-gpu"; passed=$((passed + 1)); else echo "FAIL network-nics-shared-is-a-share-per-gpu: $shared / $own"; failed=$((failed + 1)); fi
# Calibrate: a run made with slower GEMMs and NVLink, fitted, re-simulated at its step time.
"$bin" simulate "$default" --set training.iterations=4 --set cluster.gpu.matmul_efficiency=0.4 --set cluster.nvlink.bandwidth=300GB/s --timeline "$tmpdir/slow.json" > "$tmpdir/slow.txt"
slow_step=$(grep -Eo 'step time +[0-9.]+ s' "$tmpdir/slow.txt" | grep -Eo '[0-9.]+ s')
expect calibrate 0 'matmul efficiency +60.0 % +40\.[0-9] %' -- calibrate --scenario "$default" "$tmpdir/slow.json" --out "$tmpdir/cal.json"
expect calibrate-step-error 0 'step time +[0-9.]+ % → 0\.[0-2] %' -- calibrate --scenario "$default" "$tmpdir/slow.json" --bootstrap 0
expect calibrate-run-twice 2 'slow.json: is given twice \(also as .*slow.json\)' -- calibrate --scenario "$default" "$tmpdir/slow.json" "$tmpdir/slow.json"
# A run with no device work has no step time to summarize, compare or fit.
printf '{"traceEvents": []}' >"$tmpdir/no-work.json"
expect summarize-no-work 2 'no-work.json: has no ops: no device work was recorded' -- summarize "$tmpdir/no-work.json"
expect compare-no-work 2 'no-work.json: has no ops' -- compare "$tmpdir/slow.json" "$tmpdir/no-work.json"
# A FIFO or a device as an input is refused before it is opened (it would block, or never end).
mkfifo "$tmpdir/fifo"
expect summarize-fifo 2 'fifo: is not a regular file' -- summarize "$tmpdir/fifo"
expect import-device 2 '/dev/zero: is not a regular file' -- import /dev/zero
# A trace that would expand without bound is refused while it streams (exit 2, not bad_alloc).
{ printf '{"traceEvents": [{"name": "'; head -c 100000000 /dev/zero | tr '\0' a; } | gzip -9 >"$tmpdir/bomb.json.gz"
expect import-gzip-bomb 2 'bomb.json.gz: expands more than 200 times its .* on disk' -- import "$tmpdir/bomb.json.gz"
{ printf '{"traceEvents": [{"args": '; head -c 100000 /dev/zero | tr '\0' '['; } >"$tmpdir/deep.json"
expect summarize-deep-nesting 2 'deep.json: values nest deeper than 64 levels' -- summarize "$tmpdir/deep.json"
expect profile-device-file 2 '/dev/urandom: is not a regular file' -- simulate "$default" --device-profile /dev/urandom
# A file the scenario names is an input too: no output may overwrite it.
expect output-is-scenario-calibration 2 'cal.json: --json: is the input .*cal.json; it would be overwritten' -- simulate "$default" --set "cluster.calibration=$tmpdir/cal.json" --json "$tmpdir/cal.json"
expect output-is-scenario-profile 2 'profile.json: --timeline: is the input' -- simulate "$default" --set "cluster.gpu.device_profile=$tmpdir/profile.json" --timeline "$tmpdir/profile.json"
# The calibrated re-simulation lands on the slow run's step time within 0.1 %.
"$bin" simulate "$default" --calibration "$tmpdir/cal.json" > "$tmpdir/cal.txt" 2>&1
cal_step=$(grep -Eo 'step time +[0-9.]+ s' "$tmpdir/cal.txt" | grep -Eo '[0-9.]+')
if awk -v a="${cal_step:-0}" -v b="${slow_step% s}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.001 * b) }'; then
  echo "ok   simulate-calibrated"; passed=$((passed + 1))
else
  echo "FAIL simulate-calibrated: step ${cal_step:-none} s, slow run $slow_step"; cat "$tmpdir/cal.txt"; failed=$((failed + 1))
fi
expect validate-calibrated 0 'valid: yes' -- validate "$default" --set "cluster.calibration=$tmpdir/cal.json"
expect calibrate-out-is-input 2 'slow.json: --out: is the input .*slow.json; it would be overwritten' -- calibrate --scenario "$default" "$tmpdir/slow.json" --out "$tmpdir/slow.json"
# Runs that are not of one job are not compared or fitted silently; a timeline names its job.
"$bin" simulate "$default" --set fsdp.reshard_after_forward=false --timeline "$tmpdir/keep.json" >/dev/null
if grep -q '"overrides":\["fsdp.reshard_after_forward=false"\]' "$tmpdir/keep.json"; then echo "ok   timeline-records-overrides"; passed=$((passed + 1)); else echo "FAIL timeline-records-overrides"; failed=$((failed + 1)); fi
expect compare-other-setting 2 'are not one job: fsdp.reshard_after_forward: true in A, false in B' -- compare "$tmpdir/slow.json" "$tmpdir/keep.json"
expect compare-other-world 2 'are not one job: world size: 2 GPUs in A, 8 in B' -- compare "$tmpdir/s.json" "$tmpdir/keep.json"
expect compare-allow-mismatch 0 'warning: .* are not runs of one job' -- compare "$tmpdir/s.json" "$tmpdir/keep.json" --allow-mismatch
expect calibrate-other-job 2 'are not one job: world size: 8 GPUs in A, 2 in B' -- calibrate --scenario "$default" "$tmpdir/m.json"
plan_example="$examples/plan-llama3-8b-2-nodes.yaml"
plan_fix=(--fix allocator.expandable_segments=false --fix fsdp.mixed_precision.reduce_dtype=bf16)
expect plan-example 0 '^   1 +[0-9.]+ s +[0-9]+ +[0-9.]+ % +[0-9.]+ GiB +[0-9.]+ GiB  compute' -- plan "$plan_example" "${plan_fix[@]}" --top 3 --json "$tmpdir/plan.json"
if grep -q '"schema": "shardscope.plan/1"' "$tmpdir/plan.json" && grep -q '"bottleneck"' "$tmpdir/plan.json"; then
  echo "ok   plan-json"; passed=$((passed + 1))
else
  echo "FAIL plan-json: $tmpdir/plan.json lacks the schema or a ranked configuration"; failed=$((failed + 1))
fi
# Every member of an entry is in the JSON, with its prediction and what it changes.
if python3 - "$tmpdir/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
for entry in plan["ranked"]:
    members = entry["members"]
    assert len(members) == entry["equivalent_configurations"], entry["index"]
    chosen = [m for m in members if m["index"] == entry["index"]]
    assert len(chosen) == 1 and chosen[0]["differs"] == {}, entry["index"]
    assert all(m["step_time_s"] <= members[0]["step_time_s"] * (1 + plan["entry_step_time_tolerance"]) + 1e-9
               for m in members)
PY
then echo "ok   plan-json-members"; passed=$((passed + 1)); else echo "FAIL plan-json-members"; failed=$((failed + 1)); fi
p99_fix=(--api fsdp2 --fix training.micro_batch=2 --fix training.loss=fused --fix fsdp.reshard_after_forward=true --fix fsdp.forward_prefetch_modules=0 --fix fsdp.backward_prefetch_modules=1 --fix fsdp.separate_reduce_scatter_group=false --fix fsdp.wrap.blocks_per_group=1 --fix fsdp.cpu_offload.params=false --fix fsdp.mixed_precision.param_dtype=bf16 --fix fsdp.mixed_precision.reduce_dtype=fp32 --fix allocator.expandable_segments=false --allow training.activation_checkpointing=selective_op,every_2)
expect plan-p99 0 '^   1 +[0-9.]+ s +[0-9.]+ s +[0-9]+ +[0-9.]+ % +[0-9.]+ GiB +[0-9.]+ GiB  compute' -- plan "$plan_example" "${p99_fix[@]}" --set variation.slow_links=1:4 --objective p99 --top 2
expect plan-p99-exact 0 'no other configuration could rank: the variation only slows ranks' -- plan "$plan_example" "${p99_fix[@]}" --set variation.slow_links=1:4 --objective p99 --top 2
expect plan-p99-needs-variation 2 'variation: --objective p99 needs ranks that differ' -- plan "$plan_example" --objective p99
expect plan-margin-needs-unit 2 '--margin: 5: needs a unit: a percentage or a size' -- plan "$plan_example" --margin 5
expect plan-bad-margin 2 '--margin: 120%: not a percentage below 100' -- plan "$plan_example" --margin 120%
expect plan-group-within-no-percent 2 "--group-within: 5: '5' is not a percentage" -- plan "$plan_example" --group-within 5
expect plan-group-within-no-size 2 "--group-within: 0.5%,lots: 'lots' is not a size" -- plan "$plan_example" --group-within 0.5%,lots
# A space whose worst case is above --work-limit is refused before its search, naming what to
# narrow, and writes nothing.
expect plan-hours-long-space 2 'plan space: .* configurations in .* compute classes .* above --work-limit 1,000,000: about .* \(narrow its widest dimensions with --fix or --allow: sharding \([0-9]+ choices\)' -- plan "$plan_example" --work-limit 1e6 --json "$tmpdir/refused.json"
if [[ -e "$tmpdir/refused.json" ]]; then echo "FAIL plan-hours-long-space-writes-nothing"; failed=$((failed + 1)); else echo "ok   plan-hours-long-space-writes-nothing"; passed=$((passed + 1)); fi
expect plan-bad-fix 2 'no fsdp2 choice of checkpointing sets this value' -- plan "$plan_example" --api fsdp2 --fix training.activation_checkpointing=every_7
# plan searches the scenario's own API unless asked (the example says fsdp2).
expect plan-scenario-api 0 '^#1 fsdp2:' -- plan "$plan_example" --top 1 --fix training.loss=fused --fix training.activation_checkpointing=none --fix fsdp.mixed_precision.param_dtype=bf16
if grep -q '#1 fsdp1' "$out"; then echo "FAIL plan-scenario-api-only: fsdp1 searched"; failed=$((failed + 1)); else echo "ok   plan-scenario-api-only"; passed=$((passed + 1)); fi
expect plan-indivisible-batch 2 '--global-batch-tokens: 163840: 163840 tokens are not a whole number of 8192-token sequences on each of 16 ranks' -- plan "$plan_example" --global-batch-seqs 20
expect plan-sizes 0 '^    2     16 +[0-9.]+ s +[0-9]+ +[0-9]+ +[0-9.]+ % +[0-9.]+ GiB +[0-9.]+$' -- plan "$plan_example" --nodes 1,2 --api fsdp1 --fix training.loss=fused --fix training.activation_checkpointing=none --top 1
expect plan-sizes-indivisible 2 'on each of 24 ranks' -- plan "$plan_example" --nodes 2,3
expect plan-fix-lists-values 2 'no fsdp2 choice of micro-batch × accumulation sets this value \(training.micro_batch: 1, 2, 4' -- plan "$plan_example" --fix training.micro_batch=3
expect plan-fix-unknown-key 2 "training.lss: not a scenario key \(did you mean 'training.loss'\?\)" -- plan "$plan_example" --fix training.lss=fused
expect plan-fix-one-value 2 '--fix: training.loss=fused,chunked: pins one value \(--allow for several\)' -- plan "$plan_example" --fix training.loss=fused,chunked
# Fixed values are judged like scenario keys before any search (range, type)...
expect plan-fix-out-of-range 2 '--fix: training.seq_len=0: 0 is out of range \(1\.\.16,777,216 tokens\)' -- plan "$plan_example" --fix training.seq_len=0
expect plan-allow-not-a-number 2 "--allow: fsdp.forward_prefetch_modules=two: expected an integer, got the string 'two'" -- plan "$plan_example" --allow fsdp.forward_prefetch_modules=1,two
# ...and a search where they leave no configuration valid names why, not "nothing fits".
expect plan-fix-none-valid 2 'model.kv_heads: 5 kv heads do not divide 32 heads' -- plan "$plan_example" --api fsdp2 --fix model.kv_heads=5 --fix training.micro_batch=1 --fix training.loss=fused --fix training.activation_checkpointing=none
expect plan-work-estimate 0 '^plan: [0-9,]+ configurations in [0-9]+ compute classes, schedules of up to [0-9,]+ ops' -- plan "$plan_example" --api fsdp2 --fix training.micro_batch=1 --fix training.loss=fused --fix training.activation_checkpointing=none --top 1
expect plan-allow-unsearched 2 '--allow: training.iterations=2,3: not a knob of how FSDP runs the step: the plan keeps the job fixed' -- plan "$plan_example" --allow training.iterations=2,3
expect plan-emit-bad-target 2 '--emit: deepspeed: not an emit target \(fsdp2, fsdp1, torchtitan, scenario\)' -- plan "$plan_example" --emit deepspeed "$tmpdir/x.py"
# An emitted file says the whole command that made it.
"$bin" plan "$plan_example" --top 1 --fix training.loss=fused --fix training.activation_checkpointing=none --emit fsdp2 "$tmpdir/cmd.py" >/dev/null 2>&1
if grep -q "rank 1 of \`shardscope plan $plan_example --top 1 --fix training.loss=fused --fix training.activation_checkpointing=none --emit fsdp2 $tmpdir/cmd.py\`" "$tmpdir/cmd.py"; then echo "ok   plan-emit-command-line"; passed=$((passed + 1)); else echo "FAIL plan-emit-command-line"; grep -n prediction "$tmpdir/cmd.py"; failed=$((failed + 1)); fi
expect plan-emit-one-size 2 'writes one plan, not one per cluster size' -- plan "$plan_example" --nodes 1,2 --emit fsdp2 "$tmpdir/x.py"
expect plan-emit-api 2 '--api: fsdp1: --emit torchtitan writes fsdp2 code' -- plan "$plan_example" --api fsdp1 --emit torchtitan "$tmpdir/x.toml"
expect plan-emit-fp8 2 'training.fp8: transformer_engine: --emit fsdp2 writes code that builds the model.s own nn.Linear layers' -- plan "$plan_example" --set training.autocast=bf16 --set training.fp8=transformer_engine --emit fsdp2 "$tmpdir/x.py"
expect simulate-fp8-a100 2 'training.fp8: .*no fp8 tensor cores' -- simulate "$plan_example" --set cluster.preset=a100-sxm-80gb --set training.autocast=bf16 --set training.fp8=transformer_engine
expect plan-emit-rank 2 '--emit-rank: 4: only the top 3 are ranked' -- plan "$plan_example" --top 3 --emit-rank 4 --emit fsdp2 "$tmpdir/x.py"
expect calibrate-not-a-run 2 'llama3-8b-h100x8.yaml' -- calibrate --scenario "$default" "$default"
sed 's/"value": 0.4[0-9]*/"value": 4/' "$tmpdir/cal.json" > "$tmpdir/bad_cal.json"
expect calibration-bad-value 2 'bad_cal.json: compute.matmul_efficiency.value: 4 is out of range' -- simulate "$default" --calibration "$tmpdir/bad_cal.json"
expect calibration-missing 2 'cluster.calibration' -- simulate "$default" --set cluster.calibration=nope.json
sed 's/timeline\/3/timeline\/1/' "$tmpdir/s.json" > "$tmpdir/old.json"
expect compare-old-timeline 2 'older timeline format' -- compare "$tmpdir/s.json" "$tmpdir/old.json"
rm -rf "$tmpdir"

# Hostile input: every class gets exit 2 with the file, key and what is allowed; nothing crashes.
tmpdir=$(mktemp -d)
expect number-too-large 2 "training.seq_len: expected an integer, got '1e999', a number beyond" -- validate "$default" --set training.seq_len=1e999
expect number-too-small 2 "training.seq_len: .*'1e-999'" -- validate "$default" --set training.seq_len=1e-999
expect huge-list-index 2 'model.groups' -- validate "$examples/fsdp2-overlap-oracle.yaml" --set 'model.groups[99999999999999999999].params=1'
expect list-index-past-end 2 "'7' is not an index of the list \(it has [0-9]+ items\)" -- validate "$examples/fsdp2-overlap-oracle.yaml" --set 'model.groups[7].params=1'
expect scalar-for-section-set 2 'fsdp.mesh: is a section with keys' -- validate "$examples/llama3-405b-hsdp-128-nodes.yaml" --set fsdp.mesh=2
expect scalar-for-section-new 2 'cluster.gpu: is the text .h200., but it is a section of keys \(keys: memory' -- validate "$default" --set cluster.gpu=h200
expect scalar-for-top-section 2 'training: is a section' -- validate "$default" --set training=5
printf 'model: {preset: llama3.1-8b}\nfsdp:\n  mixed_precision: bf16\n' > "$tmpdir/mp.yaml"
expect scalar-for-section-file 2 'mp.yaml: fsdp.mixed_precision: is the text .bf16., but it is a section of keys \(keys: param_dtype, reduce_dtype' -- validate "$tmpdir/mp.yaml"
printf 'model: {preset: llama3.1-8b}\ntraining:\n  seq_len:\n' > "$tmpdir/null.yaml"
expect leaf-given-a-list 2 '^error: 1 problem:' -- validate "$default" --set 'training.seq_len=[1,2]'
expect key-without-value 2 'training.seq_len: has no value' -- validate "$tmpdir/null.yaml"
expect empty-set-value 2 'training.seq_len: has no value' -- validate "$default" --set training.seq_len=
expect bandwidth-too-low 2 'cluster.nvlink.bandwidth: 1 B/s is out of range \(1.0 GB/s\.\.10.00 TB/s\)' -- validate "$default" --set cluster.nvlink.bandwidth=1B/s
expect latency-of-hours 2 'cluster.network.latency: 7200.000 s is out of range' -- validate "$default" --set cluster.network.latency=7200s
expect tokens-overflow 2 'seq_len 16,000,000 × micro_batch 60,000' -- validate "$default" --set training.seq_len=16000000 --set training.micro_batch=60000
expect hidden-out-of-range 2 'model.hidden: 1000000000 is out of range \(1\.\.262,144 elements\)' -- validate "$default" --set model.hidden=1000000000
expect work-limit 2 'the schedule would have about [0-9,]+ ops' -- simulate "$default" --set model.layers=10000 --set training.grad_accum=100
expect op-too-long 2 'llama3-8b-h100x8.yaml: a compute kernel would take .* more than the 1000 s shardscope simulates' -- simulate "$default" --set model.hidden=262144 --set model.heads=16384 --set model.kv_heads=16384 --set model.ffn_hidden=2097152 --set model.layers=1000 --set training.seq_len=16777216 --set training.micro_batch=8
expect fp8-params 2 'param_dtype: fp8 is not an FSDP mixed-precision dtype' -- validate "$default" --set fsdp.mixed_precision.param_dtype=fp8
expect output-cast-pytorch-refuses 2 'fsdp.mixed_precision.output_dtype: PyTorch refuses this' -- validate "$default" --set fsdp.mixed_precision.output_dtype=fp32
expect attention-choices 2 'model.attention.*fa3.*flash, math, cudnn' -- validate "$default" --set model.attention=fa3
expect sm-count-out-of-range 2 'cluster.gpu.sm_count: 0 is out of range' -- validate "$default" --set cluster.gpu.sm_count=0
printf 'a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n' > "$tmpdir/bomb.yaml"
expect yaml-alias-bomb 2 'expands to more than 1000000 values' -- validate "$tmpdir/bomb.yaml"
expect cli-range 2 '--nodes: 1e999 is outside the allowed 1..100000' -- simulate "$default" --nodes 1e999
expect does-not-fit 3 'does not fit: ' -- simulate "$default" --set training.micro_batch=8

# Outputs: checked before the work, never the input, never a special file replaced.
cp "$default" "$tmpdir/s.yaml"
expect output-is-input 2 '--json: is the input' -- simulate "$tmpdir/s.yaml" --json "$tmpdir/s.yaml"
if cmp -s "$default" "$tmpdir/s.yaml"; then echo "ok   output-is-input-untouched"; passed=$((passed + 1)); else echo "FAIL output-is-input-untouched"; failed=$((failed + 1)); fi
expect output-is-directory 2 '--json: is a directory' -- simulate "$default" --json "$tmpdir"
expect output-twice 2 'is also the file of --json' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/o.json" --trace "$tmpdir/o.json"
expect output-dev-full 2 '/dev/full: write failed \(No space left on device\)' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --json /dev/full
if [[ -c /dev/full ]]; then echo "ok   dev-full-still-a-device"; passed=$((passed + 1)); else echo "FAIL dev-full-still-a-device"; failed=$((failed + 1)); fi
mkfifo "$tmpdir/fifo"
expect output-fifo-no-reader 2 'fifo: is a FIFO with no reader' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/fifo"
if [[ -p "$tmpdir/fifo" ]]; then echo "ok   fifo-still-a-fifo"; passed=$((passed + 1)); else echo "FAIL fifo-still-a-fifo"; failed=$((failed + 1)); fi
ln -s "$tmpdir/target.json" "$tmpdir/link.json"
expect output-through-link 0 'wrote' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/link.json"
if [[ -L "$tmpdir/link.json" && -s "$tmpdir/target.json" ]]; then echo "ok   link-still-a-link"; passed=$((passed + 1)); else echo "FAIL link-still-a-link"; failed=$((failed + 1)); fi
expect sweep-output-checked-first 2 'nope does not exist' -- sweep "$default" --grid training.micro_batch=1,2 --csv "$tmpdir/nope/x.csv"
if ls -a "$tmpdir" | grep -q partial; then echo "FAIL no-partial-files"; failed=$((failed + 1)); else echo "ok   no-partial-files"; passed=$((passed + 1)); fi

# Sweeps: keys are checked, values may hold commas inside braces, an interrupted grid says so.
expect sweep-unknown-key 2 "training.micro_bach: not a scenario key \(did you mean 'training.micro_batch'\?\)" -- sweep "$default" --grid training.micro_bach=1,2
expect sweep-duplicate-key 2 'training.micro_batch: is given twice' -- sweep "$default" --grid training.micro_batch=1 --grid training.micro_batch=2
expect sweep-braces 0 '2 configurations' -- sweep "$default" --grid 'fsdp.mixed_precision={param_dtype: bf16, reduce_dtype: fp32},{param_dtype: bf16}' --json "$tmpdir/sw.json"
if grep -q '"complete": true' "$tmpdir/sw.json"; then echo "ok   sweep-json-complete"; passed=$((passed + 1)); else echo "FAIL sweep-json-complete"; failed=$((failed + 1)); fi

# A schedule IR is simulated as it stands; a corrupt one gets every problem.
"$bin" lower "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/ir.json" >/dev/null
expect simulate-ir 0 'step time' -- simulate "$tmpdir/ir.json"
sed -e '0,/"deps":\[\]/s//"deps":[999999]/' -e '0,/"stream":2,/s//"stream":77,/' "$tmpdir/ir.json" > "$tmpdir/bad_ir.json"
expect simulate-bad-ir 2 'error: 2 problems' -- simulate "$tmpdir/bad_ir.json"
expect lower-given-ir 2 'ir.json: schema: is a shardscope.schedule/3 file, not a scenario \(simulate takes a schedule IR' -- lower "$tmpdir/ir.json"
expect simulate-ir-no-set 2 'is a schedule IR' -- simulate "$tmpdir/ir.json" --set training.micro_batch=2
expect keys-prefix 0 'fsdp.mixed_precision.param_dtype +dtype' -- keys fsdp.mixed_precision
expect keys-unknown 2 "no scenario key starts with 'nope'" -- keys nope
rm -rf "$tmpdir"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
