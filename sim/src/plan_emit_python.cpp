// The fsdp2 and fsdp1 emitters: one Python module each, sharing the preamble, the plan constants,
// the activation checkpointing, the loss, the optimizer and the train step.
#include <fmt/format.h>

#include "plan_emit_common.hpp"
#include "shardscope/core/error.hpp"

namespace shardscope::sim::detail {
namespace {

std::string py_bool(bool b) {
  return b ? "True" : "False";
}

std::string torch_dtype(DType d) {
  switch (d) {
    case DType::fp32:
      return "torch.float32";
    case DType::bf16:
      return "torch.bfloat16";
    case DType::fp16:
      return "torch.float16";
    case DType::fp8:
      break;
  }
  throw ValidationError({{"fsdp.mixed_precision", "fp8", "FSDP's mixed precision has no fp8 policy",
                          "fp32, bf16 or fp16"}});
}

std::string reshard_literal(const ReshardAfterForward& r) {
  switch (r.mode) {
    case ReshardAfterForward::Mode::on:
      return "True";
    case ReshardAfterForward::Mode::off:
      return "False";
    case ReshardAfterForward::Mode::to_size:
      return std::to_string(r.size);
  }
  return "True";
}

// The root's reshard_after_forward: an explicit True (or the int) reshards it too (newer
// PyTorch), False keeps it, whatever the blocks do.
std::string root_reshard_literal(const FsdpPolicy& f) {
  if (!f.reshard_root_after_forward) return "False";
  return f.reshard_after_forward.mode == ReshardAfterForward::Mode::to_size
             ? std::to_string(f.reshard_after_forward.size)
             : "True";
}

bool is_fsdp2(EmitTarget t) {
  return t == EmitTarget::fsdp2;
}

// The docstring: what the plan is, what shardscope predicts, and how to call the module.
std::string preamble(EmitTarget target, const Scenario& s, const EmitContext& c) {
  const bool chunked = s.training.loss == LossRecipe::chunked;
  std::string out = fmt::format(
      "\"\"\"{} plan for {} on {} × {} {} ({} GPUs),\nwritten by `shardscope plan --emit {}`.\n\n",
      is_fsdp2(target) ? "FSDP2 (fully_shard)" : "FSDP1 (FullyShardedDataParallel)", s.model.name,
      s.cluster.nodes, s.cluster.gpus_per_node, s.cluster.gpu.name, s.cluster.world_size(),
      to_string(target));
  out += prediction_lines(c, "");
  out += fmt::format(
      "\nLaunch it with torchrun on {} ranks; in the training script:\n"
      "    model = MyTransformer(...)  # on the meta device or the CPU, fp32 parameters\n"
      "    model = apply_fsdp(model, {})\n"
      "    optimizer = build_optimizer(model)\n"
      "    for micro_batches in loader:  # GRAD_ACCUM micro-batches of MICRO_BATCH sequences\n"
      "{}"
      "        train_step(model, optimizer, micro_batches)\n"
      "{}Each micro-batch is a dict of \"input_ids\" and \"labels\" of shape (MICRO_BATCH, "
      "SEQ_LEN);\nthe model returns {}.\n\"\"\"\n",
      s.cluster.world_size(), is_fsdp2(target) ? "model.layers" : "MyBlock",
      s.training.generation.calls > 0
          ? "        for _ in range(GENERATION_CALLS):  # prompts: (GENERATION_BATCH, "
            "PROMPT_TOKENS)\n"
            "            rollout(model, next(prompts))\n"
          : "",
      is_fsdp2(target) ? "`model.layers` is the nn.ModuleList of transformer blocks in forward "
                         "order.\n"
                       : "`MyBlock` is the transformer block class.\n",
      !chunked           ? "logits (batch, seq, vocab)"
      : is_fsdp2(target) ? "the final hidden states (batch, seq, hidden) and `model.output` is the "
                           "output head"
                         : "the loss when called with labels=, its forward ending in\n"
                           "    `return chunked_loss(self.output.weight, hidden, labels)`");
  return out;
}

std::string imports(EmitTarget target, const Scenario& s, bool mesh) {
  std::string out;
  if (s.allocator.expandable_segments) {
    out +=
        "import os\n\n"
        "# Before CUDA initialises (or set it in the launcher): the plan's memory assumes it.\n"
        "os.environ[\"PYTORCH_CUDA_ALLOC_CONF\"] = \"expandable_segments:True\"\n\n";
  }
  out += "import functools\n\nimport torch\n";
  if (s.training.loss == LossRecipe::upcast_fp32) out += "import torch.nn.functional as F\n";
  out += is_fsdp2(target)
             ? "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import "
               "checkpoint_wrapper\n"
             : "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (\n"
               "    apply_activation_checkpointing,\n    checkpoint_wrapper,\n)\n";
  if (mesh) out += "from torch.distributed.device_mesh import init_device_mesh\n";
  if (is_fsdp2(target)) {
    const bool generating = s.training.generation.calls > 0;
    out += fmt::format(
        "from torch.distributed.fsdp import (\n    CPUOffloadPolicy,\n{}    MixedPrecisionPolicy,\n"
        "    OffloadPolicy,\n    fully_shard,\n{})\n",
        generating ? "    FSDPModule,\n" : "",
        generating ? "    register_fsdp_forward_method,\n" : "");
  } else {
    out +=
        "from torch.distributed.fsdp import (\n    BackwardPrefetch,\n    CPUOffload,\n"
        "    FullyShardedDataParallel as FSDP,\n    MixedPrecision,\n    ShardingStrategy,\n)\n"
        "from torch.distributed.fsdp.wrap import ModuleWrapPolicy\n";
  }
  out +=
      "from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts\n";
  if (s.training.loss == LossRecipe::fused)
    out += "from flash_attn.losses.cross_entropy import CrossEntropyLoss  # in-place fused CE\n";
  if (s.training.loss == LossRecipe::chunked)
    out += "from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss  # chunked CE\n";
  return out + "\n";
}

// The plan's knobs that are not arguments of one call, as the constants the code below uses.
std::string constants(EmitTarget target, const Scenario& s) {
  const auto& t = s.training;
  const auto& f = s.fsdp;
  std::string out =
      "# The plan. Each constant is used below; change them together with a re-plan.\n";
  out +=
      "DEVICE = \"cuda\"  # torch device type (\"cpu\" runs the plan over gloo, as shardscope's "
      "tests do)\n";
  out += fmt::format("SEQ_LEN = {}  # tokens per sequence\n", t.seq_len);
  out += fmt::format("MICRO_BATCH = {}  # sequences per GPU per micro-batch\n", t.micro_batch);
  out +=
      fmt::format("GRAD_ACCUM = {}  # micro-batches per optimizer step ({} tokens per step)\n",
                  t.grad_accum, t.seq_len * t.micro_batch * t.grad_accum * s.cluster.world_size());
  out += fmt::format(
      "ACTIVATION_CHECKPOINTING = \"{}\"  # none, full, selective_op or every_N (each N-th "
      "block)\n",
      to_string(t.activation_checkpointing, t.checkpoint_every));
  out += fmt::format(
      "GRADIENT_SYNC = \"{}\"  # reduce gradients every_microbatch or last_microbatch\n",
      to_string(f.requires_gradient_sync));
  if (!is_fsdp2(target)) return out + "\n\n";
  out += fmt::format("BLOCKS_PER_GROUP = {}  # transformer blocks per fully_shard group\n",
                     f.blocks_per_group);
  out += fmt::format(
      "RESHARD_AFTER_FORWARD = {}  # block groups: free (True), keep (False) or an int mesh size\n",
      reshard_literal(f.reshard_after_forward));
  out += fmt::format(
      "RESHARD_LAST_AFTER_FORWARD = {}  # the last block group (backward starts with it)\n",
      f.reshard_last_after_forward ? reshard_literal(f.reshard_after_forward) : "False");
  out += fmt::format(
      "FORWARD_PREFETCH = {}  # groups each group all-gathers ahead in forward (0: implicit)\n",
      f.forward_prefetch_modules);
  out += fmt::format(
      "BACKWARD_PREFETCH = {}  # groups each group all-gathers ahead in backward (0: implicit, "
      "one)\n",
      f.backward_prefetch_modules);
  out += fmt::format(
      "SEPARATE_REDUCE_SCATTER_GROUP = {}  # reduce-scatter on its own communicator "
      "(pytorch#186335)\n",
      py_bool(f.separate_reduce_scatter_group));
  if (f.is_hybrid())
    out +=
        fmt::format("ALL_REDUCE = \"{}\"  # HSDP all-reduce every_microbatch or last_microbatch\n",
                    to_string(f.requires_all_reduce));
  if (const auto& g = t.generation; g.calls > 0) {
    out += fmt::format(
        "GENERATION_CALLS = {}  # rollout(model, prompts) calls before each train_step\n"
        "GENERATION_BATCH = {}  # prompts per call per GPU\n"
        "PROMPT_TOKENS = {}  # tokens per prompt\n"
        "NEW_TOKENS = {}  # tokens generated per prompt (the plan prices all: no early stop)\n",
        g.calls, g.batch, g.prompt_tokens, g.new_tokens);
  }
  return out + "\n\n";
}

std::string mesh_function(const Scenario& s, bool needed) {
  const auto& f = s.fsdp;
  if (!needed) return {};
  if (f.is_hybrid() || f.mesh_shard == 1)
    return fmt::format(
        "def build_mesh():\n"
        "    # {} replicas of {}-way sharding: gradients all-reduced across replicas (HSDP).\n"
        "    return init_device_mesh(DEVICE, ({}, {}), mesh_dim_names=(\"replicate\", "
        "\"shard\"))\n\n\n",
        f.mesh_replicate, f.mesh_shard, f.mesh_replicate, f.mesh_shard);
  return fmt::format(
      "def build_mesh():\n"
      "    return init_device_mesh(DEVICE, ({},), mesh_dim_names=(\"shard\",))\n\n\n",
      f.mesh_shard);
}

// torchtitan's op-level policy: save attention and every other matmul, recompute the rest.
constexpr const char* kCheckpointing = R"(_SAVED_OPS = {
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
}


def _selective_op_context():
    # Per checkpointed block: save attention and the 1st, 3rd, ... matmul (q, v, the MLP's first),
    # recompute the others and the memory-bound kernels in backward.
    matmuls = {"forward": 0, "recompute": 0}

    def policy(ctx, op, *args, **kwargs):
        if op == torch.ops.aten.mm.default:
            mode = "recompute" if ctx.is_recompute else "forward"
            matmuls[mode] += 1
            keep = matmuls[mode] % 2 == 1
        else:
            keep = op in _SAVED_OPS
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def _checkpointed(index):
    """Whether block `index` (0-based, forward order) is checkpointed."""
    if ACTIVATION_CHECKPOINTING in ("full", "selective_op"):
        return True
    if ACTIVATION_CHECKPOINTING.startswith("every_"):
        return (index + 1) % int(ACTIVATION_CHECKPOINTING[len("every_"):]) == 0
    return False


def _checkpoint_wrapper_fn():
    if ACTIVATION_CHECKPOINTING == "selective_op":
        return functools.partial(
            checkpoint_wrapper, context_fn=_selective_op_context, preserve_rng_state=False
        )
    return functools.partial(checkpoint_wrapper, preserve_rng_state=False)


)";

// FSDP1 (use_orig_params) shows a parameter as its shard outside its unit's forward, so the
// chunked loss, which applies the output head itself, is called from the model's forward.
constexpr const char* kChunkedLossInForward = R"(def chunked_loss(head_weight, hidden, labels):
    """training.loss chunked: the output head and the loss per chunk of tokens, never the full
    logits (Liger's fused linear cross-entropy). Outside its forward FSDP1 shows the head's
    weight as its shard: the model's forward calls this last when given labels."""
    loss_fn = LigerFusedLinearCrossEntropyLoss()
    return loss_fn(head_weight, hidden.flatten(0, 1), labels.flatten(0, 1))


def compute_loss(model, batch):
    # training.loss chunked: the model's forward ends with chunked_loss above.
    return model(batch["input_ids"], labels=batch["labels"])


)";

std::string loss_function(EmitTarget target, const Scenario& s) {
  if (!is_fsdp2(target) && s.training.loss == LossRecipe::chunked) return kChunkedLossInForward;
  std::string out = "def compute_loss(model, batch):\n";
  switch (s.training.loss) {
    case LossRecipe::upcast_fp32:
      out +=
          "    # training.loss upcast_fp32: an fp32 copy of the logits, then log-softmax "
          "(torchtitan, HF).\n"
          "    logits = model(batch[\"input_ids\"])\n"
          "    return F.cross_entropy(logits.flatten(0, 1).float(), "
          "batch[\"labels\"].flatten(0, 1))\n";
      break;
    case LossRecipe::fused:
      out +=
          "    # training.loss fused: flash-attn's cross-entropy writes the gradient into the "
          "logits.\n"
          "    logits = model(batch[\"input_ids\"])\n"
          "    loss_fn = CrossEntropyLoss(inplace_backward=True)\n"
          "    return loss_fn(logits.flatten(0, 1), batch[\"labels\"].flatten(0, 1))\n";
      break;
    case LossRecipe::chunked:
      out +=
          "    # training.loss chunked: the output head and the loss per chunk of tokens, never "
          "the full\n"
          "    # logits (Liger's fused linear cross-entropy; the model returns hidden states).\n"
          "    hidden = model(batch[\"input_ids\"])\n"
          "    loss_fn = LigerFusedLinearCrossEntropyLoss()\n"
          "    return loss_fn(model.output.weight, hidden.flatten(0, 1), "
          "batch[\"labels\"].flatten(0, 1))\n";
      break;
  }
  return out + "\n\n";
}

std::string optimizer_function(const Scenario& s) {
  std::string make;
  switch (s.training.optimizer) {
    case Optimizer::adamw:
      make = "torch.optim.AdamW(model.parameters(), lr=lr";
      break;
    case Optimizer::adam:
      make = "torch.optim.Adam(model.parameters(), lr=lr";
      break;
    case Optimizer::sgd:
      make = "torch.optim.SGD(model.parameters(), lr=lr";
      break;
  }
  // foreach is what torch.optim picks on CUDA when neither is asked for.
  make += s.training.optimizer_impl == OptimizerImpl::fused ? ", fused=True)" : ")";
  return fmt::format(
      "def build_optimizer(model, lr=3e-4):\n"
      "    # {} ({}): the optimizer states and passes the plan counts.\n"
      "    return {}\n\n\n",
      to_string(s.training.optimizer), to_string(s.training.optimizer_impl), make);
}

// The emitted code's autocast context (training.autocast), or "" without autocast.
std::string autocast_context(const Scenario& s) {
  const auto& a = s.training.autocast;
  return a ? fmt::format("torch.autocast(DEVICE, dtype={})", torch_dtype(*a)) : "";
}

// training.generation: one call of the registered generate, as the plan prices it.
std::string rollout_function(const Scenario& s) {
  const auto& g = s.training.generation;
  if (g.calls == 0) return {};
  std::string out =
      "def rollout(model, prompts):\n"
      "    \"\"\"One generation call (GENERATION_CALLS before each train_step): the model's "
      "generate\n"
      "    (Hugging Face's), registered in apply_fsdp, under no_grad. Returns the new "
      "tokens.\"\"\"\n"
      "    assert prompts.shape == (GENERATION_BATCH, PROMPT_TOKENS)\n";
  if (g.keep_unsharded)
    out += "    model.set_reshard_after_forward(False)  # each group gathered once per call\n";
  // Under the training step's autocast, as the plan prices it.
  const std::string autocast = s.training.autocast ? ", " + autocast_context(s) : "";
  out += fmt::format(
      "    with torch.no_grad(){}:\n"
      "        tokens = model.generate(\n"
      "            prompts, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS{}\n"
      "        )\n",
      autocast, g.kv_cache == KvCache::preallocated ? ", cache_implementation=\"static\"" : "");
  if (g.keep_unsharded) {
    out += fmt::format(
        "    for module in model.modules():\n"
        "        if isinstance(module, FSDPModule):\n"
        "            module.reshard()\n"
        "    # The plan's settings back for training.\n"
        "    blocks = [m for m in model.modules() if isinstance(m, FSDPModule) and m is not "
        "model]\n"
        "    last = (len(blocks) - 1) // BLOCKS_PER_GROUP\n"
        "    for i, block in enumerate(blocks):\n"
        "        keep = RESHARD_LAST_AFTER_FORWARD if i // BLOCKS_PER_GROUP == last else "
        "RESHARD_AFTER_FORWARD\n"
        "        block.set_reshard_after_forward(keep, recurse=False)\n"
        "    model.set_reshard_after_forward({}, recurse=False)\n",
        root_reshard_literal(s.fsdp));
  }
  return out + "    return tokens\n\n\n";
}

std::string train_step(EmitTarget target, const Scenario& s) {
  const auto& t = s.training;
  const auto& f = s.fsdp;
  std::string out =
      "def train_step(model, optimizer, micro_batches):\n"
      "    \"\"\"One optimizer step over GRAD_ACCUM micro-batches.\"\"\"\n"
      "    assert len(micro_batches) == GRAD_ACCUM\n"
      "    for i, batch in enumerate(micro_batches):\n"
      "        # The plan's memory and time are for this shape; re-plan before changing it.\n"
      "        assert batch[\"input_ids\"].shape == (MICRO_BATCH, SEQ_LEN)\n"
      "        last = i == GRAD_ACCUM - 1\n";
  const std::string autocast = autocast_context(s);
  std::string body;
  if (is_fsdp2(target)) {
    out +=
        "        model.set_requires_gradient_sync(GRADIENT_SYNC == \"every_microbatch\" or last)\n";
    if (f.is_hybrid())
      out += "        model.set_requires_all_reduce(ALL_REDUCE == \"every_microbatch\" or last)\n";
    if (f.is_last_backward == SyncSchedule::last_microbatch)
      out += "        model.set_is_last_backward(last)  # fsdp.is_last_backward: last_microbatch\n";
    body = "        loss = compute_loss(model, batch) / GRAD_ACCUM\n";
    if (t.autocast) body = fmt::format("        with {}:\n    {}", autocast, body);
    out += body + "        loss.backward()\n";
  } else {
    out +=
        "        sync = GRADIENT_SYNC == \"every_microbatch\" or last\n"
        "        with contextlib.nullcontext() if sync else model.no_sync():\n";
    if (t.autocast) {
      out += fmt::format(
          "            with {}:\n"
          "                loss = compute_loss(model, batch) / GRAD_ACCUM\n",
          autocast);
    } else {
      out += "            loss = compute_loss(model, batch) / GRAD_ACCUM\n";
    }
    out += "            loss.backward()\n";
  }
  if (t.synchronize == Synchronize::after_forward)
    out +=
        "        torch.get_device_module(DEVICE).synchronize()  # training.synchronize: "
        "after_forward\n";
  out += "    optimizer.step()\n    optimizer.zero_grad(set_to_none=True)\n";
  if (is_fsdp2(target) && f.post_optim_event)
    out +=
        "    # fsdp.post_optim_event: the next forward's all-gathers wait on the optimizer only.\n"
        "    stream = torch.get_device_module(DEVICE).current_stream()\n"
        "    model.set_post_optim_event(stream.record_event())\n";
  if (t.synchronize == Synchronize::after_step)
    out +=
        "    torch.get_device_module(DEVICE).synchronize()  # training.synchronize: after_step\n";
  return out;
}

std::string apply_fsdp2(const Scenario& s) {
  const auto& f = s.fsdp;
  const auto& mp = f.mixed_precision;
  const DType param = param_dtype(mp);
  const DType reduce = mp.reduce_dtype.value_or(param);
  std::string out =
      "def apply_fsdp(model, blocks):\n"
      "    \"\"\"Checkpoint and shard `model` in place; `blocks` is its nn.ModuleList of "
      "blocks.\"\"\"\n"
      "    mesh = build_mesh()\n";
  // MixedPrecisionPolicy's other fields only where they differ from its defaults; with
  // output_dtype on the root only, the blocks' policy lacks it (docs/semantics.md,
  // "Mixed-precision casts").
  const std::string policy_args =
      fmt::format("param_dtype={}, reduce_dtype={}{}", torch_dtype(param), torch_dtype(reduce),
                  casts_forward_inputs(mp, FsdpApi::fsdp2) ? "" : ", cast_forward_inputs=False");
  const std::string output =
      mp.output_dtype ? fmt::format(", output_dtype={}", torch_dtype(*mp.output_dtype)) : "";
  const bool root_only = mp.output_dtype && mp.output_dtype_modules == OutputCastModules::root;
  out += fmt::format("    mp_policy = MixedPrecisionPolicy({}{})\n", policy_args,
                     root_only ? "" : output);
  out += root_only ? fmt::format(
                         "    # output_dtype on the root's call only: the logits the loss reads.\n"
                         "    root_mp_policy = MixedPrecisionPolicy({}{})\n",
                         policy_args, output)
                   : "    root_mp_policy = mp_policy\n";
  out += f.cpu_offload.params
             ? fmt::format(
                   "    # Sharded parameters, gradients and the optimizer step on the CPU.\n"
                   "    offload_policy = CPUOffloadPolicy(pin_memory={})\n",
                   py_bool(f.cpu_offload.pin_memory))
             : "    offload_policy = OffloadPolicy()  # no CPU offload\n";
  out +=
      "    wrap = _checkpoint_wrapper_fn()\n"
      "    for i in range(len(blocks)):\n"
      "        if _checkpointed(i):\n"
      "            blocks[i] = wrap(blocks[i])\n"
      "    groups = [\n"
      "        list(blocks[i : i + BLOCKS_PER_GROUP]) for i in range(0, len(blocks), "
      "BLOCKS_PER_GROUP)\n"
      "    ]\n"
      "    for i, group in enumerate(groups):\n"
      "        fully_shard(\n"
      "            group if len(group) > 1 else group[0],\n"
      "            mesh=mesh,\n"
      "            mp_policy=mp_policy,\n"
      "            offload_policy=offload_policy,\n"
      "            reshard_after_forward=(\n"
      "                RESHARD_LAST_AFTER_FORWARD if i == len(groups) - 1 else "
      "RESHARD_AFTER_FORWARD\n"
      "            ),\n"
      "        )\n";
  out += fmt::format(
      "    # The root group: embeddings, final norm and output head.\n"
      "    fully_shard(\n"
      "        model,\n"
      "        mesh=mesh,\n"
      "        mp_policy=root_mp_policy,\n"
      "        offload_policy=offload_policy,\n"
      "        reshard_after_forward={},\n"
      "    )\n",
      root_reshard_literal(f));
  out +=
      "    # A grouped fully_shard shares one state, so the group's first block stands for it.\n"
      "    heads = [group[0] for group in groups]\n"
      "    for i, head in enumerate(heads):\n"
      "        if FORWARD_PREFETCH > 0:\n"
      "            head.set_modules_to_forward_prefetch(heads[i + 1 : i + 1 + FORWARD_PREFETCH])\n"
      "        if BACKWARD_PREFETCH > 0:\n"
      "            ahead = heads[max(0, i - BACKWARD_PREFETCH) : i]\n"
      "            head.set_modules_to_backward_prefetch(list(reversed(ahead)))\n"
      "    if SEPARATE_REDUCE_SCATTER_GROUP:\n"
      "        if not hasattr(model, \"set_separate_reduce_scatter_group\"):\n"
      "            raise RuntimeError(\n"
      "                \"SEPARATE_REDUCE_SCATTER_GROUP needs a PyTorch with \"\n"
      "                \"FSDPModule.set_separate_reduce_scatter_group (pytorch#186335)\"\n"
      "            )\n"
      "        model.set_separate_reduce_scatter_group(True)\n";
  if (!f.reshard_after_backward) out += "    model.set_reshard_after_backward(False)\n";
  if (f.all_gather_buffer == AllGatherBuffer::persistent)
    out +=
        "    # fsdp.all_gather_buffer: persistent. One all-gather output per group, allocated by\n"
        "    # the first all-gather and kept (more memory, no allocator churn).\n"
        "    from torch.distributed.fsdp._fully_shard._fsdp_api import AllGather\n"
        "\n"
        "    class PersistentAllGather(AllGather):\n"
        "        def __init__(self):\n"
        "            self.buffer = None\n"
        "\n"
        "        def allocate(self, size, *, dtype, device):\n"
        "            if self.buffer is None:\n"
        "                self.buffer = torch.empty(*size, dtype=dtype, device=device)\n"
        "            return self.buffer\n"
        "\n"
        "        def __call__(self, output_tensor, input_tensor, group, async_op=False):\n"
        "            return torch.distributed.all_gather_into_tensor(\n"
        "                output_tensor, input_tensor, group=group, async_op=async_op\n"
        "            )\n"
        "\n"
        "    for module in [*heads, model]:\n"
        "        module.set_custom_all_gather(PersistentAllGather())\n";
  if (s.training.generation.calls > 0)
    out +=
        "    # training.generation: generate runs FSDP's root hooks around the whole call.\n"
        "    register_fsdp_forward_method(model, \"generate\")\n";
  if (f.comm_buffer_pool == CommBufferPool::process_group)
    out +=
        "    # fsdp.comm_buffer_pool: process_group. All-gather outputs and reduce-scatter "
        "buffers\n"
        "    # from the process group's pool (NCCL's registered memory where the GPU has "
        "multicast).\n"
        "    for module in [*heads, model]:\n"
        "        module.set_allocate_memory_from_process_group_for_comm(True)\n";
  return out + "    return model\n\n\n";
}

std::string apply_fsdp1(const Scenario& s) {
  const auto& f = s.fsdp;
  const auto& mp = f.mixed_precision;
  if (f.blocks_per_group != 1)
    throw ValidationError({{"fsdp.wrap.blocks_per_group", std::to_string(f.blocks_per_group),
                            "FSDP1 wraps one module per unit: grouping blocks needs a model change",
                            "1 (plan --emit fsdp1 searches only that)"}});
  const DType param = param_dtype(mp);
  const DType reduce = mp.reduce_dtype.value_or(param);
  const bool hybrid = f.sharding_strategy == ShardingStrategy::hybrid_shard ||
                      f.sharding_strategy == ShardingStrategy::hybrid_shard_zero2;
  std::string out =
      "def apply_fsdp(model, block_class):\n"
      "    \"\"\"Wrap each `block_class` block in its own FSDP unit, the rest in the root.\"\"\"\n"
      "    model = FSDP(\n"
      "        model,\n";
  out += fmt::format("        sharding_strategy=ShardingStrategy.{},\n",
                     to_string(f.sharding_strategy));
  if (hybrid) out += "        device_mesh=build_mesh(),\n";
  out += "        auto_wrap_policy=ModuleWrapPolicy({block_class}),\n";
  out += fmt::format(
      "        mixed_precision=MixedPrecision(\n"
      "            param_dtype={},\n            reduce_dtype={},\n"
      "            keep_low_precision_grads={},\n",
      torch_dtype(param), torch_dtype(reduce), py_bool(mp.keep_low_precision_grads));
  // MixedPrecision's other fields only where they differ from its defaults.
  if (mp.buffer_dtype)
    out += fmt::format("            buffer_dtype={},\n", torch_dtype(*mp.buffer_dtype));
  if (casts_forward_inputs(mp, FsdpApi::fsdp1)) out += "            cast_forward_inputs=True,\n";
  if (!mp.cast_root_forward_inputs) out += "            cast_root_forward_inputs=False,\n";
  if (mp.module_classes_to_ignore != MixedPrecision{}.module_classes_to_ignore) {
    std::string classes;
    for (const std::string& name : mp.module_classes_to_ignore)
      classes += fmt::format("torch.nn.modules.batchnorm.{}, ", name);
    out += fmt::format("            _module_classes_to_ignore=({}),\n",
                       classes.empty() ? "" : classes.substr(0, classes.size() - 1));
  }
  out += "        ),\n";
  out += fmt::format("        cpu_offload=CPUOffload(offload_params={}),\n",
                     py_bool(f.cpu_offload.params));
  out += f.backward_prefetch == BackwardPrefetch::none
             ? "        backward_prefetch=None,\n"
             : fmt::format("        backward_prefetch=BackwardPrefetch.{},\n",
                           to_string(f.backward_prefetch));
  out += fmt::format(
      "        forward_prefetch={},\n        limit_all_gathers={},\n"
      "        use_orig_params=True,\n"
      "        device_id=torch.get_device_module(DEVICE).current_device(),\n    )\n",
      py_bool(f.forward_prefetch), py_bool(f.limit_all_gathers));
  out +=
      "    # Checkpoint wrapping after FSDP wrapping: each block runs inside its FSDP unit.\n"
      "    blocks = [m for m in model.modules() if isinstance(m, block_class)]\n"
      "    chosen = {id(b) for i, b in enumerate(blocks) if _checkpointed(i)}\n"
      "    apply_activation_checkpointing(\n"
      "        model,\n"
      "        checkpoint_wrapper_fn=_checkpoint_wrapper_fn(),\n"
      "        check_fn=lambda m: id(m) in chosen,\n"
      "    )\n"
      "    return model\n\n\n";
  return out;
}

}  // namespace

std::string emit_python(EmitTarget target, const Scenario& s, const EmitContext& c) {
  const bool fsdp2 = is_fsdp2(target);
  const bool hybrid = s.fsdp.sharding_strategy == ShardingStrategy::hybrid_shard ||
                      s.fsdp.sharding_strategy == ShardingStrategy::hybrid_shard_zero2;
  std::string out = preamble(target, s, c);
  out += imports(target, s, fsdp2 || hybrid);
  if (!fsdp2) out.insert(out.find("import functools"), "import contextlib\n");
  out += constants(target, s);
  out += mesh_function(s, fsdp2 || hybrid);
  out += kCheckpointing;
  out += fsdp2 ? apply_fsdp2(s) : apply_fsdp1(s);
  out += loss_function(target, s);
  out += optimizer_function(s);
  if (fsdp2) out += rollout_function(s);
  out += train_step(target, s);
  return out;
}

}  // namespace shardscope::sim::detail
