"""The built-in GPT: a small pre-LayerNorm decoder split into pipeline stages, on synthetic tokens.

Stage 0 holds the token and position embeddings, the last stage the final LayerNorm and the
output head, and the transformer blocks are split evenly over the stages, or by any contiguous
split (``ModelSpec.build_layers``, e.g. the partitioner's uneven one). Every layer is
initialised from its own seed (derived from ``config.seed`` and the layer's global index), so the
model is the same however it is split, and parameter names use global block indices
(``blocks.5.attn.qkv.weight``): a checkpoint does not depend on the pipeline split.

LayerNorm always runs in fp32, also under bf16 autocast on a GPU; the loss is computed in fp32.
With ``activation_checkpointing`` every block runs under ``torch.utils.checkpoint`` (non-reentrant):
its activations are recomputed in the backward instead of being kept.

The synthetic data is learnable: every sequence follows a fixed random successor table
(``next = table[current]``) from a random first token, so the loss falls from ln(vocab) towards 0
within a few frames.
"""

from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from hyperframe_runtime.config import TrainConfig
from hyperframe_runtime.models.spec import ModelSpec

__all__ = ["GPTStage", "gpt_loss", "gpt_model_spec", "layer_range", "synthetic_batch"]

_INIT_STD = 0.02


def derive_seed(seed: int, *tags: object) -> int:
    """A 63-bit seed from ``seed`` and tags, stable across processes and Python versions."""
    text = ":".join(str(t) for t in (seed, *tags))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


class FP32LayerNorm(nn.LayerNorm):
    """LayerNorm computed in fp32 whatever the autocast dtype (bf16 LayerNorm loses too much)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            return F.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps)


class Block(nn.Module):
    """Pre-LN transformer block: causal self-attention and a 4x GELU MLP, each residual."""

    def __init__(self, d_model: int, n_heads: int, generator: torch.Generator) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = FP32LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = FP32LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.out = nn.Linear(4 * d_model, d_model)
        for linear in (self.qkv, self.proj, self.fc, self.out):
            nn.init.normal_(linear.weight, 0.0, _INIT_STD, generator=generator)
            nn.init.zeros_(linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=-1)
        heads = (batch, seq, self.n_heads, width // self.n_heads)
        q, k, v = (t.reshape(heads).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        out: torch.Tensor = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return out


def layer_range(n_layers: int, stage: int, num_stages: int) -> range:
    """Global indices of the blocks stage ``stage`` holds (an even split)."""
    if n_layers % num_stages:
        raise ValueError(f"n_layers: {n_layers} blocks cannot be split evenly over {num_stages} stages")
    per_stage = n_layers // num_stages
    return range(stage * per_stage, (stage + 1) * per_stage)


class GPTStage(nn.Module):
    """One pipeline stage of the GPT. Input: token ids (stage 0) or hidden states; output: hidden
    states, or logits on the last stage."""

    def __init__(self, config: TrainConfig, stage: int, num_stages: int, layers: range | None = None) -> None:
        """``layers``: the global block indices this stage holds (any contiguous range, also an
        uneven split from the partitioner); None is the even split of :func:`layer_range`."""
        super().__init__()
        self.is_first = stage == 0
        self.is_last = stage == num_stages - 1
        self.checkpoint_blocks = config.activation_checkpointing
        d = config.d_model
        if self.is_first:
            gen = torch.Generator().manual_seed(derive_seed(config.seed, "embed"))
            self.tok_emb = nn.Embedding(config.vocab_size, d)
            self.pos_emb = nn.Embedding(config.seq_len, d)
            nn.init.normal_(self.tok_emb.weight, 0.0, _INIT_STD, generator=gen)
            nn.init.normal_(self.pos_emb.weight, 0.0, _INIT_STD, generator=gen)
        # Global block indices as keys: names (and checkpoints) do not depend on the split.
        self.blocks = nn.ModuleDict(
            {
                str(i): Block(d, config.n_heads, torch.Generator().manual_seed(derive_seed(config.seed, i)))
                for i in (layer_range(config.n_layers, stage, num_stages) if layers is None else layers)
            }
        )
        if self.is_last:
            gen = torch.Generator().manual_seed(derive_seed(config.seed, "head"))
            self.ln_f = FP32LayerNorm(d)
            self.head = nn.Linear(d, config.vocab_size, bias=False)
            nn.init.normal_(self.head.weight, 0.0, _INIT_STD / math.sqrt(2 * config.n_layers), generator=gen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.is_first:
            positions = torch.arange(x.shape[1], device=x.device)
            x = self.tok_emb(x) + self.pos_emb(positions)
        recompute = self.checkpoint_blocks and torch.is_grad_enabled()
        for block in self.blocks.values():
            x = checkpoint(block, x, use_reentrant=False) if recompute else block(x)
        if self.is_last:
            x = self.head(self.ln_f(x))
        return x


def gpt_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the micro-batch, in fp32."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def synthetic_batch(
    config: TrainConfig, frame: int, replica: int, num_samples: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``num_samples`` sequences of ``seq_len`` tokens following the seed's successor table."""
    table = torch.randperm(
        config.vocab_size, generator=torch.Generator().manual_seed(derive_seed(config.seed, "table"))
    )
    gen = torch.Generator().manual_seed(derive_seed(config.seed, "data", frame, replica))
    tokens = torch.empty(num_samples, config.seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, config.vocab_size, (num_samples,), generator=gen)
    for t in range(config.seq_len):
        tokens[:, t + 1] = table[tokens[:, t]]
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def gpt_model_spec(config: TrainConfig) -> ModelSpec:
    """The built-in GPT as a :class:`ModelSpec`, sized by ``config``'s model fields."""
    return ModelSpec(
        build_stage=lambda stage, num_stages: GPTStage(config, stage, num_stages),
        num_layers=config.n_layers,
        build_layers=lambda stage, num_stages, layers: GPTStage(config, stage, num_stages, layers),
        loss_fn=gpt_loss,
        make_batch=lambda frame, replica, n: synthetic_batch(config, frame, replica, n),
        tokens_per_sample=config.seq_len,
        vocab_size=config.vocab_size,
    )
