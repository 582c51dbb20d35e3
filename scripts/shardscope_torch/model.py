"""shardscope's transformer family in plain PyTorch (docs/semantics.md, core/src/param_groups.cpp).

The parameter tensors, their shapes and their order are those of ``block_param_shapes`` and
``root_param_shapes``: a block is an attention norm, wq, wk, wv (optional biases), wo (optional
bias), an FFN norm and the MLP (SwiGLU: w1, w3, w2; GELU: fc1, fc2; optional biases); the root
holds the token embedding, the learned position table (``pos_emb: learned``), the final norm and
the output head (absent when tied). So FSDP shards exactly the tensors shardscope sizes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class ModelShape:
    """A transformer as shardscope's ``model.*`` keys describe it."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    mlp: str = "swiglu"  # swiglu | gelu
    norm: str = "rmsnorm"  # rmsnorm | layernorm | low_precision_layernorm
    pos_emb: str = "rope"  # rope | learned
    max_seq: int = 0  # learned position table size
    bias: bool = False  # biases on every projection (GPT-style)
    tie_embeddings: bool = False

    def scenario_keys(self) -> dict[str, str]:
        keys = {
            "model.family": "transformer",
            "model.hidden": str(self.hidden),
            "model.layers": str(self.layers),
            "model.heads": str(self.heads),
            "model.kv_heads": str(self.kv_heads),
            "model.ffn_hidden": str(self.ffn_hidden),
            "model.vocab": str(self.vocab),
            "model.mlp": self.mlp,
            "model.norm": self.norm,
            "model.pos_emb": self.pos_emb,
            "model.bias": "true" if self.bias else "false",
            "model.tie_embeddings": "true" if self.tie_embeddings else "false",
        }
        if self.pos_emb == "learned":
            keys["model.max_seq"] = str(self.max_seq)
        return keys


# Two tiny shapes for the collective oracle. Every parameter's numel is a multiple of 4, so FSDP1
# (use_orig_params) adds no 16-byte alignment padding between parameters; the vocabulary (101 rows)
# and the GPT position table (66 rows) are not multiples of 2 or 4 ranks, so FSDP2's per-parameter
# dim-0 padding and FSDP1's flat-parameter padding both show in the bytes.
TINY_LLAMA = ModelShape(hidden=48, layers=4, heads=4, kv_heads=2, ffn_hidden=128, vocab=101)
TINY_GPT = ModelShape(
    hidden=48, layers=4, heads=4, kv_heads=4, ffn_hidden=192, vocab=101, mlp="gelu",
    norm="layernorm", pos_emb="learned", max_seq=66, bias=True, tie_embeddings=True,
)


class RMSNorm(nn.Module):
    """torchtitan's RMSNorm: normalised in fp32, cast back, times the weight."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)
        return y.type_as(x) * self.weight


class LowPrecisionLayerNorm(nn.LayerNorm):
    """llm-foundry's LPLayerNorm: under autocast, input, weight and bias are cast to the autocast
    dtype and the norm runs with autocast off, so its output and saved tensors are low precision."""

    def forward(self, x):
        if not torch.is_autocast_enabled(x.device.type):
            return super().forward(x)
        dtype = torch.get_autocast_dtype(x.device.type)
        with torch.autocast(x.device.type, enabled=False):
            return F.layer_norm(
                x.to(dtype), self.normalized_shape,
                self.weight.to(dtype) if self.weight is not None else None,
                self.bias.to(dtype) if self.bias is not None else None, self.eps,
            )


def make_norm(shape: ModelShape, dim: int) -> nn.Module:
    if shape.norm == "rmsnorm":
        return RMSNorm(dim)
    if shape.norm == "low_precision_layernorm":
        return LowPrecisionLayerNorm(dim)
    return nn.LayerNorm(dim)


def rope(x, seq: int):
    """Rotary embedding on (batch, seq, heads, head_dim); no parameters."""
    half = x.shape[-1] // 2
    freqs = 1.0 / (500000.0 ** (torch.arange(0, half, device=x.device).float() / half))
    angles = torch.outer(torch.arange(seq, device=x.device).float(), freqs)
    cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
    x1, x2 = x.float()[..., :half], x.float()[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).type_as(x)


SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}


class Block(nn.Module):
    def __init__(self, shape: ModelShape, attention: str = "flash"):
        super().__init__()
        h, f = shape.hidden, shape.ffn_hidden
        self.heads, self.kv_heads = shape.heads, shape.kv_heads
        self.head_dim = h // shape.heads
        kv = self.kv_heads * self.head_dim
        bias = shape.bias
        self.rotary = shape.pos_emb == "rope"
        self.attention_norm = make_norm(shape, h)
        self.wq = nn.Linear(h, h, bias=bias)
        self.wk = nn.Linear(h, kv, bias=bias)
        self.wv = nn.Linear(h, kv, bias=bias)
        self.wo = nn.Linear(h, h, bias=bias)
        self.ffn_norm = make_norm(shape, h)
        self.swiglu = shape.mlp == "swiglu"
        if self.swiglu:
            self.w1 = nn.Linear(h, f, bias=bias)
            self.w3 = nn.Linear(h, f, bias=bias)
            self.w2 = nn.Linear(f, h, bias=bias)
        else:
            self.fc1 = nn.Linear(h, f, bias=bias)
            self.fc2 = nn.Linear(f, h, bias=bias)
        self.attention = attention

    def attend(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim)
        if self.rotary:
            q, k = rope(q, s), rope(k, s)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.kv_heads != self.heads:  # GQA as torchtitan does it: repeat k and v
            rep = self.heads // self.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        with sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[self.attention])):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    def mlp(self, x):
        if self.swiglu:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

    def forward(self, x):
        x = x + self.attend(self.attention_norm(x))
        return x + self.mlp(self.ffn_norm(x))


class Transformer(nn.Module):
    """Embedding, blocks, final norm, head and the loss. The loss runs inside forward so that the
    head belongs to FSDP's root, as shardscope's root group ``head+loss`` does."""

    def __init__(self, shape: ModelShape, loss: str = "upcast_fp32", attention: str = "flash",
                 loss_chunk_tokens: int = 0):
        super().__init__()
        h = shape.hidden
        self.shape = shape
        self.tok_embeddings = nn.Embedding(shape.vocab, h)
        if shape.pos_emb == "learned":
            self.pos_embeddings = nn.Embedding(shape.max_seq, h)
        self.layers = nn.ModuleList(Block(shape, attention) for _ in range(shape.layers))
        self.norm = make_norm(shape, h)
        if shape.tie_embeddings:
            self.output = None
        else:
            self.output = nn.Linear(h, shape.vocab, bias=False)
        self.loss = loss
        self.loss_chunk_tokens = loss_chunk_tokens

    def head_weight(self):
        return self.tok_embeddings.weight if self.output is None else self.output.weight

    def forward(self, tokens, labels):
        x = self.tok_embeddings(tokens)
        if self.shape.pos_emb == "learned":
            x = x + self.pos_embeddings(torch.arange(tokens.shape[1], device=tokens.device))
        for layer in self.layers:
            x = layer(x)
        x = self.norm(x)
        return compute_loss(self.loss, x.flatten(0, 1), self.head_weight(), labels.flatten(),
                            self.loss_chunk_tokens)


# ---------------------------------------------------------------------------------------------
# Loss recipes (docs/semantics.md, "Loss recipes")


class FusedCrossEntropy(torch.autograd.Function):
    """An in-place fused cross-entropy in plain PyTorch, with the memory behaviour of flash-attn's
    CrossEntropyLoss(inplace_backward=True): no fp32 copy of the logits; the logits and the
    per-token log-sum-exp are saved; backward writes the gradient into the logits. Rows go in
    blocks so the fp32 temporaries are a block's, not the whole logits'."""

    BLOCK = 1024

    @staticmethod
    def forward(ctx, logits, labels):
        lse = torch.empty(logits.shape[0], device=logits.device, dtype=torch.float32)
        for s in range(0, logits.shape[0], FusedCrossEntropy.BLOCK):
            lse[s : s + FusedCrossEntropy.BLOCK] = torch.logsumexp(
                logits[s : s + FusedCrossEntropy.BLOCK].float(), dim=-1
            )
        picked = logits.gather(1, labels[:, None]).squeeze(1).float()
        ctx.save_for_backward(logits, lse, labels)
        return (lse - picked).mean()

    @staticmethod
    def backward(ctx, grad):
        logits, lse, labels = ctx.saved_tensors
        scale = grad / logits.shape[0]
        for s in range(0, logits.shape[0], FusedCrossEntropy.BLOCK):
            block = logits[s : s + FusedCrossEntropy.BLOCK]
            g = (block.float() - lse[s : s + FusedCrossEntropy.BLOCK, None]).exp_()
            rows = torch.arange(g.shape[0], device=g.device)
            g[rows, labels[s : s + FusedCrossEntropy.BLOCK]] -= 1.0
            block.copy_(g.mul_(scale))  # in place: the logits become their gradient
        return logits, None


def liger_chunk_tokens(tokens: int, hidden: int, vocab: int) -> int:
    """Liger's default chunk, as shardscope's training.loss_chunk_tokens: the next power of two
    of ceil(tokens / ceil(vocab / hidden)), at most tokens."""
    inc = math.ceil(vocab / hidden)
    return min(1 << max(0, math.ceil(math.log2(math.ceil(tokens / inc)))), tokens)


def compute_loss(loss: str, x, weight, labels, chunk_tokens: int = 0):
    if loss == "upcast_fp32":  # torchtitan's cross_entropy_loss
        return F.cross_entropy(F.linear(x, weight).float(), labels)
    if loss == "fused":
        return FusedCrossEntropy.apply(F.linear(x, weight), labels)
    if loss != "chunked":
        raise ValueError(f"unknown loss recipe {loss!r}")
    # Each chunk's head and loss checkpointed, so backward recomputes them.
    from torch.utils.checkpoint import checkpoint

    chunk = chunk_tokens or liger_chunk_tokens(x.shape[0], x.shape[1], weight.shape[0])

    def piece(xc, yc):
        return F.cross_entropy(F.linear(xc, weight).float(), yc, reduction="sum")

    total = sum(
        checkpoint(piece, x[s : s + chunk], labels[s : s + chunk], use_reentrant=False)
        for s in range(0, x.shape[0], chunk)
    )
    return total / x.shape[0]


# ---------------------------------------------------------------------------------------------
# Activation checkpointing (training.activation_checkpointing)


def selective_op_context():
    """torchtitan's op-level selective checkpointing: save the outputs of compute-heavy ops except
    every second matmul (torchtitan/models/llama3/infra/parallelize.py, _save_list). A fresh
    count per checkpointed call, as torchtitan's context function makes one."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = {
        torch.ops.aten.mm.default,
        torch.ops.aten._scaled_dot_product_efficient_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    }
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def checkpointed_blocks(policy: str, layers: int) -> list[int]:
    """The blocks a policy checkpoints, as the simulator chooses them: every block for full and
    selective_op, blocks with (i + 1) % N == 0 for every_N."""
    if policy == "none":
        return []
    if policy in ("full", "selective_op"):
        return list(range(layers))
    if policy.startswith("every_"):
        n = int(policy[len("every_"):])
        return [i for i in range(layers) if (i + 1) % n == 0]
    raise ValueError(f"unknown activation checkpointing policy {policy!r}")


def apply_checkpointing(model: Transformer, policy: str) -> None:
    """Wraps the checkpointed blocks in checkpoint_wrapper, before FSDP as torchtitan does."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for i in checkpointed_blocks(policy, len(model.layers)):
        if policy == "selective_op":
            wrapped = checkpoint_wrapper(model.layers[i], context_fn=selective_op_context,
                                         preserve_rng_state=False)
        else:
            wrapped = checkpoint_wrapper(model.layers[i], preserve_rng_state=False)
        model.layers[i] = wrapped
