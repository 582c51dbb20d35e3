"""A transformer's shape as shardscope's ``model.*`` keys describe it; no torch needed, so the
checks that only run the shardscope CLI can read it too."""

from __future__ import annotations

from dataclasses import dataclass


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
    norm: str = "rmsnorm"  # rmsnorm | layernorm | low_precision_layernorm | unfused_rmsnorm
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
