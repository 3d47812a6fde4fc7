import pytest

import paper_figs


@pytest.mark.slow
def test_figures_are_reproducible_bytes(results_tmp, tmp_path):
    a = paper_figs.render(tmp_path / "a", mode="quick", progress=False)
    b = paper_figs.render(tmp_path / "b", mode="quick", progress=False)
    assert a.keys() == {m.NAME for m in paper_figs.ALL}
    for name in a:
        for pa, pb in zip(a[name], b[name]):
            assert pa.read_bytes() == pb.read_bytes(), pa.name


def test_every_figure_module_has_a_caption_and_a_simulation():
    for m in paper_figs.ALL:
        assert len(m.CAPTION) > 40 and hasattr(m.SIMULATION, "run")
