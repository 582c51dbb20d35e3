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
expect validate-default 0 'valid: yes' -- validate "$examples/llama3-8b-h100x8.yaml"
expect validate-shard-size 0 'sharded parameters 1,003,782,656' -- validate "$examples/llama3-8b-h100x8.yaml"
expect validate-set 0 '2 nodes × 8 GPUs = 16 ranks' -- validate "$examples/llama3-8b-h100x8.yaml" --set cluster.nodes=2
expect validate-all-problems 2 '^error: 5 problems' -- validate "$data/scenarios/bad.yaml"
expect validate-names-file-and-key 2 'bad.yaml: fsdp.mesh: replicate 3' -- validate "$data/scenarios/bad.yaml"
expect validate-did-you-mean 2 "training.micro_bach: unknown key \(did you mean 'training.micro_batch'\?\)" -- validate "$data/scenarios/bad.yaml"
expect validate-missing-file 2 'nope.yaml: cannot read' -- validate "$data/nope.yaml"
expect validate-bad-set 2 'key.path=value' -- validate "$examples/llama3-8b-h100x8.yaml" --set nonsense
expect validate-set-unknown-key 2 "fsdp.reshard_after_froward: unknown key" -- validate "$examples/llama3-8b-h100x8.yaml" --set fsdp.reshard_after_froward=false
expect unknown-command 2 "unknown command 'valdate'; did you mean 'validate'\?" -- valdate x
expect unknown-flag 2 'not expected: --frobnicate' -- validate "$examples/llama3-8b-h100x8.yaml" --frobnicate
expect no-command 2 'subcommand' --

expect lower-summary 0 'lowered .*: [0-9]+ ops' -- lower "$examples/llama3-8b-h100x8.yaml"
expect lower-order-first 0 '^ +0  copy_in root  forward it0 mb0 on all_gather_copy_in' -- lower "$examples/llama3-8b-h100x8.yaml" --order
expect lower-order-hsdp 0 'all_reduce layers.3  backward it0 mb1 on all_reduce via replicate\(2 ranks\)' -- lower "$examples/llama3-405b-hsdp-128-nodes.yaml" --order --set training.grad_accum=2
expect lower-bad-input 2 'fsdp.reshard_after_forward' -- lower "$examples/llama3-8b-h100x8.yaml" --set fsdp.reshard_after_forward=3
tmpdir=$(mktemp -d)
expect lower-json 0 'wrote' -- lower "$examples/fsdp2-overlap-oracle.yaml" --json "$tmpdir/ir.json"
if grep -q '"schema": "shardscope.schedule/1"' "$tmpdir/ir.json"; then echo "ok   lower-json-schema"; passed=$((passed + 1)); else echo "FAIL lower-json-schema"; failed=$((failed + 1)); fi
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
if grep -q '"schema": "shardscope.timeline/1"' "$tmpdir/t.json" && grep -q '"traceEvents"' "$tmpdir/trace.json"; then echo "ok   simulate-files"; passed=$((passed + 1)); else echo "FAIL simulate-files"; failed=$((failed + 1)); fi
expect simulate-bad-model 2 "unknown model preset 'llama9'" -- simulate "$examples/llama3-8b-h100x8.yaml" --model llama9
expect simulate-unwritable 2 'cannot open for writing' -- simulate "$examples/fsdp2-overlap-oracle.yaml" --trace "$tmpdir/no/such/dir.json"
expect sweep-table 0 '4 configurations, [0-9]+ fit' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid fsdp.reshard_after_forward=true,false --grid training.micro_batch=1,2 --csv "$tmpdir/s.csv" --threads 2
if [[ $(wc -l < "$tmpdir/s.csv") -eq 5 ]] && head -1 "$tmpdir/s.csv" | grep -q 'tokens_per_s_per_gpu'; then echo "ok   sweep-csv"; passed=$((passed + 1)); else echo "FAIL sweep-csv"; failed=$((failed + 1)); fi
expect sweep-progress 0 'sweep: 100 % \(2/2 configurations\)' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid training.micro_batch=1,2
expect sweep-invalid-point 0 'invalid: fsdp.reshard_after_forward' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid fsdp.reshard_after_forward=true,3
expect sweep-bad-grid 2 'key=v1,v2' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid nonsense
expect sweep-bad-budget 2 'memory-budget' -- sweep "$examples/llama3-8b-h100x8.yaml" --grid training.micro_batch=1 --memory-budget lots
rm -rf "$tmpdir"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
