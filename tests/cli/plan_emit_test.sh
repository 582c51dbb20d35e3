#!/usr/bin/env bash
# `plan --emit` round trips: each emitted file parses, its knobs read back from the code
# (plan_readback.py) and applied to the plan's scenario reproduce the plan's prediction (step time
# and peak reserved, exactly). Usage: plan_emit_test.sh SHARDSCOPE EXAMPLES_DIR [CASE]; with CASE,
# only that case runs (ctest runs each case as its own test, cli.plan_emit.<case>, side by side).
set -u
bin=$1 examples=$2 only=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
scenario="$examples/plan-llama3-8b-2-nodes.yaml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

# same_prediction NAME: the simulation NAME.sim.json makes plan NAME.json's first prediction (step
# time and peak reserved, exactly).
same_prediction() {
  local name=$1 verdict
  verdict=$(python3 - "$tmp/$name.json" "$tmp/$name.sim.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))["ranked"][0]
sim = json.load(open(sys.argv[2]))
got = (sim["step_time_s"], sim["peak_memory"]["reserved_bytes"])
want = (plan["step_time_s"], plan["peak_reserved_bytes"])
print("same" if got == want else f"plan {want}, simulated {got}")
PY
)
  if [[ $verdict == same ]]; then
    echo "ok   $name"; passed=$((passed + 1))
  else
    echo "FAIL $name: $verdict"; failed=$((failed + 1))
  fi
}

# roundtrip NAME TARGET [PLAN ARGS...]: --set arguments go to both plan and simulate (base knobs).
roundtrip() {
  local name=$1 target=$2; shift 2
  [[ -z $only || $only == "$name" ]] || return 0
  local ext=py; [[ $target == torchtitan ]] && ext=toml
  local file="$tmp/$name.$ext" base_sets=() args=("$@")
  for ((i = 0; i < ${#args[@]}; i++)); do
    [[ ${args[i]} == --set ]] && base_sets+=(--set "${args[i + 1]}")
  done
  if ! "$bin" plan "$scenario" --top 1 "$@" --emit "$target" "$file" --json "$tmp/$name.json" \
      >"$tmp/$name.out" 2>&1; then
    echo "FAIL $name: plan failed"; cat "$tmp/$name.out"; failed=$((failed + 1)); return
  fi
  local knobs
  if ! knobs=$(python3 "$here/plan_readback.py" "$target" "$file" 2>&1); then
    echo "FAIL $name: $knobs"; failed=$((failed + 1)); return
  fi
  local sets=("${base_sets[@]}")
  while IFS= read -r kv; do sets+=(--set "$kv"); done <<<"$knobs"
  if ! "$bin" simulate "$scenario" "${sets[@]}" --json "$tmp/$name.sim.json" >"$tmp/$name.sim" 2>&1; then
    echo "FAIL $name: the read-back knobs do not simulate"; cat "$tmp/$name.sim"; failed=$((failed + 1))
    return
  fi
  same_prediction "$name"
}

# The best plan each target can express.
roundtrip fsdp2-best fsdp2
roundtrip fsdp1-best fsdp1
roundtrip torchtitan-best torchtitan
# The knobs the best plans leave at one value: HSDP, an int reshard, grouped blocks, explicit
# prefetch, offload, selective and every-N checkpointing, the chunked loss, and base knobs the plan
# carries (autocast, last-micro-batch sync, post-optimizer event, reshard after backward).
roundtrip fsdp2-knobs fsdp2 --fix fsdp.reshard_after_forward=8 \
  --fix fsdp.wrap.blocks_per_group=2 --fix fsdp.backward_prefetch_modules=2 \
  --fix training.loss=chunked --fix training.activation_checkpointing=selective_op \
  --fix allocator.expandable_segments=true --set fsdp.requires_gradient_sync=last_microbatch \
  --set fsdp.post_optim_event=true --set fsdp.reshard_after_backward=false
roundtrip fsdp2-hsdp-offload fsdp2 --fix fsdp.mesh.shard=8 --fix fsdp.cpu_offload.params=true \
  --fix training.activation_checkpointing=every_2 --fix fsdp.mixed_precision.param_dtype=bf16 \
  --set training.autocast=bf16 --set fsdp.reshard_root_after_forward=true \
  --set fsdp.requires_all_reduce=last_microbatch
roundtrip fsdp1-knobs fsdp1 --fix fsdp.sharding_strategy=SHARD_GRAD_OP \
  --fix fsdp.backward_prefetch=none --fix fsdp.forward_prefetch=true \
  --fix training.activation_checkpointing=full --fix training.loss=upcast_fp32 \
  --set fsdp.api=fsdp1 --set fsdp.mixed_precision.keep_low_precision_grads=true \
  --set training.optimizer=sgd
roundtrip torchtitan-hsdp torchtitan --fix fsdp.mesh.shard=8 --fix fsdp.reshard_after_forward=false \
  --fix training.activation_checkpointing=every_2

# `--emit scenario`: the emitted scenario, simulated as it is, makes the plan's prediction.
scenario_roundtrip() {
  local name=$1; shift
  [[ -z $only || $only == "$name" ]] || return 0
  mkdir -p "$tmp/$name.dir"
  local file="$tmp/$name.dir/plan.yaml"
  if ! "$bin" plan "$scenario" --top 1 "$@" --emit scenario "$file" --json "$tmp/$name.json" \
      >"$tmp/$name.out" 2>&1 ||
    ! "$bin" simulate "$file" --json "$tmp/$name.sim.json" >"$tmp/$name.sim" 2>&1; then
    echo "FAIL $name"; cat "$tmp/$name.out" "$tmp/$name.sim" 2>/dev/null; failed=$((failed + 1))
    return
  fi
  same_prediction "$name"
}
scenario_roundtrip scenario-best

# What a target cannot express is refused before any search.
if [[ -n $only && $only != emit-refuses ]]; then
  :
elif "$bin" plan "$scenario" --emit torchtitan "$tmp/x.toml" --fix training.loss=chunked >"$tmp/e" 2>&1; then
  echo "FAIL emit-refuses: exit 0"; failed=$((failed + 1))
elif [[ $? -eq 2 ]] && grep -q 'training.loss=chunked: --emit torchtitan cannot express it' "$tmp/e" &&
    [[ ! -e "$tmp/x.toml" ]]; then
  echo "ok   emit-refuses"; passed=$((passed + 1))
else
  echo "FAIL emit-refuses"; cat "$tmp/e"; failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
