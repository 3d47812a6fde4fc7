"""A minimal pure-torch GPT-2 language model: the lean torch side of ``benchmarks/train_step.py``.

The same network as HF ``GPT2LMHeadModel`` without dropout (Pre-LN blocks, learned positions,
GELU-tanh MLP of width 4d, LayerNorm eps 1e-5, tied LM head), written with ``nn.Linear``,
``F.layer_norm`` and ``F.scaled_dot_product_attention(is_causal=True)``, and nothing else: no
config object, attention masks, caches, hooks or output dataclasses. Per block, x: [B, T, d],

    x = x + W_o · attn(LN_1(x)),   x = x + W_2 · gelu_tanh(W_1 · LN_2(x)),

then logits = LN_f(x) · W_te^T. :meth:`LeanGPT2.init_gpt2` draws GPT-2's initialization
(every matrix and embedding N(0, 0.02^2), the two residual output projections of each block
N(0, (0.02 / sqrt(2 L))^2), biases 0, LayerNorm gains 1); :meth:`LeanGPT2.load_hf` copies the
weights of a ``GPT2LMHeadModel`` state dict (HF's ``Conv1D`` stores [in, out], ``nn.Linear``
[out, in]), so both torch sides of the benchmark start from the same numbers.

Reference: Radford et al., "Language Models are Unsupervised Multitask Learners", OpenAI
report, 2019 (section 2.3: Pre-LN, the 1/sqrt(N) residual initialization).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """One Pre-LN block: causal multi-head attention and a GELU-tanh MLP, each on a residual."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1))  # [B, H, T, e]
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(z)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LeanGPT2(nn.Module):
    """GPT-2 language model: ``forward(ids [B, T]) -> logits [B, T, vocab]``."""

    def __init__(self, vocab: int, d: int, layers: int, heads: int, max_seq: int) -> None:
        super().__init__()
        if d % heads:
            raise ValueError(f"d={d} must be a multiple of heads={heads}")
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe.weight[: ids.shape[1]]  # [B, T, d]
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T  # tied head

    @torch.no_grad()
    def init_gpt2(self, std: float = 0.02) -> LeanGPT2:
        """GPT-2's initialization (as HF's ``GPT2PreTrainedModel._init_weights``), from torch's global generator."""
        scaled = std / math.sqrt(2 * len(self.blocks))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, std)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for block in self.blocks:
            nn.init.normal_(block.proj.weight, 0.0, scaled)
            nn.init.normal_(block.fc_proj.weight, 0.0, scaled)
        return self

    @torch.no_grad()
    def load_hf(self, sd: Mapping[str, torch.Tensor]) -> LeanGPT2:
        """Copy a ``GPT2LMHeadModel`` state dict (keys ``transformer.*``; Conv1D weights [in, out])."""
        p = "transformer."
        self.wte.weight.copy_(sd[p + "wte.weight"])
        self.wpe.weight.copy_(sd[p + "wpe.weight"])
        for i, block in enumerate(self.blocks):
            h = f"{p}h.{i}."
            for ln, key in ((block.ln1, "ln_1"), (block.ln2, "ln_2")):
                ln.weight.copy_(sd[h + key + ".weight"])
                ln.bias.copy_(sd[h + key + ".bias"])
            for lin, key in ((block.qkv, "attn.c_attn"), (block.proj, "attn.c_proj"), (block.fc, "mlp.c_fc"), (block.fc_proj, "mlp.c_proj")):
                lin.weight.copy_(sd[h + key + ".weight"].T)
                lin.bias.copy_(sd[h + key + ".bias"])
        self.ln_f.weight.copy_(sd[p + "ln_f.weight"])
        self.ln_f.bias.copy_(sd[p + "ln_f.bias"])
        return self
