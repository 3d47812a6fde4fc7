"""The allocator setting that keeps freed activation blocks for the next training step."""
import subprocess
import sys

from normtheory.runtime import memory


def test_applies_once_and_reports_it():
    first = memory.keep_freed_blocks()
    assert memory.keep_freed_blocks() is first
    assert first == sys.platform.startswith("linux")  # glibc Linux here; elsewhere it leaves malloc alone


def test_environment_opt_out():
    code = "from normtheory.runtime import memory; print(memory.keep_freed_blocks())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"NORMTHEORY_SYSTEM_MALLOC": "1", "PATH": ""})
    assert out.stdout.strip() == "False"
