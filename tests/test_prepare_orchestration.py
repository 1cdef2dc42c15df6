"""ozaki_cutlass.prepare's orchestration, on the CPU with the GPU pieces replaced by
recorders: which stage kernels it launches for each mode, side and layout, with which
sizes, and what the Prepared it returns holds. (The stages' arithmetic and the bits of
gemm with prepared operands are checked on the GPU: tests/gpu/test_prepared.py.)"""

import itertools
import types
import threading

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.operands import prepared
from ozaki_cutlass.generator import Arch
from ozaki_cutlass.numerics.moduli import crt_constants

from recorders import OnePool


class Recorder:
    """Stands in for the stage-kernel library: records (stage, args) per call."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, stage):
        return lambda *args, **kw: self.calls.append((stage, args + tuple(v for v in kw.values() if v)))


@pytest.fixture
def fake_gpu(monkeypatch):
    st = Recorder()
    ptrs = itertools.count(1 << 20, 1 << 16)

    class Buffer:
        def __init__(self, nbytes):
            self.nbytes, self.ptr = nbytes, next(ptrs)

        def upload(self, host, stream=0):
            pass

    class Ws:
        lock = threading.Lock()

        def moduli(self):
            return 7

    monkeypatch.setattr(driver, "ensure_context", lambda ordinal=0: None)
    monkeypatch.setattr(driver, "DeviceBuffer", Buffer)
    monkeypatch.setattr("ozaki_cutlass.device.arrays.DeviceBuffer", Buffer)
    monkeypatch.setattr(prepared, "visible_arch", lambda ordinal=0: Arch.SM90A)
    monkeypatch.setattr(prepared, "load_stages", lambda arch: st)
    monkeypatch.setattr(prepared, "WORKSPACES", OnePool(Ws()))
    return st


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_stages_launched(fake_gpu, mode, side):
    x = np.ones((6, 10))  # NumPy: copied as a row-major 6 x 10 device matrix
    p = ozaki_cutlass.prepare(x, side, moduli=13, mode=mode)
    names = [name for name, _ in fake_gpu.calls]
    scan_name = "scan_coarse" if mode == "accurate" else "scan"  # accurate: one kernel for both
    if side == "left":    # rows of x: contiguous along k = 10, no pack
        nvec, k, rows_pad = 6, 10, 6
        assert names[0] == scan_name
    else:                 # columns of x: k = 6 strided, packed first
        nvec, k, rows_pad = 10, 6, 12
        assert names[0] == "pack"
        assert fake_gpu.calls[0][1][1:5] == (nvec, k, 1, 10)  # vectors = columns: vs = cs, es = rs
    scan = dict(fake_gpu.calls)[scan_name]
    assert scan[1:3] == (nvec, k) and scan[5] == crt_constants(13).bound_exponent
    assert names[-1] == ("scan_coarse" if mode == "accurate" else "residues")
    assert "coarse" not in names
    last = fake_gpu.calls[-1][1]
    if mode == "accurate":
        assert last[-3:-1] == (rows_pad, 16) and p.coarse and not p.residues
    else:
        assert last[6:8] == (13, 7) and last[-3:-1] == (rows_pad, 16) and p.residues and not p.coarse
    assert (p.side, p.moduli, p.mode, p.shape, p.kind) == (side, 13, mode, (6, 10), "numpy")


def test_trans_prepares_the_transpose(fake_gpu):
    p = ozaki_cutlass.prepare(np.ones((6, 10)), "left", trans=True, mode=None)
    assert p.shape == (10, 6) and p.mode == "accurate"
    assert [name for name, _ in fake_gpu.calls][:2] == ["pack", "scan_coarse"]  # rows of x.T are strided


def test_prepare_waits_for_its_operands_producer(fake_gpu, monkeypatch):
    """An operand still being written on its producer's stream (CUDA array interface v3)
    is scanned only after that work: the prepare's stream waits for it, as gemm's does."""
    from ozaki_cutlass.device import arrays

    class OnStream:
        __cuda_array_interface__ = {"shape": (6, 10), "typestr": "<f8", "data": (1 << 40, False), "version": 3,
                                    "strides": None, "stream": 13}

    seen = []
    monkeypatch.setattr(driver, "order_after", lambda producer, consumer: seen.append((producer, consumer)))
    monkeypatch.setattr(arrays, "pointer_device", lambda ptr: 0)
    monkeypatch.setattr(driver, "bindings", lambda: types.SimpleNamespace(
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), cuCtxGetCurrent=lambda: (0, 1)))
    monkeypatch.setattr(driver, "ensure_context", lambda ordinal=0: 1)  # the context current before
    ozaki_cutlass.prepare(OnStream(), "left", moduli=13, mode="fast", stream=55)
    assert fake_gpu.calls and seen == [(13, 55)]


@pytest.mark.parametrize("side, shape", [("left", (5, 0)), ("left", (0, 7)), ("right", (7, 0)), ("right", (0, 4))])
def test_an_empty_operand_prepares_without_residues(fake_gpu, monkeypatch, side, shape):
    """k == 0 or no vectors: fast mode makes no residues (the kernel refuses planes 0
    bytes apart, and no product reads them), as accurate mode makes no coarse bytes."""
    monkeypatch.setattr(driver, "bindings", lambda: types.SimpleNamespace(
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), cuCtxGetCurrent=lambda: (0, None),
        cuMemsetD8Async=lambda *args: (0,), CUstream=lambda s: s))
    p = ozaki_cutlass.prepare(np.zeros(shape), side, moduli=13, mode="fast")
    assert "residues" not in [name for name, _ in fake_gpu.calls] and not p.residues
