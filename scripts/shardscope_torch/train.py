"""The training step a scenario describes, as ``plan --emit`` writes it: ``training.grad_accum``
micro-batches each a forward and a backward, FSDP2's ``set_requires_gradient_sync`` /
``set_requires_all_reduce`` or FSDP1's ``no_sync()`` on the micro-batches that do not reduce,
then the optimizer step and ``zero_grad(set_to_none=True)``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import is_fake

from .fsdp import DTYPES, FsdpSettings, group_heads


@dataclass(frozen=True)
class TrainingSettings:
    seq_len: int = 16
    micro_batch: int = 2
    grad_accum: int = 1
    iterations: int = 2
    optimizer: str = "adamw"
    optimizer_impl: str = "foreach"  # foreach | fused
    autocast: str = ""  # "" or a dtype name
    loss: str = "upcast_fp32"
    activation_checkpointing: str = "none"
    # training.generation: calls of the registered generate before each step (FSDP2)
    generation_calls: int = 0
    generation_batch: int = 1
    prompt_tokens: int = 512
    new_tokens: int = 128
    keep_unsharded: bool = False
    kv_cache: str = "dynamic"

    @staticmethod
    def from_keys(keys: dict[str, str]) -> "TrainingSettings":
        return TrainingSettings(
            seq_len=int(keys.get("training.seq_len", 16)),
            micro_batch=int(keys.get("training.micro_batch", 2)),
            grad_accum=int(keys.get("training.grad_accum", 1)),
            iterations=int(keys.get("training.iterations", 2)),
            optimizer=keys.get("training.optimizer", "adamw"),
            optimizer_impl=keys.get("training.optimizer_impl", "foreach"),
            autocast="" if keys.get("training.autocast", "none") == "none"
            else keys["training.autocast"],
            loss=keys.get("training.loss", "upcast_fp32"),
            activation_checkpointing=keys.get("training.activation_checkpointing", "none"),
            generation_calls=int(keys.get("training.generation.calls", 0)),
            generation_batch=int(keys.get("training.generation.batch", 1)),
            prompt_tokens=int(keys.get("training.generation.prompt_tokens", 512)),
            new_tokens=int(keys.get("training.generation.new_tokens", 128)),
            keep_unsharded=keys.get("training.generation.keep_unsharded", "false") == "true",
            kv_cache=keys.get("training.generation.kv_cache", "dynamic"),
        )


def autocast_context(t: TrainingSettings, device: torch.device):
    """training.autocast over the forward (and the generation), or nothing."""
    return (torch.autocast(device.type, dtype=DTYPES[t.autocast]) if t.autocast
            else contextlib.nullcontext())


def build_optimizer(model, name: str, impl: str = "foreach"):
    """training.optimizer and training.optimizer_impl. Adam(W) asks for foreach explicitly
    because torch.optim picks it only on CUDA and the oracles run on the CPU too (its temporary
    is what the memory model counts); SGD without momentum moves the same bytes and keeps no
    state either way, and is left to PyTorch's choice (foreach cannot take FSDP1's
    keep_low_precision_grads, whose gradients differ in dtype from their parameters)."""
    fused = {"fused": True} if impl == "fused" else {}
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1e-2, **fused)
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    return cls(model.parameters(), lr=1e-3, **(fused or {"foreach": True}))


def generate(model, fsdp: FsdpSettings, t: TrainingSettings, vocab: int, device: torch.device,
             gen: torch.Generator) -> None:
    """training.generation: t.generation_calls calls of the model's generate, registered with
    register_fsdp_forward_method, under no_grad and the step's autocast (an RL rollout before
    the step). keep_unsharded:
    set_reshard_after_forward(False) for the call, then reshard() on every FSDP module and the
    settings the model was sharded with back."""
    from torch.distributed.fsdp import FSDPModule, register_fsdp_forward_method

    from .fsdp import restore_reshard_after_forward

    if not getattr(model, "_generate_registered", False):  # once: a second wrap nests the hooks
        register_fsdp_forward_method(model, "generate")
        model._generate_registered = True
    for _ in range(t.generation_calls):
        prompts = torch.randint(0, vocab, (t.generation_batch, t.prompt_tokens),
                                generator=gen).to(device)
        if t.keep_unsharded:
            model.set_reshard_after_forward(False)
        # under the step's autocast, as shardscope prices it
        with torch.no_grad(), autocast_context(t, device):
            model.generate(prompts, max_new_tokens=t.new_tokens, min_new_tokens=t.new_tokens,
                           cache_implementation="static" if t.kv_cache == "preallocated" else None)
        if t.keep_unsharded:
            for module in model.modules():
                if isinstance(module, FSDPModule):
                    module.reshard()
            restore_reshard_after_forward(model, fsdp)


def train(model, fsdp: FsdpSettings, t: TrainingSettings, vocab: int, device: torch.device,
          phases=None, seed: int = 0, on_step=None, optimizer=None) -> list[float]:
    """Runs t.iterations optimizer steps; returns each step's loss (summed over micro-batches).
    ``phases(phase, iteration, microbatch)`` is told where the loop is (forward, backward,
    optimizer); ``on_step(iteration)`` is called after each optimizer step. ``optimizer``: the
    one to step (a memory tracker's), else one built from t."""
    phases = phases or (lambda phase, iteration, microbatch: None)
    optimizer = optimizer or build_optimizer(model, t.optimizer, t.optimizer_impl)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for it in range(t.iterations):
        total = 0.0
        if t.generation_calls > 0:
            phases("generation", it, 0)
            generate(model, fsdp, t, vocab, device, gen)
        for mb in range(t.grad_accum):
            last = mb == t.grad_accum - 1
            tokens = torch.randint(0, vocab, (t.micro_batch, t.seq_len), generator=gen).to(device)
            labels = torch.randint(0, vocab, (t.micro_batch, t.seq_len), generator=gen).to(device)
            sync = fsdp.requires_gradient_sync == "every_microbatch" or last
            context = contextlib.nullcontext()
            if fsdp.api == "fsdp2":
                model.set_requires_gradient_sync(sync)
                if fsdp.is_last_backward == "last_microbatch":
                    model.set_is_last_backward(last)
                if fsdp.mesh_shape()[0] > 1:
                    model.set_requires_all_reduce(
                        fsdp.requires_all_reduce == "every_microbatch" or last)
            elif not sync:
                context = model.no_sync()
            inner = getattr(model, "module", model)  # FSDP1 wraps the model
            with context:
                phases("forward", it, mb)
                if fsdp.api == "fsdp2" and fsdp.unshard_ahead > 0:
                    # fsdp.unshard_ahead: FSDPModule.unshard(async_op=True) on the first N block
                    # groups; FSDP waits on each in its pre-forward.
                    for head in group_heads(model, fsdp)[: fsdp.unshard_ahead]:
                        head.unshard(async_op=True)
                with autocast_context(t, device):
                    if inner.loss_in_forward:
                        loss = model(tokens, labels) / t.grad_accum
                    else:
                        pred = model(tokens)
                        loss = inner.compute_loss(pred, labels) / t.grad_accum
                        del pred  # torchtitan's train step: the logits go before backward
                phases("backward", it, mb)
                loss.backward()
            # A fake tensor (FakeTensorMode) has no value to read.
            total += float("nan") if is_fake(loss) else float(loss.detach())
            del loss
        phases("optimizer", it, t.grad_accum - 1)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
        if on_step is not None:
            on_step(it)
    return losses
