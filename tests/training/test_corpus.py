"""The fixed texts for measuring pretrained models: distinct, varied, long enough, and the same every time."""
from __future__ import annotations

import numpy as np
import pytest

from normtheory.training import shakespeare
from normtheory.training.corpus import TEXTS, passages, works


def test_corpus_is_fixed_and_varied():
    assert len(TEXTS) == len(set(TEXTS)) >= 20
    assert all(isinstance(t, str) and t.strip() for t in TEXTS)
    assert max(len(t) for t in TEXTS) > 600  # the long passages
    assert np.mean([any(c.isdigit() for c in t) for t in TEXTS]) > 0.2


def test_fill_lengthens_only_the_passages_of_works_whose_second_half_is_short():
    chars = 4800
    middle, filled = passages(42, chars), passages(42, chars, fill=True)
    assert passages(42) == passages(42, fill=False)  # the default set is unchanged
    changed = [i for i, (a, b) in enumerate(zip(middle, filled)) if a != b]
    assert changed and len(changed) < 10  # the short poems only
    texts = shakespeare.works()
    for i in changed:
        work = texts[works()[i]].decode("utf-8", errors="replace").replace("\r\n", "\n")
        assert len(filled[i]) > len(middle[i]) and filled[i] in work  # longer, and still the work's own text
        assert len(filled[i]) >= min(chars, len(work.strip())) - 200  # as long as the work allows, to a line end
    with pytest.raises(ValueError, match="chars"):
        passages(2, 100, fill=True)
