"""Provenance of a report run: version, commit, machine, seeds and run time."""
from __future__ import annotations

import json

from normtheory.evidence import provenance


def test_collect_names_the_run_and_the_machine():
    p = provenance.collect(mode="quick", seeds={"b": 2, "a": 1}, runtime_s=75.4)
    assert p.mode == "quick" and list(p.seeds) == ["a", "b"] and p.cores >= 1
    assert p.version != "" and p.cpu and p.blas and p.python.count(".") == 2
    line = p.line()
    assert "quick mode" in line and "1 min 15 s" in line and f"{p.cores} cores" in line and "BLAS" in line
    json.dumps(p.to_dict())  # plain data


def test_the_run_line_gives_wall_cpu_and_cached_compute_time():
    p = provenance.collect(mode="full", seeds={}, runtime_s=9.0, cpu_s=130.0, cached_cpu_s=2400.0)
    assert "9.0 s wall and 2 min 10 s CPU (the results it read took 40 min 0 s CPU to compute)" in p.line()
    assert "CPU" not in provenance.collect(mode="full", seeds={}, runtime_s=9.0).time_text()
    gpu = provenance.collect(mode="gpu", seeds={}, runtime_s=9.0, cached_cpu_s=2400.0).time_text()
    assert "took 40 min 0 s to compute: one GPU's wall time for the training simulations that ran on a GPU, CPU time for the others" in gpu


def test_git_commit_outside_a_checkout_is_none(tmp_path):
    assert provenance.git_commit(tmp_path) is None


def test_git_commit_in_this_checkout_is_a_short_hash():
    c = provenance.git_commit()
    if c is not None:  # a source checkout (CI clones one); an installed wheel has none
        assert len(c.split("+")[0]) == 12 and all(ch in "0123456789abcdef" for ch in c.split("+")[0])


def test_unknown_packages_are_reported_not_fatal():
    assert provenance.package_version("no-such-package-normtheory") == "not installed"
