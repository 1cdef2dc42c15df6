"""cuBLAS's own FP64 emulation, as a DGEMM to compare against (``ozaki-cutlass bench``).

What: cuBLAS 13.1 and newer (CUDA 13.0 Update 2) can run DGEMM as an emulation: A and B cut
into fixed-point INT8 slices sharing a power-of-two scale per row of A and column of B, the
slices multiplied on the INT8 tensor cores (the Ozaki scheme I; ours is scheme II, one
INT8 product per modulus). ``ozaki_cutlass.gemm`` never runs it; the benchmark puts it
next to native DGEMM and our paths. The functions are nvmath-python's bindings, loaded by
``ozaki_cutlass.device.cublas``; :func:`emulation_problem` says where the libcublas in use is
too old for them.

How it is asked for: a cuBLAS handle of its own in math mode FP64_EMULATED_FIXEDPOINT with
strategy EAGER (emulate wherever cuBLAS can; the default strategy emulates only where its
heuristic expects a gain, and on GPUs with fast FP64 units runs native DGEMM), dynamic
mantissa control (cuBLAS's default: as many mantissa bits as FP64 accuracy needs, up to
79, i.e. 10 slices, falling back to native DGEMM beyond) and a workspace of ours (without
one cuBLAS allocates per call with cudaMallocAsync). cuBLAS reports the bits it kept, or -1
where it ran native DGEMM instead (:meth:`FixedPointDgemm.mantissa_bits`).

The math mode and strategy come from nvmath's enums (``nvmath.bindings.cublas.Math``,
``EmulationStrategy``); the mantissa control, which nvmath has no enum for, is
library_types.h's cudaEmulationMantissaControl CUDA_EMULATION_MANTISSA_CONTROL_DYNAMIC = 0
(headers of nvidia-cublas 13.1.1.3).
"""

from __future__ import annotations

import threading

import numpy as np

from . import cublas, driver
from .layouts import DgemmPlan

__all__ = ["EMULATION_SINCE", "EmulationUnavailable", "emulation_problem", "fixed_point_workspace_bytes",
           "FixedPointDgemm", "fixed_point_dgemm", "forget_emulation"]

# cuBLAS 13.1 (CUDA 13.0 Update 2) brought the fixed-point FP64 emulation's functions (the
# strategy setter came with 12.9's FP32 emulation); nvmath's bindings have them all.
EMULATION_SINCE = (13, 1)

_MANTISSA_CONTROL_DYNAMIC = 0           # cudaEmulationMantissaControl (cuBLAS's default)
_DYNAMIC_MAX_MANTISSA_BITS = 79         # cuBLAS's default cap under dynamic control: 10 INT8 slices
_EMULATION_STATE: list = []             # [""] once checked and usable, [reason] where it is not


class EmulationUnavailable(RuntimeError):
    """cuBLAS's FP64 emulation cannot be called here (the message says why)."""


def _emulation_check() -> str:
    try:
        have = cublas.version()
    except (cublas.NativeUnavailable, cublas.CublasError) as exc:
        return f"libcublas is not usable here ({exc})"
    if have[:2] < EMULATION_SINCE:
        return (f"libcublas {'.'.join(map(str, have))} has no FP64 emulation "
                "(cuBLAS 13.1, from CUDA 13.0 Update 2, brought it)")
    return ""


def emulation_problem() -> str | None:
    """Why the libcublas in use cannot run cuBLAS's FP64 emulation (too old, or the library
    missing), or None. Asked once (no GPU needed)."""
    if not _EMULATION_STATE:  # two threads at once ask twice, to the same answer
        _EMULATION_STATE.append(_emulation_check())
    return _EMULATION_STATE[0] or None


def fixed_point_workspace_bytes(m: int, n: int, k: int, max_mantissa_bits: int = _DYNAMIC_MAX_MANTISSA_BITS) -> int:
    """An upper bound on the workspace of one emulated m x n x k DGEMM under dynamic
    mantissa control: NVIDIA's formula from the cuBLAS documentation ("Fixed-Point
    Workspace Requirements", getFixedPointWorkspaceSizeInBytes, real case): the INT8 slices
    of A and B on sizes padded to 1024 x 1024 x 128, their int32 scale vectors, or the
    dynamic-precision scan's int32 buffers if larger, times 1.25, plus 128 MiB."""
    def up(x, to):
        return -(-x // to) * to

    slices = -(-(max_mantissa_bits + 1) // 8)
    pm, pn, pk, blocks_k = up(m, 1024), up(n, 1024), up(k, 128), -(-k // 64)
    slices_bytes = (pm * pk + pn * pk) * slices + 4 * (pm + pn)
    scan_bytes = 4 * (m * blocks_k + n * blocks_k + m * n)
    return int(max(slices_bytes, scan_bytes) * 1.25) + (128 << 20)


class FixedPointDgemm:
    """cuBLAS's FP64 emulation as a column-major DGEMM on the GPU of the context current when
    it is made: its own cuBLAS handle, set up as the module says (the native path's handles
    keep cuBLAS's defaults), and a workspace grown to :func:`fixed_point_workspace_bytes`.
    Made by :func:`fixed_point_dgemm`."""

    __slots__ = ("lib", "handle", "_workspace", "_bits")

    def __init__(self, lib):
        self.lib, self._workspace, self._bits = lib, None, None
        blas = lib.blas
        self.handle = lib.call("cublasCreate_v2", blas.create)
        try:  # a new handle's pointer mode is host, as the scalars passed here
            for what, fn, value in (
                    ("cublasSetMathMode", blas.set_math_mode, int(blas.Math.FP64_EMULATED_FIXEDPOINT_MATH)),
                    ("cublasSetEmulationStrategy", blas.set_emulation_strategy, int(blas.EmulationStrategy.EAGER)),
                    ("cublasSetFixedPointEmulationMantissaControl", blas.set_fixed_point_emulation_mantissa_control,
                     _MANTISSA_CONTROL_DYNAMIC)):
                lib.call(what, fn, self.handle, value)
        except cublas.CublasError:
            blas.destroy(self.handle)
            raise

    def _reserve(self, plan: DgemmPlan) -> None:
        need = fixed_point_workspace_bytes(plan.m, plan.n, plan.k)
        if self._workspace is not None and self._workspace.nbytes >= need:
            return
        old = self._workspace
        new = driver.DeviceBuffer(need)
        self.lib.call("cublasSetWorkspace_v2", self.lib.blas.set_workspace, self.handle, new.ptr, new.nbytes)
        self._workspace = new
        if old is not None:  # calls in flight may still use it: cuMemFree waits for the GPU's work
            old.close()

    def run(self, plan: DgemmPlan, alpha: float, beta: float, stream, *,
            pointers: tuple[int, int, int] | None = None) -> None:
        """Enqueue ``plan`` (C = alpha op(A) op(B) + beta C) through the emulation on ``stream``;
        ``pointers``: the caller's (A, B, O) instead of the plan's own. Does not synchronize
        (except when the workspace has to grow)."""
        if plan.m == 0 or plan.n == 0:
            return
        self._reserve(plan)
        cublas.handle_dgemm(self, plan, pointers, alpha, beta, stream)

    def blas(self) -> int:
        """The emulation's cuBLAS handle (what ``cublas.handle_dgemm`` runs on)."""
        return self.handle

    def mantissa_bits(self, plan: DgemmPlan, stream, *, pointers: tuple[int, int, int] | None = None) -> int:
        """Run ``plan`` once (alpha 1, beta 0) and return the mantissa bits cuBLAS kept for it,
        as cuBLAS reports them through cublasSetFixedPointEmulationMantissaBitCountPointer
        (a device int; -1: it did not emulate but ran native DGEMM). Waits for the call."""
        lib = self.lib
        hook = lib.blas.set_fixed_point_emulation_mantissa_bit_count_pointer
        if self._bits is None:
            self._bits = driver.DeviceBuffer(16)
        self._bits.fill_bytes(0xFF, stream)  # -1 as an int32: what cuBLAS leaves when it does not emulate
        lib.call("cublasSetFixedPointEmulationMantissaBitCountPointer", hook, self.handle, self._bits.ptr)
        try:
            self.run(plan, 1.0, 0.0, stream, pointers=pointers)
            bits = driver.read_back(self._bits.ptr, np.empty(1, dtype=np.int32), stream)
        finally:  # timed calls write nothing there
            hook(self.handle, 0)
        return int(bits[0])

    def close(self) -> None:
        """Destroy the handle (cuBLAS synchronizes the GPU first) and free the workspace."""
        if self.handle:
            self.lib.blas.destroy(self.handle)
            self.handle = 0
        for buffer in (self._workspace, self._bits):
            if buffer is not None:
                buffer.close()
        self._workspace = self._bits = None


_EMULATORS: dict[tuple[int, int], FixedPointDgemm] = {}
_LOCK = threading.Lock()


def fixed_point_dgemm() -> FixedPointDgemm:
    """The :class:`FixedPointDgemm` of (current context, this thread), made on first use;
    raises :class:`EmulationUnavailable` (with the reason) where the libcublas in use has
    no FP64 emulation. :func:`forget_emulation` frees them."""
    why = emulation_problem()
    if why is not None:
        raise EmulationUnavailable(why)
    key = (cublas.current_context(), threading.get_ident())
    found = _EMULATORS.get(key)
    if found is None:
        found = FixedPointDgemm(cublas.library())
        with _LOCK:
            _EMULATORS[key] = found
    return found


def forget_emulation() -> None:
    """Close every :class:`FixedPointDgemm` (their handles and workspaces) made in this process."""
    with _LOCK:
        emulators = list(_EMULATORS.values())
        _EMULATORS.clear()
    for emulator in emulators:
        emulator.close()
