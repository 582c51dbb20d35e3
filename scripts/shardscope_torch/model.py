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

import torch
import torch.nn as nn
import torch.nn.functional as F

from .shapes import ModelShape


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


class _FusedRMSNormFunction(torch.autograd.Function):
    """What CUDA's aten::_fused_rms_norm keeps for backward (tools/autograd/derivatives.yaml:
    input, rstd, weight), computed on any device."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, rstd, weight)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        normalized = x.float() * rstd
        grad_weight = (grad.float() * normalized).sum(dim=tuple(range(grad.dim() - 1)))
        g = grad.float() * weight.float()
        grad_x = rstd * (g - normalized * (g * normalized).mean(-1, keepdim=True))
        return grad_x.to(x.dtype), grad_weight.to(weight.dtype), None


class CudaRMSNorm(nn.RMSNorm):
    """nn.RMSNorm as it runs on CUDA. There rms_norm dispatches to the fused kernel, whose
    autograd node saves the input and the fp32 rstd; on the CPU rms_norm decomposes into fp32
    ops that save an fp32 copy of the input and the fp32 normalized tensor (6 bytes per element
    more per norm in bf16). On the CPU this runs the fused node's computation with its saved
    tensors, so the CPU suites allocate what a GPU run does; on CUDA it is nn.RMSNorm."""

    def forward(self, x):
        if x.is_cuda:
            return super().forward(x)
        return _FusedRMSNormFunction.apply(x, self.weight, self.eps)


class UnfusedRMSNorm(nn.Module):
    """An RMSNorm written as PyTorch ops, as torchtitan's RMSNorm class was until
    pytorch/torchtitan#985 (and Hugging Face's LlamaRMSNorm is): fp32 ops on x.float(), whose
    autograd keeps the fp32 input and the normalised tensor, on every device alike."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) \
            * self.weight


def make_norm(shape: ModelShape, dim: int) -> nn.Module:
    """torchtitan's nn.RMSNorm(dim, eps=1e-5) for rmsnorm (CudaRMSNorm: its CUDA memory on any
    device), its earlier RMSNorm class for unfused_rmsnorm; nn.LayerNorm for layernorm."""
    if shape.norm == "rmsnorm":
        return CudaRMSNorm(dim, eps=1e-5)
    if shape.norm == "unfused_rmsnorm":
        return UnfusedRMSNorm(dim, eps=1e-5)
    if shape.norm == "low_precision_layernorm":
        return LowPrecisionLayerNorm(dim)
    return nn.LayerNorm(dim)


def rope_frequencies(head_dim: int, seq: int, device) -> torch.Tensor:
    """torchtitan's precompute_freqs_cis (theta 500000): one complex64 table the blocks share."""
    freqs = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2]
                                .float() / head_dim))
    angles = torch.outer(torch.arange(seq, device=device).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(xq, xk, freqs_cis):
    """torchtitan's apply_rotary_emb: q and k as complex numbers times the shared table."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * f).flatten(3)
    xk_out = torch.view_as_real(xk_ * f).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


# llm-foundry's Triton FlashAttention (model.attention: triton) is not one of SDPA's kernels:
# SDPA's flash kernel saves the same tensors, so memory checks hold; its time is FlashAttention-2's.
SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "efficient": "EFFICIENT_ATTENTION", "math": "MATH", "triton": "FLASH_ATTENTION"}


def sdpa_backends(attention: str, q, gqa: bool) -> list:
    """The SDPA kernels a scenario's model.attention allows. "flash" stands for SDPA's fused
    kernels that keep no s × s probabilities. CUDA's flash kernel has no fp32 version; there
    PyTorch's own dispatch takes the memory-efficient kernel (the same saved tensors: the output
    and the fp32 log-sum-exp), and for grouped-query heads, which that kernel does not take, the
    math path. So fp32 on a GPU allows those too; the memory oracle names math in such a row's
    keys (memory_oracle.on_cuda), so its simulation keeps the s × s probabilities as well."""
    from torch.nn.attention import SDPBackend

    if attention == "cudnn" and not q.is_cuda:
        attention = "flash"  # no cuDNN on the CPU: its fused kernel saves what cuDNN's does
    backends = [getattr(SDPBackend, SDPA_BACKENDS[attention])]
    if attention == "flash" and q.is_cuda and q.dtype == torch.float32:
        backends.append(SDPBackend.MATH if gqa else SDPBackend.EFFICIENT_ATTENTION)
    return backends


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
        # GPT-style blocks project q, k and v with one linear (GPT-2's c_attn, GPT-NeoX's
        # query_key_value), as shardscope assumes for them (projection_inputs); Llama-style
        # blocks with three.
        self.fused_qkv = shape.mlp != "swiglu"
        self.split = (h, kv, kv)
        if self.fused_qkv:
            self.wqkv = nn.Linear(h, h + 2 * kv, bias=bias)
        else:
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

    def attend(self, x, freqs_cis, cache=None):
        """torchtitan 0.2.2's Attention.forward (sdpa): GQA through enable_gqa, no repeat. With
        a KV cache (generation), this forward's keys and values join the cached ones and the
        queries attend to all of them (unmasked for a single decode position)."""
        from torch.nn.attention import SDPBackend, sdpa_kernel

        b, s, _ = x.shape
        if self.fused_qkv:
            q, k, v = self.wqkv(x).split(self.split, dim=-1)
        else:
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q, k, v = (t.view(b, s, -1, self.head_dim) for t in (q, k, v))
        if self.rotary:
            q, k = apply_rope(q, k, freqs_cis)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k, v = cache.update(k, v)
        with sdpa_kernel(sdpa_backends(self.attention, q, self.kv_heads != self.heads)):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] == k.shape[2],
                                               enable_gqa=self.kv_heads != self.heads)
        return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))

    def mlp(self, x):
        if self.swiglu:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

    def forward(self, x, freqs_cis=None, cache=None):
        x = x + self.attend(self.attention_norm(x), freqs_cis, cache)
        return x + self.mlp(self.ffn_norm(x))


class KVCache:
    """One block's keys and values: Hugging Face's DynamicCache (torch.cat per forward) or a
    StaticCache preallocated for `positions` (training.generation.kv_cache)."""

    def __init__(self, kind: str = "dynamic", positions: int = 0):
        self.kind, self.positions = kind, positions
        self.k = self.v = None
        self.length = 0

    def update(self, k, v):
        s = k.shape[2]
        if self.kind == "dynamic":
            self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
            self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        else:
            if self.k is None:
                shape = (k.shape[0], k.shape[1], self.positions, k.shape[3])
                self.k = k.new_zeros(shape)
                self.v = v.new_zeros(shape)
            self.k[:, :, self.length : self.length + s] = k
            self.v[:, :, self.length : self.length + s] = v
        self.length += s
        return self.k[:, :, : self.length], self.v[:, :, : self.length]


class Transformer(nn.Module):
    """Embedding, blocks, final norm and head (FSDP's root group holds the embedding, the final
    norm and the head, as shardscope's root does); ``compute_loss`` is the loss recipe."""

    def __init__(self, shape: ModelShape, loss: str = "upcast_fp32", attention: str = "flash",
                 loss_chunk_tokens: int = 0, loss_in_forward: bool = False):
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
        # FSDP1 shows the head's parameter as its sharded flat view outside its forward, so a
        # chunked loss, which applies the head itself, must run inside forward there.
        self.loss_in_forward = loss_in_forward

    @staticmethod
    def for_api(shape: ModelShape, api: str, loss: str = "upcast_fp32",
                attention: str = "flash") -> "Transformer":
        """The model as a training script on `api` (fsdp2 or fsdp1) writes it: the loss outside
        forward, except a chunked loss under FSDP1, which shows the head's weight as its shard
        outside forward (shardscope lowers it inside the root's forward there)."""
        return Transformer(shape, loss=loss, attention=attention,
                           loss_in_forward=api == "fsdp1" and loss == "chunked")

    def head_weight(self):
        return self.tok_embeddings.weight if self.output is None else self.output.weight

    def forward(self, tokens, labels=None, caches=None):
        """The logits, as torchtitan's model returns them; under a chunked loss the final
        hidden states (the loss applies the head per chunk, as Liger's does); with
        loss_in_forward, the loss of `labels`. With `caches` (generation, one KVCache per
        block), the tokens follow the cached positions and only the last position's logits are
        made (Hugging Face's logits_to_keep=1)."""
        x = self.tok_embeddings(tokens)
        start = caches[0].length if caches else 0
        end = start + tokens.shape[1]
        freqs_cis = None
        if self.shape.pos_emb == "learned":
            x = x + self.pos_embeddings(torch.arange(start, end, device=tokens.device))
        else:  # torchtitan keeps the table as a buffer; computed here, shared by the blocks
            freqs_cis = rope_frequencies(self.shape.hidden // self.shape.heads, end,
                                         tokens.device)[start:]
        for i, layer in enumerate(self.layers):
            x = layer(x, freqs_cis) if caches is None else layer(x, freqs_cis, cache=caches[i])
        if caches is not None:
            x = x[:, -1:]
        x = self.norm(x)
        # A chunked loss applies the head itself; generation always makes the logits.
        chunked = self.loss == "chunked" and caches is None
        out = x if chunked else F.linear(x, self.head_weight())
        return self.compute_loss(out, labels) if self.loss_in_forward else out

    def generate(self, input_ids, max_new_tokens: int, min_new_tokens: int | None = None,
                 cache_implementation: str | None = None):
        """Greedy generation as Hugging Face's generate runs it, with its call signature: a
        prefill of the prompts, then one forward per further new token (every sequence runs all
        max_new_tokens: no end-of-sequence token), each through the model's forward, so FSDP's
        hooks run per forward; register_fsdp_forward_method(model, "generate") wraps the whole
        call in the root's hooks. cache_implementation "static" preallocates the KV cache
        (StaticCache); otherwise it grows per forward (DynamicCache)."""
        positions = input_ids.shape[1] + max_new_tokens
        kind = "preallocated" if cache_implementation == "static" else "dynamic"
        caches = [KVCache(kind, positions) for _ in self.layers]
        tokens, out = input_ids, []
        for _ in range(max_new_tokens):
            logits = self(tokens, caches=caches)
            tokens = logits[:, -1, :].float().argmax(-1, keepdim=True)
            out.append(tokens)
        return torch.cat(out, dim=1)

    def compute_loss(self, out, labels):
        """The loss of forward's output, outside forward as torchtitan's train step runs it: the
        caller holds the logits (`pred`) until the loss is made, then deletes them."""
        return compute_loss(self.loss, out.flatten(0, 1), self.head_weight(), labels.flatten(),
                            self.loss_chunk_tokens)


# ---------------------------------------------------------------------------------------------
# Loss recipes (docs/semantics.md, "Loss recipes")


class FusedCrossEntropy(torch.autograd.Function):
    """An in-place fused cross-entropy in plain PyTorch, with the memory behaviour of flash-attn's
    CrossEntropyLoss(inplace_backward=True): no fp32 copy of the logits; the logits and the
    per-token log-sum-exp are saved; backward writes the gradient into the logits. Rows go in
    blocks of 32 rows so the fp32 temporaries are a block's (under 1 % of a peak here)."""

    BLOCK = 32

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
    """The loss recipe: x is the flattened logits (upcast_fp32, fused) or final hidden states
    (chunked, which applies the head `weight` per chunk)."""
    if loss == "upcast_fp32":  # torchtitan's cross_entropy_loss
        return F.cross_entropy(x.float(), labels)
    if loss == "fused":
        return FusedCrossEntropy.apply(x, labels)
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
