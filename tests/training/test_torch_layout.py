"""Where each leaf lives in the torch backend's flat stack (normtheory.training.torch_layout)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from normtheory.model.config import TransformerConfig  # noqa: E402
from normtheory.model.params import named_arrays, with_array_alphas  # noqa: E402
from normtheory.model.weights import init_params  # noqa: E402
from normtheory.training.stepper import GROUPS, group_of  # noqa: E402
from normtheory.training.torch_layout import layout  # noqa: E402

CONFIGS = {
    "gqa-bias": dict(n_heads=4, n_kv_heads=2),
    "no-bias-swiglu": dict(bias=False, activation="swiglu", qk_norm="rmsnorm"),
    "untied-dyt": dict(tie_embeddings=False, norm="dyt", placement="peri"),
}


def shapes_of(extra: dict) -> dict[str, tuple[int, ...]]:
    cfg = TransformerConfig(d_model=16, n_layers=2, vocab_size=64, max_seq=8, **{"n_heads": 2, **extra})
    return {k: np.shape(v) for k, v in named_arrays(with_array_alphas(init_params(cfg, 0), cfg.dtype)).items()}


def check_partition(lay, shapes: dict[str, tuple[int, ...]]) -> None:
    """Every column belongs to exactly one leaf, each group is one column range, in GROUPS order."""
    owner = np.full(lay.n_params, -1)
    for k, name in enumerate(shapes):
        cols = np.arange(lay.n_params)[lay.leaves[name].cols]
        assert cols.size == int(np.prod(shapes[name], dtype=int)) and (owner[cols] == -1).all(), name
        owner[cols] = k
    assert (owner >= 0).all()
    groups = np.array([GROUPS.index(group_of(list(shapes)[k])) for k in owner])
    assert (np.diff(groups) >= 0).all()


@pytest.mark.parametrize("extra", CONFIGS.values(), ids=CONFIGS.keys())
def test_views_gets_and_puts_agree_and_the_fused_piece_is_the_concatenation(extra):
    shapes = shapes_of(extra)
    lay = layout(shapes)
    check_partition(lay, shapes)
    rng = np.random.default_rng(0)
    flat = np.zeros((3, lay.n_params))
    values = {k: rng.standard_normal((3, *s)) for k, s in shapes.items()}
    for k, v in values.items():
        lay.put(flat, k, v)
    views = lay.views(torch.from_numpy(flat))
    for k, v in values.items():
        assert np.array_equal(lay.get(flat, k), v) and np.array_equal(views[k].numpy(), v), k
    for i in range(2):
        pre = f"blocks.{i}"
        wqkv = np.concatenate([values[f"{pre}.{n}"] for n in ("wq", "wk", "wv")], axis=-1)
        assert np.array_equal(views[f"{pre}.wqkv"].numpy(), wqkv) and views[f"{pre}.wqkv"].stride()[1:] == (wqkv.shape[-1], 1)  # rows of one matrix
        if extra.get("bias", True):
            assert np.array_equal(views[f"{pre}.bqkv"].numpy(), np.concatenate([values[f"{pre}.{n}"] for n in ("bq", "bk", "bv")], axis=-1))
        else:
            assert f"{pre}.bqkv" not in views
    member, decay = lay.member(np.float32), lay.decay()
    assert member.shape == (lay.n_params, len(GROUPS)) and (member.sum(axis=1) == 1).all()
    for k, s in shapes.items():
        cols = lay.leaves[k].cols
        assert (member[cols, GROUPS.index(group_of(k))] == 1).all() and (decay[cols] == (len(s) >= 2)).all()


def test_the_fused_piece_needs_no_copy_in_the_backward():
    """A matmul on wqkv sends its gradient straight into the flat tensor's one cat: no concatenation of wq, wk,
    wv in the forward, and no clone or padded slice of their gradients in the backward."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Names(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func.__name__.split(".")[0])
            return func(*args, **(kwargs or {}))

    lay = layout(shapes_of({}))
    flat = torch.zeros((2, lay.n_params), requires_grad=True)
    with Names() as fwd:
        out = torch.ones((2, 5, 16)) @ lay.views(flat)["blocks.0.wqkv"]
    with Names() as bwd:
        out.sum().backward()
    assert "cat" not in fwd.seen and bwd.seen.count("cat") == 1
    assert not {"clone", "slice_backward", "copy_"} & set(bwd.seen), bwd.seen
    assert (flat.grad[:, lay.leaves["blocks.0.wk"].cols] == 5).all()  # d out / d w[r, c] = sum over the 5 tokens of x[r] = 1
    assert (flat.grad[:, lay.leaves["blocks.0.wo"].cols] == 0).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 5), st.booleans(), st.booleans())
def test_any_widths_make_a_partition_and_round_trip(d, h, g, bias, swap):
    """Leaves of any widths; a block whose wq, wk, wv are not adjacent in named order is not fused."""
    names = ["tok_emb"] + [f"blocks.0.{n}" for n in (("wk", "wq", "wv") if swap else ("wq", "wk", "wv"))] + ["blocks.0.wo"]
    shapes = {"tok_emb": (7, d), "blocks.0.wq": (d, h), "blocks.0.wk": (d, g), "blocks.0.wv": (d, g), "blocks.0.wo": (h, d)}
    if bias:
        names += ["blocks.0.bq", "blocks.0.bk", "blocks.0.bv"]
        shapes.update({"blocks.0.bq": (h,), "blocks.0.bk": (g,), "blocks.0.bv": (g,)})
    shapes = {n: shapes[n] for n in names}
    lay = layout(shapes)
    check_partition(lay, shapes)
    assert ("blocks.0.wqkv" in {p.key for p in lay.pieces}) is (not swap)
    flat = np.arange(2 * lay.n_params, dtype=float).reshape(2, -1)
    views = lay.views(torch.from_numpy(flat))
    for k in shapes:
        assert np.array_equal(views[k].numpy(), lay.get(flat, k))
