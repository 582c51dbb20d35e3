"""The training step a scenario describes, as ``plan --emit`` writes it: ``training.grad_accum``
micro-batches each a forward and a backward, FSDP2's ``set_requires_gradient_sync`` /
``set_requires_all_reduce`` or FSDP1's ``no_sync()`` on the micro-batches that do not reduce,
then the optimizer step and ``zero_grad(set_to_none=True)``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import is_fake

from .fsdp import DTYPES, FsdpSettings


@dataclass(frozen=True)
class TrainingSettings:
    seq_len: int = 16
    micro_batch: int = 2
    grad_accum: int = 1
    iterations: int = 2
    optimizer: str = "adamw"
    autocast: str = ""  # "" or a dtype name
    loss: str = "upcast_fp32"
    activation_checkpointing: str = "none"

    @staticmethod
    def from_keys(keys: dict[str, str]) -> "TrainingSettings":
        return TrainingSettings(
            seq_len=int(keys.get("training.seq_len", 16)),
            micro_batch=int(keys.get("training.micro_batch", 2)),
            grad_accum=int(keys.get("training.grad_accum", 1)),
            iterations=int(keys.get("training.iterations", 2)),
            optimizer=keys.get("training.optimizer", "adamw"),
            autocast="" if keys.get("training.autocast", "none") == "none"
            else keys["training.autocast"],
            loss=keys.get("training.loss", "upcast_fp32"),
            activation_checkpointing=keys.get("training.activation_checkpointing", "none"),
        )


def build_optimizer(model, name: str):
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1e-2)
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    return cls(model.parameters(), lr=1e-3, foreach=True)


def train(model, fsdp: FsdpSettings, t: TrainingSettings, vocab: int, device: torch.device,
          phases=None, seed: int = 0, on_step=None, optimizer=None) -> list[float]:
    """Runs t.iterations optimizer steps; returns each step's loss (summed over micro-batches).
    ``phases(phase, iteration, microbatch)`` is told where the loop is (forward, backward,
    optimizer); ``on_step(iteration)`` is called after each optimizer step."""
    phases = phases or (lambda phase, iteration, microbatch: None)
    optimizer = build_optimizer(model, t.optimizer)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for it in range(t.iterations):
        total = 0.0
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
            autocast = (torch.autocast(device.type, dtype=DTYPES[t.autocast]) if t.autocast
                        else contextlib.nullcontext())
            inner = getattr(model, "module", model)  # FSDP1 wraps the model
            with context:
                phases("forward", it, mb)
                if fsdp.api == "fsdp2" and fsdp.unshard_ahead > 0:
                    # fsdp.unshard_ahead: FSDPModule.unshard(async_op=True) on the first N block
                    # groups; FSDP waits on each in its pre-forward.
                    groups = inner.layers[::fsdp.blocks_per_group]
                    for group in groups[: fsdp.unshard_ahead]:
                        group.unshard(async_op=True)
                with autocast:
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
