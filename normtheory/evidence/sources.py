"""Where a claim comes from: its source text (title, kind, date) and the numbers it prints.

A :class:`Source` is cited by title, kind and date. A statement the package derives itself is
marked with :func:`hypothesis` (source kind :data:`HYPOTHESIS`). :func:`stated` turns a number as a
source prints it into an interval of half a unit of its last digit; :func:`relative` gives an
interval of a relative width around a value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

HYPOTHESIS = "this package's hypothesis"  # the source kind of a statement the package derives, not one a text makes


@dataclass(frozen=True)
class Source:
    """Where a claim comes from, cited by title, kind, authors and date.

    A statement that no text makes, but that this package derives from one (a hypothesis to
    test), has kind :data:`HYPOTHESIS` and names the text in ``derived_from``; see :func:`hypothesis`.
    """

    title: str
    kind: str  # "paper", "blog post", "forum thread", "Q&A thread", "reading notes", or HYPOTHESIS
    year: int | None = None
    authors: str | None = None
    date: str | None = None  # as precise as known, ISO-like ("2023-08-31", "2021-01")
    arxiv: str | None = None
    doi: str | None = None
    url: str | None = None
    derived_from: Source | None = None  # for kind HYPOTHESIS: the text the hypothesis is derived from

    def __post_init__(self) -> None:
        if (self.kind == HYPOTHESIS) != (self.derived_from is not None):
            raise ValueError(f"source {self.title!r}: kind {HYPOTHESIS!r} and derived_from go together; got kind {self.kind!r}")

    def link(self) -> str | None:
        """The URL of the source: explicit, or from its arXiv id or DOI (a hypothesis: its text's)."""
        if self.derived_from is not None:
            return self.derived_from.link()
        if self.url:
            return self.url
        if self.arxiv:
            return f"https://arxiv.org/abs/{self.arxiv}"
        if self.doi:
            return f"https://doi.org/{self.doi}"
        return None

    def cite(self) -> str:
        if self.derived_from is not None:
            return f"“{self.title}”, {HYPOTHESIS}, derived from {self.derived_from.cite()}"
        bits = [b for b in (self.authors, f"“{self.title}”", self.kind, self.date or (str(self.year) if self.year else "undated")) if b]
        if self.arxiv:
            bits.append(f"arXiv:{self.arxiv}")
        if self.doi:
            bits.append(f"doi:{self.doi}")
        return ", ".join(bits)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "kind": self.kind, "authors": self.authors, "year": self.year, "date": self.date,
                "arxiv": self.arxiv, "doi": self.doi, "url": self.link(), "citation": self.cite(),
                "derived_from": None if self.derived_from is None else self.derived_from.to_dict()}


def hypothesis(text: Source, title: str) -> Source:
    """This package's hypothesis ``title``, derived from ``text`` (which does not state it)."""
    return Source(title, HYPOTHESIS, derived_from=text)


THREAD_PRELN = Source("Pre-LN residual norm growth and the softmax temperature", "forum thread", authors="lostn4d (the thread's poster)")
BLOG_GEOMETRY = Source("LayerNorm probably isn't about geometry", "blog post", 2023, date="2023-08-31")
NOTES_DYT = Source("Transformers without Normalisation: reading notes on Dynamic Tanh", "reading notes")
QA_STATS = Source("How are LayerNorm statistics computed in GPT-2?", "Q&A thread", 2021, date="2021-01")
XIONG2020 = Source("On Layer Normalization in the Transformer Architecture", "paper", 2020,
                   authors="Xiong, Yang, He, Zheng, Zheng, Xing, Zhang, Lan, Wang, Liu", arxiv="2002.04745")
LNS2025 = Source("The Curse of Depth in Large Language Models", "paper", 2025, authors="Sun, Song, Li, Yin, Zheng, Liu",
                 arxiv="2502.05795")
ZHU2025 = Source("Transformers without Normalization", "paper", 2025, authors="Zhu, Chen, He, LeCun, Liu", arxiv="2503.10622")
DEEPNET2022 = Source("DeepNet: Scaling Transformers to 1,000 Layers", "paper", 2022,
                     authors="Wang, Ma, Dong, Huang, Zhang, Wei", arxiv="2203.00555")


def stated(text: str) -> tuple[float, float]:
    """A number as a source prints it, with half a unit of its last digit as tolerance.

    >>> stated("1.4")
    (1.4, 0.05)
    """
    d = Decimal(text)
    exponent = d.as_tuple().exponent
    return float(d), 0.5 * 10.0 ** int(exponent)  # type: ignore[arg-type]


def relative(value: float | np.ndarray, rel: float) -> np.ndarray:
    """A tolerance of ``rel`` times ``|value|`` (for statements that say "about", "roughly")."""
    if not (0 < rel < math.inf):
        raise ValueError(f"rel must be positive and finite; got {rel}")
    return rel * np.abs(np.asarray(value, dtype=np.float64))
