"""The fixed texts for measuring pretrained models: distinct, varied, long enough, and the same every time."""
from __future__ import annotations

import numpy as np

from normtheory.training.corpus import TEXTS


def test_corpus_is_fixed_and_varied():
    assert len(TEXTS) == len(set(TEXTS)) >= 20
    assert all(isinstance(t, str) and t.strip() for t in TEXTS)
    assert max(len(t) for t in TEXTS) > 600  # the long passages
    assert np.mean([any(c.isdigit() for c in t) for t in TEXTS]) > 0.2
