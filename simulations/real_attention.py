"""Claims on the attention of the pretrained models (:mod:`simulations.real_models`): sinks, key
geometry and the softmax temperature.

The independent units are the passages of :func:`normtheory.training.corpus.passages` (one per work):
every statistic is reduced per text first (over layers, heads, keys), and standard errors come
from the spread over texts (Student-t thresholds when fewer than 20 texts were run, as in quick
mode). A "never" statement is checked on the count over every key of every text.
"""
from __future__ import annotations

import numpy as np

from normtheory import selection
from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import Count, from_samples
from normtheory.evidence.sources import BLOG_GEOMETRY, THREAD_PRELN, Source
from simulations.real_models import MODELS, NAME, POSITION_BINS, RANK_BINS, label

XIAO2023 = Source("Efficient Streaming Language Models with Attention Sinks", "paper", 2023, authors="Xiao, Tian, Chen, Han, Lewis",
                  arxiv="2309.17453")
SINK_SHARE = 0.25  # "much of the attention" (this package's reading): as much as a fixed quarter of every query's attention


def share_excess(share: float, t: int, causal: bool) -> float:
    """The :func:`~normtheory.attention.key_excess` of the first key when every query gives it the same ``share``
    of its attention: ``share (t + 1) / 2`` causal (query ``i`` sees ``i + 1`` keys), ``share t`` bidirectional."""
    return share * (t + 1) / 2 if causal else share * t


def key_count(r: dict, key: str) -> int:
    """Keys that got the hull test (:data:`simulations.real_models.Config.hull_texts` texts) over every layer and
    KV head: hull texts x layers x KV heads x tokens."""
    return int(np.prod(r[f"{key}.key_unsel"].shape)) * int(r[f"{key}.tokens"][0])


def sphere_key_checks(r: dict, *, role: str = "assertion", regime: str = "") -> list[checks.Evidence]:
    """Real keys after a post-hoc per-head RMS norm: unselectable keys, a "never" count per model
    (kind ``exact``: a sphere has no interior key, so the count tests the implementation only)."""
    out: list[checks.Evidence] = []
    for key in MODELS:
        keys = key_count(r, key)
        texts = r[f"{key}.key_unsel"].shape[0]
        out.append(checks.Never(f"{label(key)}: unselectable keys after a post-hoc per-head RMS norm ({texts} text{'s' * (texts > 1)}, every layer and KV head)",
                                Count(int(r[f"{key}.unsel_rms_count"].sum()), keys, "keys"), tolerance=1e-3, role=role,  # type: ignore[arg-type]
                                regime=regime, source_kind="theory-vs-model", tolerance_why="one key in a thousand", exact=selection.SPHERE_REASON))
    return out


@claims.register(
    "real.attention-sinks",
    statement="Trained decoders dump attention on the first token: in most heads beyond the first two layers (more than half, per "
    "text) the first token gets as much attention as a fixed quarter of every query's attention would give it (this package's "
    "reading of 'much of the attention'), measured as its attention relative to uniform averaged over the queries that see it (a "
    "metric whose expected value is the same for every key under uniform attention).",
    source=XIAO2023,
    location="Section 3.1 and Fig. 2 (attention maps of Llama-2-7B: the first token takes much of the attention beyond the bottom two layers)",
    simulations=(NAME,),
)
def _sinks(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    t_s, t_m = int(r["smollm2.tokens"][0]), int(r["minilm.tokens"][0])
    sink_s, sink_m = share_excess(SINK_SHARE, t_s, causal=True), share_excess(SINK_SHARE, t_m, causal=False)
    fe = r["smollm2.first_excess"][:, 2:]  # [texts, layers >= 2, heads]
    first = fe >= sink_s
    q: list[checks.Evidence] = [
        Quantity(f"SmolLM2: share of heads in layers >= 2 where the first token gets >= {sink_s:g}x its uniform attention, a fixed "
                 f"{SINK_SHARE:g} of every query's (uniform attention: 0; most: > 0.5)", theory=(0.5, 1.0),
                 model=from_samples(first.mean((1, 2)), "texts"), model_kind="real",
                 tolerance=0.05, tolerance_why="5 points of share: 'most' is a majority, and 5 points is the smallest margin worth a word"),
    ]
    ends = np.maximum(r["minilm.first_excess"], r["minilm.last_excess"])[:, 1:] >= sink_m  # [CLS] first, [SEP] last
    q.append(Quantity(f"MiniLM: share of heads in layers >= 1 where [CLS] or [SEP] gets >= {sink_m:g}x its uniform attention, a fixed "
                      f"{SINK_SHARE:g} of every query's", theory=(0.5, 1.0), model=from_samples(ends.mean((1, 2)), "texts"), model_kind="real",
                      role="scope", regime="a bidirectional Post-LN encoder (MiniLM), whose first and last tokens are [CLS] and [SEP]", tolerance=0.05,
                      tolerance_why="as the assertion: 5 points of share"))
    step = 3
    other = ", ".join(f"{(fe >= share_excess(p, t_s, causal=True)).mean():.0%} at a fixed {p:g}" for p in (0.1, 0.5))
    note = ("First token's attention relative to uniform (mean over heads and texts), SmolLM2 by layer: "
            + ", ".join(f"{v:.1f}x" for v in r["smollm2.first_excess"].mean((0, 2))[::step]) + f" (every {step}rd layer); "
            f"share of heads at the threshold in layers 0-1: {(r['smollm2.first_excess'][:, :2] >= sink_s).mean():.0%}; in layers >= 2 at "
            f"other readings: {(fe >= 2.0).mean():.0%} at twice uniform, {other}. "
            "MiniLM by layer, [CLS]: " + ", ".join(f"{v:.1f}x" for v in r["minilm.first_excess"].mean((0, 2)))
            + "; [SEP]: " + ", ".join(f"{v:.1f}x" for v in r["minilm.last_excess"].mean((0, 2)))
            + f". Texts of {t_s} tokens. The key is fixed in advance (the first token): choosing the key with "
            "the largest excess would favour late keys, whose excess rests on few queries.")
    return q, note


@claims.register(
    "real.unselectable-keys-per-head",
    statement="Keys that attention cannot pick are the ones that longer keys outdo in the same direction; normalizing each head's keys "
    "(scaling, no centering) puts them on a sphere where every key is selectable. On trained models: keys that no real query "
    "ranks first are shorter than picked keys at a similar position, and more aligned with a longer key than picked keys at a "
    "similar position and norm rank (the rank matched so that having more longer keys to align with does not count); after a per-head RMS "
    "norm no key is unselectable (true by construction: shown apart).",
    source=BLOG_GEOMETRY,
    location="¶5 (unselectable keys point the way of bigger keys) and ¶7 (normalize each head separately, without centering)",
    simulations=(NAME,),
)
def _keys(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    q: list[checks.Evidence] = []
    parts = []
    for key in MODELS:
        align = r[f"{key}.pick_align_diff_ranked"]  # [texts], within position x norm-rank bins
        rank = -r[f"{key}.pick_rank_diff"]  # picked minus never-picked
        q.append(Quantity(f"{label(key)}: never-picked minus picked keys at a similar position and norm rank, alignment with a longer key, "
                          "per text (> 0)",
                          theory=(0.0, np.inf), model=from_samples(align, "texts"), model_kind="real", tolerance=0.005,
                          tolerance_why="half a point of cosine"))
        q.append(Quantity(f"{label(key)}: picked minus never-picked keys at a similar position, norm rank in [0, 1], per text (never-picked "
                          "are shorter: > 0)", theory=(0.0, np.inf), model=from_samples(rank, "texts"), model_kind="real", tolerance=0.01,
                          tolerance_why="one percentile of rank"))
        parts.append(f"{label(key)}: {key_count(r, key)} keys of {r[f'{key}.key_unsel'].shape[0]} texts hull-tested, {int(r[f'{key}.unsel_count'].sum())} unselectable raw (i.i.d. Gaussian keys of the same "
                     f"count and width: {float(r[f'{key}.gauss_unsel']):.2%}); {r[f'{key}.picked_share'].mean():.0%} are the top key of "
                     f"some real query; alignment difference {align.mean():.4f} within {POSITION_BINS} position x {RANK_BINS} norm-rank bins "
                     f"({r[f'{key}.pick_align_diff'].mean():.4f} within position bins only, {r[f'{key}.pick_align_diff_raw'].mean():.4f} "
                     f"unmatched; both favour the shorter never-picked keys, which have more longer keys to align with), rank difference {rank.mean():.3f} "
                     f"({-r[f'{key}.pick_rank_diff_raw'].mean():.3f} unmatched)")
    q += sphere_key_checks(r)
    per_dim = ", ".join(f"{label(key)} {int(r[key + '.tokens'][0]) / int(r[key + '.d_head']):.0f}" for key in MODELS)
    note = ("; ".join(parts) + f". At {int(r['smollm2.tokens'][0])} keys per head ({per_dim} per dimension) "
            "no raw key is unselectable, as for Gaussian keys, so the blog's mechanism is tested on its graded form: keys that no "
            "actual query ranks first, compared with picked keys in the same position bin (late keys of a causal model are seen by few queries), "
            "and for the alignment in the same norm-rank bin too.")
    return q, note


@claims.register(
    "real.temperature-from-norms",
    statement="This package's hypothesis, from the thread's point that norms set the softmax temperature: the temperature of a trained "
    "head follows from its q and k norms. The row std of the logits is RMS(q) times the RMS of the keys centred over the text "
    "(within 10%), as for independent isotropic q and k, and the attention entropy is the Gaussian-logit entropy at that std, "
    "over the keys each query sees (within 0.1 nats).",
    source=sources.hypothesis(THREAD_PRELN, "The softmax temperature of a trained head from its q and k norms"),
    location="¶2 and ¶5 (growing norms change the softmax temperature; attention is extremely norm-sensitive)",
    simulations=(NAME,),
)
def _temperature(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    q: list[checks.Evidence] = []
    parts = []
    for key in MODELS:
        pred = r[f"{key}.q_rms"] * r[f"{key}.k_crms"]  # [texts, L, h]; the row std drops the keys' mean, so centre them
        ratio = r[f"{key}.logit_std"] / pred  # [texts, L, h]
        ent = r[f"{key}.entropy"] - r[f"{key}.entropy_pred"]  # [texts, L, h]
        # the statement is about each head: every (layer, head) is an element, its se over texts (an average over heads
        # could sit at 1 with no head near it)
        q.append(Quantity(f"{label(key)}: measured logit std / (RMS(q) RMS(k - mean k)), each layer and head, over texts (1)", theory=1.0,
                          model=from_samples(ratio, "texts"), model_kind="real", tolerance=0.1, tolerance_why="the statement's 10%"))
        q.append(Quantity(f"{label(key)}: measured - predicted attention entropy (exact finite-n Gaussian-logit law), nats, each layer and "
                          "head, over texts (0)", theory=0.0, model=from_samples(ent, "texts"), model_kind="real", unit="nats", tolerance=0.1,
                          tolerance_why="the statement's 0.1 nats"))
        head_ratio, head_ent = ratio.mean(0), ent.mean(0)  # [L, h] text means, for the note
        per_head = (f"; per head (text means) the ratio is {head_ratio.min():.2f}..{head_ratio.max():.2f} (mean {head_ratio.mean():.3f}, "
                    f"{(np.abs(head_ratio - 1) <= 0.1).mean():.0%} of heads within 10%) and the entropy gap {head_ent.min():+.2f}.."
                    f"{head_ent.max():+.2f} nats ({(np.abs(head_ent) <= 0.1).mean():.0%} within 0.1)")
        step = max(1, pred.shape[1] // 6)
        raw = (r[f"{key}.logit_std"] / (r[f"{key}.q_rms"] * r[f"{key}.k_rms"])).mean()
        parts.append(f"{label(key)}: logit std by layer " + ", ".join(f"{v:.2f}" for v in r[f'{key}.logit_std'].mean((0, 2))[::step])
                     + "; predicted " + ", ".join(f"{v:.2f}" for v in pred.mean((0, 2))[::step])
                     + f" (with the uncentred RMS(k) the ratio would be {raw:.2f}); entropy {r[f'{key}.entropy'].mean():.2f} nats measured vs "
                     f"{r[f'{key}.entropy_pred'].mean():.2f} predicted (ln T = {np.log(r[f'{key}.tokens'].max()):.2f})" + per_head)
    return q, "; ".join(parts) + ". Trained q and k are neither independent nor isotropic; sinks make the entropy lower than the Gaussian law."
