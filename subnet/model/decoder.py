"""The decoder-only transformer, top to bottom.

Pre-norm blocks of RMSNorm -> causal self-attention with rotary position embeddings on q and k ->
RMSNorm -> SwiGLU MLP, a final RMSNorm, and an LM head tied to the token embedding. No biases, no
dropout: the model is trained from scratch on deduplicated text where dropout only slows learning,
and fewer parameter kinds keep pseudo-gradients and their compression simple.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from subnet.model.config import ModelConfig


def rope_tables(head_dim: int, context_len: int, theta: float) -> tuple[Tensor, Tensor]:
    """Cosine and sine tables of shape [context_len, head_dim] for rotary embeddings.

    Frequencies follow RoFormer: pair i rotates by position * theta^(-2i / head_dim). Each frequency
    is repeated for both halves because `apply_rope` rotates (x1, x2) halves, not interleaved pairs.
    """
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(context_len, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x [B, H, T, D] by position; cos and sin are [T, D]. Norms are preserved per position."""
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with RoPE, using PyTorch's fused SDPA kernels."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim
        # One fused projection: a single matmul for q, k and v is faster than three on every device.
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """x: [B, T, C] -> [B, T, C]."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        # [B, T, C] -> [B, H, T, D]
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class SwiGLU(nn.Module):
    """Gated MLP d_model -> d_ff -> d_model: down(silu(gate(x)) * up(x)) (Shazeer, 2020)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.up = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.down = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """x: [B, T, C] -> [B, T, C]."""
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """One pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self.attn = CausalSelfAttention(config)
        self.mlp_norm = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self.mlp = SwiGLU(config)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """x: [B, T, C] -> [B, T, C]."""
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """Decoder-only language model. Build it with `subnet.model.build_model` for seeded weights."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        # Non-persistent: the tables are derived from the config, so they stay out of state_dict,
        # checkpoints and pseudo-gradients.
        cos, sin = rope_tables(config.head_dim, config.context_len, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Next-token logits for idx [B, T] and, when targets [B, T] are given, mean cross-entropy.

        Logits are [B, T, vocab] in the autocast dtype (bf16 when `config.bf16`); the loss is
        always computed in fp32 because bf16 log-softmax over a wide vocabulary loses precision.
        """
        T = idx.shape[1]
        if T > self.config.context_len:
            raise ValueError(f"sequence length {T} exceeds context_len {self.config.context_len}")
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        # Only ever turn autocast ON here: an `enabled=False` context would switch off the
        # caller's autocast too, and the inner loop's bf16 setting would silently do nothing.
        bf16 = torch.autocast(idx.device.type, dtype=torch.bfloat16) if self.config.bf16 else None
        with bf16 or contextlib.nullcontext():
            x = self.tok_emb(idx)
            for block in self.blocks:
                x = block(x, cos, sin)
            # Tied head through F.linear rather than a second module sharing the weight, so
            # state_dict holds the matrix once (safetensors refuses shared tensors).
            logits = F.linear(self.norm(x), self.tok_emb.weight)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        return logits, loss
