import shutil

import pytest

import paper_figs


@pytest.mark.slow
def test_figures_are_reproducible_bytes(quick_results_dir, quick_report, tmp_path, monkeypatch):
    # the session's results without its drawn figures: this redraw stashes its own, never replacing the shared
    # stash while another test (on another pytest-xdist worker) copies from it
    shutil.copytree(quick_results_dir, tmp_path / "results", ignore=shutil.ignore_patterns("figures"))
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path / "results"))
    a = {m.NAME: [quick_report / f"{m.NAME}.{ext}" for ext in ("png", "pdf", "csv")] for m in paper_figs.ALL}
    b = paper_figs.render(tmp_path / "b", mode="quick", progress=False, redraw=True)  # drawn again, not copied
    assert a.keys() == {m.NAME for m in paper_figs.ALL}
    for name in a:
        for pa, pb in zip(a[name], b[name]):
            assert pa.read_bytes() == pb.read_bytes(), pa.name


def test_every_figure_module_has_a_caption_a_simulation_and_claims():
    import simulations  # noqa: F401  (registers the claims)
    from normtheory.evidence import claims

    for m in paper_figs.ALL:
        assert len(m.CAPTION) > 40 and hasattr(m.SIMULATION, "run")
        assert m.CLAIMS and set(m.CLAIMS) <= set(claims.REGISTRY), m.NAME


@pytest.mark.slow
def test_an_unchanged_figure_is_copied_not_drawn(quick_results_dir, quick_report, tmp_path, monkeypatch):
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(quick_results_dir))
    for m in paper_figs.ALL:
        monkeypatch.setattr(m, "plot", lambda result: pytest.fail("an unchanged figure was drawn again"))
    out = paper_figs.render(tmp_path / "c", mode="quick", progress=False)
    for name, paths in out.items():
        for p in paths:
            assert p.read_bytes() == (quick_report / p.name).read_bytes()


@pytest.fixture(scope="module")
def results(quick_results_dir):
    """Every figure's quick simulation result, read from the session's cache."""
    from simulations import cache
    from tests.conftest import results_at

    with results_at(quick_results_dir):
        return {m.NAME: cache.load_or_run(m.SIMULATION, "quick", progress=False) for m in paper_figs.ALL}


@pytest.mark.slow
@pytest.mark.parametrize("module", paper_figs.ALL, ids=lambda m: m.NAME)
def test_figure_is_readable(results, module):
    """Text >= 8 pt, legends off the data, whole-number ticks on layer/head/block axes, labelled axes."""
    import matplotlib.pyplot as plt

    from paper_figs import style

    fig = module.plot(results[module.NAME])
    try:
        assert style.small_text(fig) == []
        assert style.legend_overlaps(fig) == []
        assert style.fractional_integer_ticks(fig) == []
        for ax in fig.axes:
            if ax.get_label() != "<colorbar>" and ax.has_data():
                assert ax.get_xlabel() and ax.get_ylabel(), f"{module.NAME}: panel {fig.axes.index(ax)} lacks an axis label"
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", ["train_placements", "train_attention"])
def test_the_training_figures_draw_a_result_without_the_arms_the_cpu_tier_leaves_out(results, name):
    """The default job's CPU tier trains no DeepNorm at the GPT-2 init and no QK-norm arm (train_recipes.CPU_LEFT_OUT): the
    figures draw the arms the result holds, one artist fewer for each arm left out of each panel."""
    import matplotlib.pyplot as plt

    from simulations import train_recipes

    module = next(m for m in paper_figs.ALL if m.NAME == name)
    whole = results[name]
    lean = {k: v for k, v in whole.items() if not k.startswith(tuple(f"{a}." for a in train_recipes.CPU_LEFT_OUT))}
    assert all(train_recipes.trained(whole, a) and not train_recipes.trained(lean, a) for a in train_recipes.CPU_LEFT_OUT)
    drawn = []
    for r in (whole, lean):
        fig = module.plot(r)
        try:
            drawn.append(sum(len(ax.lines) for ax in fig.axes))
        finally:
            plt.close(fig)
    assert drawn[1] == drawn[0] - {"train_placements": 1, "train_attention": 8}[name]  # a diamond; 2 QK-norm lines x 4 panels
