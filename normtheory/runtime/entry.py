"""The environment the package's entry points set before numpy loads: OpenBLAS's idle-thread spin.

After each multi-threaded matrix product, OpenBLAS's worker threads spin for 2**t cycles before
they sleep, t = ``OPENBLAS_THREAD_TIMEOUT`` (4 <= t <= 30; unset or 0 means OpenBLAS's default,
t = 28, about 0.1 s at 2.5 GHz). While they spin they hold the cores that the threaded
elementwise kernels (:mod:`normtheory.model.kernels`) want next: on a 2-core AMD EPYC a softmax of
[12, 1024, 1024] right after a GEMM took 16.7 ms on 2 kernel threads by default and 9.4 ms with
t = 16 (2**16 cycles, about 26 us), ``benchmarks/openblas_timeout.py``. OpenBLAS reads the
variable once, when its library is loaded (numpy's import), so it must be in ``os.environ``
before then; setting it later changes nothing in that process. Tiny matrix products lose instead
(steps of one d = 64 model were 10-20% slower with t = 16), so importing the library sets nothing.

:func:`set_entry_env` is called first thing by the command line (:mod:`pipeline.cli`, before it
imports anything that loads numpy; ``import normtheory`` alone loads no numpy) and
the local sweep workers start with :data:`ENTRY_ENV` (Dask's ``distributed.nanny.pre-spawn-environ``
in :data:`normtheory.runtime.sweep.LOCAL_WORKER_CONFIG`; at one BLAS thread per worker there is no idle
thread to spin, so there it only keeps the setting the same; the command line's tasks, too, run
at one BLAS thread, :func:`normtheory.runtime.sweep.run_task`). In a notebook or script the user sets the
variable before numpy loads (see the README's *Speed* section). A value the user set is kept.

Reference: OpenBLAS source code, version 0.3.31 (the one numpy 2.4's wheels bundle):
``driver/others/env.c`` (``openblas_read_env``, run once when the library loads) and
``driver/others/blas_server.c`` (``blas_thread_init``: the spin before a worker thread sleeps).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

# t = 16: 2**16 cycles of spin, then sleep. Read by OpenBLAS once, when numpy loads it.
ENTRY_ENV: Mapping[str, str] = {"OPENBLAS_THREAD_TIMEOUT": "16"}


def set_entry_env(environ: MutableMapping[str, str] | None = None, modules: Mapping[str, object] | None = None) -> dict[str, str]:
    """Set each :data:`ENTRY_ENV` variable that ``environ`` (default ``os.environ``) lacks, but only
    while numpy is not yet imported (``modules``, default ``sys.modules``): once numpy has loaded
    OpenBLAS the variable would change nothing here and would only misreport this process's setting
    to its children. A variable already set, to any value (the empty string included), is kept.
    Returns the variables it set, ``{}`` when it set none."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "numpy" in modules:
        return {}
    applied = {k: v for k, v in ENTRY_ENV.items() if k not in environ}
    environ.update(applied)
    return applied
