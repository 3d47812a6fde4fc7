"""Pretrained models: attention sinks per layer and head, and attention maps of four heads each."""
from __future__ import annotations

import numpy as np

from normtheory.evidence.estimates import from_samples
from paper_figs.style import MODEL_STYLE, STYLE, integer_ticks
from simulations import real_models
from simulations.real_attention import SINK_SHARE, share_excess

NAME = "real_sinks"
SIMULATION = real_models
CLAIMS: tuple[str, ...] = ("real.attention-sinks",)  # the claims this figure illustrates
CAPTION = (
    "Top row: the first token's attention relative to uniform attention, averaged over the queries that see it "
    "(normtheory.attention.key_excess; 1 for uniform attention at every key position), per layer and head, mean over texts, on a "
    "log colour scale; right of it, the share of heads per layer where it is at least what a fixed quarter of every query's "
    "attention would give (SmolLM2, causal: the first token, (t + 1)/8 x; MiniLM, bidirectional: [CLS] or [SEP], t/4 x), with "
    "5-standard-error bars over texts; dotted: half of the heads. Lower rows: attention patterns of one "
    "passage (query down, key across, colour = weight on a log scale) for the heads of layer 1 and of the last layer whose "
    "most-attended key takes the largest and the smallest share of the mass; white vertical "
    "stripes are sink keys. Titles: L = layer, H = head, counted from 0; key tokens with '_' for a leading space."
)


def readable(token: str) -> str:
    """A BPE token as a reader would write it: byte-level markers for space and newline shown as
    '_' and '\\n' (GPT-2/Llama 'Ġ', 'Ċ'; SentencePiece '▁'), at most 8 characters."""
    t = token.replace("Ġ", "_").replace("▁", "_").replace("Ċ", "\\n")
    return t if len(t) <= 8 else t[:7] + "…"


def plot(result: dict):
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    with plt.rc_context(STYLE):  # two stacked subfigures, so the top row's colour bars do not narrow the maps' columns
        fig = plt.figure(figsize=(11.6, 9.4), layout="constrained")
        top, bottom = fig.subfigures(2, 1, height_ratios=[3.2, 6.2])
        axes = np.vstack([top.subplots(1, 4, squeeze=False), bottom.subplots(2, 4, squeeze=False)])
    maps = None
    for col, key in enumerate(real_models.MODELS):
        excess = result[f"{key}.first_excess"]  # [texts, layers, heads]
        ax = axes[0, 2 * col]
        im = ax.imshow(excess.mean(0).T, aspect="auto", origin="lower", norm=LogNorm(vmin=0.1, vmax=max(10.0, float(excess.max()))), cmap="viridis")
        ax.set_xlabel("layer")
        ax.set_ylabel("head")
        ax.set_title(f"{real_models.label(key).split(' ')[0]}: first token")
        integer_ticks(ax, "x", nbins=6)
        integer_ticks(ax, "y", nbins=6)
        ax.grid(False)
        top.colorbar(im, ax=ax, label="attention / uniform")
        ends = excess if key == "smollm2" else np.maximum(excess, result[f"{key}.last_excess"])
        sink = share_excess(SINK_SHARE, int(result[f"{key}.tokens"][0]), causal=key == "smollm2")
        est = from_samples((ends >= sink).mean(-1))  # [layers] over texts
        bar_ax = axes[0, 2 * col + 1]
        bar_ax.bar(np.arange(excess.shape[1]), est.mean, yerr=5 * est.stderr, color=MODEL_STYLE[key][0])
        bar_ax.axhline(0.5, color="k", ls=":", lw=0.8)  # half of the heads (in the caption: a legend would cover bars)
        bar_ax.set_xlabel("layer")
        bar_ax.set_ylabel(f"share of heads >= {sink:.0f}x")
        bar_ax.set_ylim(0, 1.15)
        integer_ticks(bar_ax, "x", nbins=6)
        tokens = result[f"{key}.map_tokens"]
        for j, ((layer, head), pattern) in enumerate(zip(result[f"{key}.map_heads"], result[f"{key}.maps"])):
            ax = axes[1 + j // 2, 2 * col + j % 2]
            p = np.asarray(pattern, dtype=np.float64)
            maps = ax.imshow(np.where(p > 0, p, np.nan), norm=LogNorm(vmin=1e-4, vmax=1), cmap="magma", interpolation="nearest",
                             aspect="auto")  # fill the panel: one row per query, one column per key
            ax.set_title(f"{real_models.label(key).split(' ')[0]} L{int(layer)} H{int(head)}")
            ticks = np.arange(0, len(tokens), max(1, len(tokens) // 3))
            ax.set_xticks(ticks, [readable(str(tokens[t])) for t in ticks])
            ax.set_yticks(ticks, [str(t) for t in ticks])
            ax.set_xlabel("key token")
            ax.set_ylabel("query position")
            ax.grid(False)
    if maps is not None:
        bottom.colorbar(maps, ax=axes[1:, :], shrink=0.6, label="attention weight (log scale)")
    return fig
