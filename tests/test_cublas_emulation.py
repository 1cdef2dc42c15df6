"""cuBLAS's FP64 emulation (ozaki_cutlass.device.cublas_emulation) on the CPU: the version
gate, NVIDIA's workspace bound, and the handle's settings and call order against a fake
libcublas. The GPU side (its error against a double-double product, the mantissa bits it
reports): tests/gpu/test_measure_gpu.py."""

from __future__ import annotations

import types

import pytest

from ozaki_cutlass.device import cublas, cublas_emulation, driver
from ozaki_cutlass.device.layouts import DgemmPlan


class FakeBlas:
    """nvmath's cuBLAS binding module, faked: records its calls (name, args), answers success,
    and carries nvmath's real enums."""

    def __init__(self):
        from nvmath.bindings import cublas as real

        self.calls = []
        self.Math, self.EmulationStrategy = real.Math, real.EmulationStrategy

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append((name, args))
            return 0x1234 if name == "create" else None

        object.__setattr__(self, name, call)
        return call

    def names(self):
        return [name for name, _ in self.calls]


class FakeLibraries:
    """What cublas.library() returns, over a FakeBlas: ``call`` runs the function."""

    def __init__(self, blas):
        self.blas = blas

    def call(self, what, fn, *args):
        return fn(*args)


@pytest.fixture
def fake_library(monkeypatch):
    """cublas.library() and version() answering from a fake; the check's state reset."""

    def install(have=(13, 1, 1)):
        blas = FakeBlas()
        monkeypatch.setattr(cublas, "library", lambda: FakeLibraries(blas))
        monkeypatch.setattr(cublas, "version", lambda: have)
        monkeypatch.setattr(cublas_emulation, "_EMULATION_STATE", [])
        return blas

    return install


def test_a_library_older_than_13_1_is_refused_with_its_version(fake_library):
    fake_library(have=(13, 0, 2))
    why = cublas_emulation.emulation_problem()
    assert why is not None and "libcublas 13.0.2 has no FP64 emulation" in why and "13.1" in why
    assert cublas_emulation.emulation_problem() == why  # remembered


def test_a_library_of_13_1_or_newer_has_it(fake_library):
    fake_library(have=(13, 1, 0))
    assert cublas_emulation.emulation_problem() is None


def test_no_libcublas_is_a_reason_not_a_crash(monkeypatch):
    def missing():
        raise cublas.NativeUnavailable("libcublas was not found")

    monkeypatch.setattr(cublas, "library", missing)
    monkeypatch.setattr(cublas_emulation, "_EMULATION_STATE", [])
    assert cublas_emulation.emulation_problem() == "libcublas is not usable here (libcublas was not found)"
    with pytest.raises(cublas_emulation.EmulationUnavailable, match="not found"):
        cublas_emulation.fixed_point_dgemm()


def test_workspace_bound_is_nvidias_formula():
    # 8192^3, 79 bits = 10 slices: the slices dominate
    slices = (8192 * 8192 + 8192 * 8192) * 10 + 4 * (8192 + 8192)
    assert cublas_emulation.fixed_point_workspace_bytes(8192, 8192, 8192) == int(slices * 1.25) + (128 << 20)
    # k = 64: the dynamic-precision scan's m x n int32 buffer dominates
    scan = 4 * (8192 * 1 + 8192 * 1 + 8192 * 8192)
    assert cublas_emulation.fixed_point_workspace_bytes(8192, 8192, 64) == int(scan * 1.25) + (128 << 20)
    # padding: 1 x 1 x 1 takes a 1024 x 1024 x 128 tile of each operand
    assert cublas_emulation.fixed_point_workspace_bytes(1, 1, 1) == (
        int(max((1024 * 128 * 2) * 10 + 4 * 2048, 4 * 3) * 1.25) + (128 << 20))
    assert cublas_emulation.fixed_point_workspace_bytes(8192, 8192, 8192, max_mantissa_bits=55) < \
        cublas_emulation.fixed_point_workspace_bytes(8192, 8192, 8192)


class FakeBuffer:
    made: list = []

    def __init__(self, nbytes):
        self.nbytes, self.ptr, self.closed = nbytes, 0x10000 * (len(FakeBuffer.made) + 1), False
        FakeBuffer.made.append(self)

    def fill_bytes(self, value, stream=0):
        self.filled = value

    def close(self):
        self.closed = True


def _plan(m, n, k):
    return DgemmPlan(transa=False, transb=False, m=m, n=n, k=k, a_ptr=0, lda=m, b_ptr=0, ldb=k, c_ptr=0, ldc=m,
                     transposed=False)


@pytest.fixture
def emulator(fake_library, monkeypatch):
    blas = fake_library()
    assert cublas_emulation.emulation_problem() is None
    FakeBuffer.made = []
    dgemms = []
    monkeypatch.setattr(driver, "DeviceBuffer", FakeBuffer)
    monkeypatch.setattr(driver, "bindings", lambda: None)  # no driver call of its own: none to make here
    monkeypatch.setattr(driver, "check", lambda result, what="": None)
    monkeypatch.setattr(cublas, "handle_dgemm", lambda handles, plan, pointers, alpha, beta, stream: dgemms.append(
        (handles.blas(), plan, pointers, alpha, beta, stream)))
    em = cublas_emulation.FixedPointDgemm(cublas.library())
    return types.SimpleNamespace(em=em, blas=blas, dgemms=dgemms)


def test_the_handle_asks_for_the_fixed_point_emulation_eagerly(emulator):
    settings = [(name, args) for name, args in emulator.blas.calls if name != "create"]
    # the integers of cublas_api.h and library_types.h (nvidia-cublas 13.1.1.3), on handle 0x1234
    assert settings == [("set_math_mode", (0x1234, 8)),                             # ..._FP64_EMULATED_FIXEDPOINT_MATH
                        ("set_emulation_strategy", (0x1234, 2)),                    # ..._EMULATION_STRATEGY_EAGER
                        ("set_fixed_point_emulation_mantissa_control", (0x1234, 0))]  # ..._CONTROL_DYNAMIC


def test_the_workspace_is_set_before_the_call_and_only_grows(emulator):
    em, blas = emulator.em, emulator.blas
    big, small = _plan(4096, 4096, 4096), _plan(1024, 1024, 1024)
    em.run(big, 1.0, 0.0, 7, pointers=(1, 2, 3))
    em.run(small, 1.0, 0.0, 7, pointers=(1, 2, 3))
    workspaces = [args for name, args in blas.calls if name == "set_workspace"]
    assert len(workspaces) == 1 and workspaces[0][2] == cublas_emulation.fixed_point_workspace_bytes(4096, 4096, 4096)
    assert [d[1] for d in emulator.dgemms] == [big, small] and emulator.dgemms[0][0] == 0x1234
    assert not FakeBuffer.made[0].closed
    em.run(_plan(8192, 8192, 8192), 1.0, 0.0, 7)
    workspaces = [args for name, args in blas.calls if name == "set_workspace"]
    assert len(workspaces) == 2 and workspaces[1][1] == FakeBuffer.made[-1].ptr  # the new one set ...
    assert FakeBuffer.made[0].closed  # ... then the old one freed (cuMemFree waits for the GPU's work)


def test_mantissa_bits_reads_what_cublas_wrote_and_unhooks_the_pointer(emulator, monkeypatch):
    em, blas = emulator.em, emulator.blas
    monkeypatch.setattr(driver, "read_back", lambda ptr, host, stream=0: host.__setitem__(0, 55) or host)
    assert em.mantissa_bits(_plan(256, 256, 256), 5) == 55
    hooks = [args[1] for name, args in blas.calls if name == "set_fixed_point_emulation_mantissa_bit_count_pointer"]
    bits = next(b for b in FakeBuffer.made if b.nbytes == 16)
    assert hooks == [bits.ptr, 0] and bits.filled == 0xFF  # -1 until cuBLAS writes it

    def fails(*args):
        raise cublas.CublasError("emulated cublasDgemm_v2", 15)

    monkeypatch.setattr(cublas, "handle_dgemm", fails)
    with pytest.raises(cublas.CublasError, match="NOT_SUPPORTED"):
        em.mantissa_bits(_plan(256, 256, 256), 5)
    hooks = [args[1] for name, args in blas.calls if name == "set_fixed_point_emulation_mantissa_bit_count_pointer"]
    assert hooks[-1] == 0  # unhooked on failure too


def test_close_destroys_the_handle_and_frees_the_buffers(emulator):
    em = emulator.em
    em.run(_plan(512, 512, 512), 1.0, 0.0, 0)
    em.close()
    assert emulator.blas.names()[-1] == "destroy" and all(b.closed for b in FakeBuffer.made)
    em.close()  # twice is harmless
    assert emulator.blas.names().count("destroy") == 1


def test_the_installed_libcublas_has_every_function_by_name(monkeypatch):
    """The real library (the nvidia-cublas wheel here): 13.1 or newer has each symbol."""
    if not cublas.available():
        pytest.skip("no libcublas here (the nvidia-cublas wheel is not installed)")
    monkeypatch.setattr(cublas_emulation, "_EMULATION_STATE", [])
    if cublas.version()[:2] < cublas_emulation.EMULATION_SINCE:
        assert "has no FP64 emulation" in cublas_emulation.emulation_problem()
    else:
        assert cublas_emulation.emulation_problem() is None
