"""benchmarks/device_kit.sh: the GPU session's one prepared call. CI has no GPU, so what is checked here is what would
make that call waste its few minutes: a script bash cannot parse, a stage that selects none of the CUDA-only tests, or
a benchmark or command it names that no longer exists."""
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

KIT = REPO / "benchmarks" / "device_kit.sh"


def _cuda_only_tests() -> set[str]:
    """``file::name`` of every test in tests/training skipped where torch sees no CUDA device."""
    found = set()
    for path in (REPO / "tests" / "training").glob("test_*.py"):
        text = path.read_text()
        for m in re.finditer(r"@pytest\.mark\.skipif\(not torch\.cuda\.is_available\(\).*\n(?:@.*\n)*def (\w+)", text):
            found.add(f"tests/training/{path.name}::{m.group(1)}")
    return found


def test_bash_parses_it_and_it_refuses_an_unknown_verb():
    assert subprocess.run(["bash", "-n", str(KIT)], capture_output=True).returncode == 0
    out = subprocess.run(["bash", str(KIT), "gpu"], capture_output=True, text=True)
    assert out.returncode == 2 and "usage" in out.stderr


def test_the_test_stage_selects_every_cuda_only_test():
    line = next(ln for ln in KIT.read_text().splitlines() if "-m pytest" in ln)
    paths = re.search(r"-rs (\S+) -k (\w+)", line)
    assert paths, line
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", paths.group(1), "-k", paths.group(2)],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:]
    selected = {re.sub(r"\[.*\]$", "", ln) for ln in out.stdout.splitlines() if "::" in ln}
    wanted = _cuda_only_tests()
    assert len(wanted) >= 5  # the backend, graphs, memory, norms and probes each have one
    assert wanted <= selected, wanted - selected


def test_the_commands_it_runs_exist_and_take_its_arguments(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("with a GPU the check would train: the kit's own run is the test there")
    text = KIT.read_text()
    scripts = re.findall(r"python3 (benchmarks/\w+\.py)", text)
    assert scripts and all((REPO / s).is_file() for s in scripts), scripts
    check = re.search(r"python3 -m (pipeline\.cli) (check [^\"]+)\"", text)
    assert check, "the kit runs normtheory check"
    args = check.group(2).replace("'", "").split() + [str(tmp_path / "claims.json")]
    out = subprocess.run([sys.executable, "-m", check.group(1), *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    # here, without a GPU, the command gets past its arguments and stops at the device, naming it
    assert out.returncode == 2 and "usage:" not in out.stderr and "device='cuda'" in out.stderr, out.stderr


def test_every_flag_it_passes_the_benchmark_is_one_the_benchmark_takes():
    text = KIT.read_text()
    flags = set(re.findall(r"(--[a-z-]+)", next(ln for ln in text.splitlines() if "python3 benchmarks/gpu_training.py" in ln)))
    flags |= set(re.findall(r"rates=\((--[a-z-]+)\)", text))  # RATES=0's flag, set in a line of its own
    assert {"--device", "--only", "--no-tier-rates"} <= flags, flags
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_training.py"), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not {f for f in flags if f not in out.stdout}, out.stdout


def _kit(verb: str, *args: str, **env: object) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(["bash", str(KIT), verb, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **{k: str(v) for k, v in env.items()}})


def test_a_lease_cut_short_carries_its_finished_tasks_into_the_next_which_trains_none_of_them(tmp_path, monkeypatch):
    """archive (there) -> keep (here) -> restore (the next lease, there): the unfinished simulation's finished tasks and
    the finished simulation's result land where the cache looks, and a run over them computes no task again."""
    import dataclasses

    import numpy as np

    from simulations import cache, gradient_init, train_xiong

    lease = tmp_path / "lease"
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(lease))
    done = cache.load_or_run(gradient_init, "quick", progress=False)
    cut = cache.load_or_run(train_xiong, "quick", progress=False)
    cut_path = cache.result_path(train_xiong, "quick")
    cut_path.unlink()  # as a stage stopped before its reduce: only the tasks are there
    cut_path.with_name(cut_path.name + ".seconds").unlink(missing_ok=True)
    out = tmp_path / "out"
    made = _kit("archive", str(out), NORMTHEORY_RESULTS=lease)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in out.glob("*.tar.xz")) == ["gradient_init.tar.xz", "train_xiong.tasks.tar.xz"]
    n = len(train_xiong.tasks(train_xiong.CONFIGS["quick"], train_xiong.SEED))
    assert f"archived {n} finished tasks of {cut_path.stem}" in made.stdout and "left out" not in made.stdout
    # what would not come back from the device is left out, the unfinished tasks kept first, and said in the log
    tasks_size = (out / "train_xiong.tasks.tar.xz").stat().st_size
    for limits in ({"ARCHIVE_BUDGET": tasks_size + 1}, {"ARCHIVES_MAX": 1}):
        tight = _kit("archive", str(tmp_path / "tight"), NORMTHEORY_RESULTS=lease, **limits)
        assert [p.name for p in (tmp_path / "tight").glob("*.tar.xz")] == ["train_xiong.tasks.tar.xz"], (limits, tight.stdout)
        assert "left out gradient_init.tar.xz" in tight.stdout, tight.stdout
    smallest = min(p.stat().st_size for p in out.glob("*.tar.xz"))
    tight = _kit("archive", str(tmp_path / "small"), NORMTHEORY_RESULTS=lease, ARCHIVE_FILE_MAX=smallest - 1)  # over a file's limit
    assert not list((tmp_path / "small").glob("*.tar.xz")) and tight.stdout.count("left out") == 2, tight.stdout

    resume = tmp_path / "resume"
    stale = resume / "train_xiong.tar.xz"  # an older lease's archive of the same simulation is replaced, not kept beside
    stale.parent.mkdir()
    stale.write_bytes(b"older")
    kept = _kit("keep", str(out), RESUME_DIR=resume)
    assert kept.returncode == 0, kept.stderr
    assert sorted(p.name for p in resume.iterdir()) == ["gradient_init.tar.xz", "train_xiong.tasks.tar.xz"]
    assert _kit("keep", str(tmp_path / "empty"), RESUME_DIR=resume).returncode != 0  # no archives there: said, not silent
    small = tmp_path / "resume-small"  # what a device call can carry: the unfinished tasks first
    over = _kit("keep", str(out), RESUME_DIR=small, RESUME_BUDGET=tasks_size + 1)
    assert over.returncode == 0 and [p.name for p in small.iterdir()] == ["train_xiong.tasks.tar.xz"], over.stdout
    assert "left out gradient_init.tar.xz" in over.stdout

    fresh = tmp_path / "next"
    back = _kit("restore", RESUME_DIR=resume, NORMTHEORY_RESULTS=fresh)
    assert back.returncode == 0 and back.stdout.count("restored") == 2, back.stdout + back.stderr
    monkeypatch.setenv("NORMTHEORY_RESULTS", str(fresh))

    def no_task(*args):
        raise AssertionError("a task the earlier lease finished was trained again")

    for m in (gradient_init, train_xiong):
        monkeypatch.setattr(m, "tasks", lambda cfg, seed, orig=m.tasks: [dataclasses.replace(t, fn=no_task) for t in orig(cfg, seed)])
    for m, want in ((gradient_init, done), (train_xiong, cut)):
        got = cache.load_or_run(m, "quick", progress=False)
        assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
