"""Ctrl-C stops a build at once (generator/build.py, Interrupts): the running nvcc
processes are stopped, the queued ones never start, nothing is recorded as failed and no
staging folder is left; BuildInterrupted says what was built. The build runs in a child
process with the fake nvcc, compiles of 3 s two at a time, interrupted after 1 s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

CHILD = """
import sys
from pathlib import Path
from ozaki_cutlass.generator import build, catalog, resolve_toolchain
from ozaki_cutlass.generator import BuildInterrupted
nvcc, templates, cutlass, out = map(Path, sys.argv[1:5])
toolchain = resolve_toolchain(nvcc=nvcc, templates_dir=templates, cutlass_root=cutlass)
print("started", flush=True)
try:
    build(catalog("sm_90a", full=True)[:6], out, jobs=2, toolchain=toolchain)
except BuildInterrupted as exc:
    print("interrupted", len(exc.built), len(exc.stopped), flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


@pytest.mark.parametrize("whom", ["process", "group"])  # Jupyter's interrupt; a terminal's Ctrl-C
def test_an_interrupt_stops_the_build_at_once(whom, fake_nvcc, templates_dir, cutlass_root, out_dir):
    fake_nvcc.configure(sleep=3.0)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(fake_nvcc.path), str(templates_dir),
                              str(cutlass_root), str(out_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    assert child.stdout.readline().strip() == "started"
    time.sleep(1.0)  # two compiles running, four queued
    sent = time.monotonic()
    (os.killpg if whom == "group" else os.kill)(child.pid, signal.SIGINT)
    out, err = child.communicate(timeout=30)
    took = time.monotonic() - sent
    assert child.returncode == 130, err
    assert out.split() == ["interrupted", "0", "6"], (out, err)
    assert took < 2.5, f"the build went on for {took:.1f} s after the interrupt"  # one queued compile: 3 s
    assert "interrupted: stopping the nvcc processes" in err
    assert not list(out_dir.rglob("*.failed")), "a stopped compile was recorded as a failure"
    assert not list((out_dir / ".staging").iterdir())
    assert fake_nvcc.calls() == []  # no compile ran to its end
    with pytest.raises(ProcessLookupError):  # nothing of the child's session is left running
        os.killpg(child.pid, 0)
