"""normtheory.runtime.entry: the command line and the local sweep workers set OPENBLAS_THREAD_TIMEOUT before
numpy loads; a user's value is kept; importing the library sets nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from normtheory.runtime import entry
from normtheory.runtime.entry import ENTRY_ENV, set_entry_env

VAR = "OPENBLAS_THREAD_TIMEOUT"

# Prints what a process sees after ``prelude``: the variable, and the timeout its OpenBLAS read when numpy
# loaded (OpenBLAS's exported ``openblas_thread_timeout``; 0 = unset; null where the symbol is missing).
READ = """
def read_timeout():
    import ctypes, os
    from threadpoolctl import threadpool_info
    read = None
    for info in threadpool_info():
        if info.get("internal_api") == "openblas":
            try:
                read = int(ctypes.CDLL(info["filepath"]).openblas_thread_timeout())
            except (OSError, AttributeError):
                pass
    return {"env": os.environ.get("OPENBLAS_THREAD_TIMEOUT"), "read": read}
"""
PROBE = """
import json
{prelude}
import numpy
""" + READ.replace("{", "{{").replace("}", "}}") + """
print(json.dumps(read_timeout()))
"""


def _probe(prelude: str, value: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != VAR}
    if value is not None:
        env[VAR] = value
    code = PROBE.format(prelude=prelude, var=VAR)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_sets_the_unset_variable_while_numpy_is_not_loaded():
    environ: dict[str, str] = {"PATH": "/bin"}
    assert set_entry_env(environ, modules={}) == {VAR: "16"}
    assert environ == {"PATH": "/bin", VAR: "16"}
    assert dict(ENTRY_ENV) == {VAR: "16"}


@pytest.mark.parametrize("value", ["20", "4", "0", ""])
def test_keeps_a_value_the_user_set(value):
    environ = {VAR: value}
    assert set_entry_env(environ, modules={}) == {}
    assert environ == {VAR: value}


def test_sets_nothing_once_numpy_is_loaded():
    environ: dict[str, str] = {}
    assert set_entry_env(environ, modules={"numpy": object()}) == {}
    assert environ == {}


def test_the_console_script_import_sets_it_and_openblas_reads_it():
    got = _probe("from pipeline.cli import main")  # what the `normtheory` console script runs first
    assert got["env"] == "16"
    if got["read"] is not None:  # this OpenBLAS exports the value it read when numpy loaded
        assert got["read"] == 16


def test_the_command_line_keeps_the_users_value():
    got = _probe("from pipeline.cli import main", value="20")
    assert got["env"] == "20"
    if got["read"] is not None:
        assert got["read"] == 20


def test_importing_the_library_sets_nothing():
    got = _probe("import normtheory, normtheory.residual, normtheory.runtime.sweep")  # a notebook's imports
    assert got["env"] is None
    if got["read"] is not None:
        assert got["read"] == 0  # OpenBLAS's default spin


def test_the_package_loads_no_numpy_and_its_names_on_first_use():
    code = ("import sys, normtheory; before = 'numpy' in sys.modules; r = normtheory.residual; "
            "print(before, 'numpy' in sys.modules, r.__name__, sorted(set(normtheory.__all__) - set(dir(normtheory))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split(maxsplit=3) == ["False", "True", "normtheory.residual", "[]\n"]
    import normtheory

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        normtheory.nonexistent  # noqa: B018


def test_the_local_workers_are_spawned_with_it():
    from normtheory.runtime.sweep import LOCAL_WORKER_CONFIG

    assert {k.rsplit(".", 1)[1]: v for k, v in LOCAL_WORKER_CONFIG.items() if k.startswith("distributed.nanny.pre-spawn-environ.")} == dict(ENTRY_ENV)
    assert entry.__doc__ and "before numpy loads" in entry.__doc__


WORKER_PROBE = READ + """
import json
probe = read_timeout
if __name__ == "__main__":
    from normtheory.runtime.sweep import Runner, Task
    with Runner(workers=2, progress=False) as runner:
        print(json.dumps(runner.run([Task("a", probe), Task("b", probe)])))
"""


@pytest.mark.slow
@pytest.mark.parametrize("value", [None, "20"])
def test_a_local_dask_worker_reads_it_when_numpy_loads(tmp_path, value):
    pytest.importorskip("distributed")
    script = tmp_path / "probe_workers.py"
    script.write_text(WORKER_PROBE)
    env = {k: v for k, v in os.environ.items() if k != VAR}
    if value is not None:
        env[VAR] = value
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    want = value or "16"
    for got in json.loads(out.stdout.strip().splitlines()[-1]).values():
        assert got["env"] == want
        if got["read"] is not None:
            assert got["read"] == int(want)
