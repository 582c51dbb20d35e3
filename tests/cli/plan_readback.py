#!/usr/bin/env python3
"""Reads the knobs back out of a file `shardscope plan --emit` wrote, as scenario overrides.

    plan_readback.py fsdp2|fsdp1|torchtitan FILE   ->  one KEY=VALUE per line on stdout

The Python files are parsed with `ast` (so they must parse) and read from the code itself: the
literal arguments of init_device_mesh, MixedPrecisionPolicy / MixedPrecision, the offload
policies, fully_shard / FullyShardedDataParallel, and the module-level plan constants, each of
which must be used by the code. The TOML is read with tomllib and mapped by torchtitan's own
semantics (torchtitan/config/job_config.py). The CLI test applies the overrides to the plan's
scenario with `shardscope simulate --set` and checks the step time is the plan's.
"""

import ast
import sys
import tomllib

DTYPES = {"torch.bfloat16": "bf16", "torch.float32": "fp32", "torch.float16": "fp16"}


def fail(message):
    sys.exit(f"plan_readback: {message}")


def constants(tree):
    """Module-level NAME = literal assignments, each checked to be read somewhere."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id.isupper():
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unused = sorted(name for name in found if name not in loaded)
    if unused:
        fail(f"plan constants the code never uses: {', '.join(unused)}")
    return found


def calls(tree, name):
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == name:
                out.append(node)
    return out


def one_call(tree, name):
    found = calls(tree, name)
    if len(found) != 1:
        fail(f"expected one call of {name}, found {len(found)}")
    return found[0]


def keyword(call, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def literal(call, name):
    node = keyword(call, name)
    return None if node is None else ast.literal_eval(node)


def dtype(call, name):
    return DTYPES[ast.unparse(keyword(call, name))]


def yaml_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def mesh(tree, out):
    found = calls(tree, "init_device_mesh")
    if not found:
        return
    shape = ast.literal_eval(found[0].args[1])
    replicate, shard = (1, shape[0]) if len(shape) == 1 else shape
    out["fsdp.mesh.replicate"] = replicate
    out["fsdp.mesh.shard"] = shard


def loss(tree):
    """The loss recipe, from the function compute_loss calls."""
    if calls(tree, "LigerFusedLinearCrossEntropyLoss"):
        return "chunked"
    fused = calls(tree, "CrossEntropyLoss")
    if fused and literal(fused[0], "inplace_backward"):
        return "fused"
    upcast = calls(tree, "cross_entropy")
    if upcast and ast.unparse(upcast[0].args[0]).endswith(".float()"):
        return "upcast_fp32"
    fail("compute_loss calls no cross-entropy this reader knows")


def mixed_precision(call, out):
    """The dtypes of a MixedPrecisionPolicy (FSDP2) or MixedPrecision (FSDP1) call."""
    out["fsdp.mixed_precision.param_dtype"] = dtype(call, "param_dtype")
    out["fsdp.mixed_precision.reduce_dtype"] = dtype(call, "reduce_dtype")


def training(c, tree, out):
    out["training.seq_len"] = c["SEQ_LEN"]
    out["training.micro_batch"] = c["MICRO_BATCH"]
    out["training.grad_accum"] = c["GRAD_ACCUM"]
    out["training.activation_checkpointing"] = c["ACTIVATION_CHECKPOINTING"]
    out["training.loss"] = loss(tree)
    out["fsdp.requires_gradient_sync"] = c["GRADIENT_SYNC"]
    # The allocator setting is an assignment to os.environ before CUDA initialises.
    expandable = any(
        isinstance(n, ast.Assign)
        and ast.unparse(n.targets[0]) == "os.environ['PYTORCH_CUDA_ALLOC_CONF']"
        and "expandable_segments:True" in ast.literal_eval(n.value)
        for n in ast.walk(tree)
    )
    out["allocator.expandable_segments"] = expandable


def read_fsdp2(tree):
    c = constants(tree)
    out = {"fsdp.api": "fsdp2"}
    training(c, tree, out)
    mesh(tree, out)
    mixed_precision(one_call(tree, "MixedPrecisionPolicy"), out)
    offload = calls(tree, "CPUOffloadPolicy")
    out["fsdp.cpu_offload.params"] = bool(offload)
    if offload:
        out["fsdp.cpu_offload.pin_memory"] = literal(offload[0], "pin_memory")
    out["fsdp.wrap.blocks_per_group"] = c["BLOCKS_PER_GROUP"]
    raf = c["RESHARD_AFTER_FORWARD"]
    out["fsdp.reshard_after_forward"] = raf
    # The last group follows the others unless the code gives it its own value.
    out["fsdp.reshard_last_after_forward"] = c["RESHARD_LAST_AFTER_FORWARD"] == raf
    root = [call for call in calls(tree, "fully_shard") if ast.unparse(call.args[0]) == "model"]
    if len(root) != 1:
        fail("expected one fully_shard(model, ...) for the root")
    out["fsdp.reshard_root_after_forward"] = literal(root[0], "reshard_after_forward") is not False
    out["fsdp.forward_prefetch_modules"] = c["FORWARD_PREFETCH"]
    out["fsdp.backward_prefetch_modules"] = c["BACKWARD_PREFETCH"]
    out["fsdp.separate_reduce_scatter_group"] = c["SEPARATE_REDUCE_SCATTER_GROUP"]
    method_calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    out["fsdp.reshard_after_backward"] = "model.set_reshard_after_backward" not in method_calls
    out["fsdp.post_optim_event"] = "model.set_post_optim_event" in method_calls
    if "ALL_REDUCE" in c:
        out["fsdp.requires_all_reduce"] = c["ALL_REDUCE"]
    return out


def read_fsdp1(tree):
    c = constants(tree)
    out = {"fsdp.api": "fsdp1"}
    training(c, tree, out)
    mesh(tree, out)
    fsdp = one_call(tree, "FSDP")
    out["fsdp.sharding_strategy"] = ast.unparse(keyword(fsdp, "sharding_strategy")).split(".")[-1]
    mp = keyword(fsdp, "mixed_precision")
    mixed_precision(mp, out)
    out["fsdp.mixed_precision.keep_low_precision_grads"] = literal(mp, "keep_low_precision_grads")
    out["fsdp.cpu_offload.params"] = literal(keyword(fsdp, "cpu_offload"), "offload_params")
    prefetch = ast.unparse(keyword(fsdp, "backward_prefetch"))
    out["fsdp.backward_prefetch"] = "none" if prefetch == "None" else prefetch.split(".")[-1]
    out["fsdp.forward_prefetch"] = literal(fsdp, "forward_prefetch")
    out["fsdp.limit_all_gathers"] = literal(fsdp, "limit_all_gathers")
    out["fsdp.wrap.blocks_per_group"] = 1  # ModuleWrapPolicy: one block per unit
    return out


def read_torchtitan(text):
    return torchtitan_keys(tomllib.loads(text))


def torchtitan_keys(config):
    """Scenario keys from a torchtitan job config as nested dicts of sections (the TOML, or the
    JobConfig torchtitan's ConfigManager made of it)."""
    t, p, ac = config["training"], config["parallelism"], config["activation_checkpoint"]
    world = p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"]
    out = {"fsdp.api": "fsdp2"}
    out["training.seq_len"] = t["seq_len"]
    out["training.micro_batch"] = t["local_batch_size"]
    out["training.grad_accum"] = t["global_batch_size"] // (t["local_batch_size"] * world)
    out["fsdp.mixed_precision.param_dtype"] = {"bfloat16": "bf16", "float32": "fp32"}[
        t["mixed_precision_param"]
    ]
    out["fsdp.mixed_precision.reduce_dtype"] = {"float32": "fp32"}[t["mixed_precision_reduce"]]
    out["fsdp.cpu_offload.params"] = t["enable_cpu_offload"]
    out["fsdp.mesh.replicate"] = p["data_parallel_replicate_degree"]
    out["fsdp.mesh.shard"] = p["data_parallel_shard_degree"]
    # "default": every block resharded but the last, which backward starts with; "never": none.
    out["fsdp.reshard_after_forward"] = {"default": True, "never": False}[
        p["fsdp_reshard_after_forward"]
    ]
    out["fsdp.reshard_last_after_forward"] = False
    mode = ac["mode"]
    # torchtitan's early_stop defaults to false (whole blocks recomputed); the plan assumes
    # PyTorch's early stop.
    if mode != "none" and not ac.get("early_stop", False):
        fail("activation_checkpoint.early_stop is not true: torchtitan would recompute whole "
             "blocks, which the plan does not")
    if mode == "selective":
        option = ac["selective_ac_option"]
        mode = "selective_op" if option == "op" else f"every_{int(option)}"
    out["training.activation_checkpointing"] = mode
    # What torchtitan always does: its fp32-upcast cross-entropy, implicit prefetch, one block
    # per fully_shard, one communicator, FSDP's own communication buffers (no custom all-gather,
    # no process-group pool), and run_train.sh's expandable segments.
    out["training.loss"] = "upcast_fp32"
    out["fsdp.forward_prefetch_modules"] = 0
    out["fsdp.backward_prefetch_modules"] = 0
    out["fsdp.wrap.blocks_per_group"] = 1
    out["fsdp.separate_reduce_scatter_group"] = False
    out["fsdp.all_gather_buffer"] = "caching_allocator"
    out["fsdp.comm_buffer_pool"] = "caching_allocator"
    out["allocator.expandable_segments"] = True
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("fsdp2", "fsdp1", "torchtitan"):
        sys.exit("usage: plan_readback.py fsdp2|fsdp1|torchtitan FILE")
    target, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if target == "torchtitan":
        knobs = read_torchtitan(text)
    else:
        tree = ast.parse(text, filename=path)
        knobs = read_fsdp2(tree) if target == "fsdp2" else read_fsdp1(tree)
    for key, value in knobs.items():
        print(f"{key}={yaml_scalar(value)}")


if __name__ == "__main__":
    main()
