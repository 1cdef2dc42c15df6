"""Native FP64 GEMM: cuBLASLt's ``cublasLtMatmul`` for DGEMM through nvmath-python's bindings, and a 2-D device copy.

What: the few cuBLAS calls the "auto" policy needs to run a problem on the GPU's own FP64
units (DGEMM) where the INT8 emulation would be slower (small or skinny shapes, GPUs with
fast FP64). The calls go through ``nvmath.bindings.cublas`` and ``nvmath.bindings.cublasLt``
(nvmath-python: NVIDIA's typed Cython bindings, whose enums and structure layouts come
from the CUDA headers); they find libcublas and libcublasLt with ``cuda.pathfinder``, so
there is no CuPy or PyTorch dependency and nothing to compile. nvmath is imported and the
libraries loaded on first use, once per process, never at import time (nvmath, not ctypes:
less host time per call, docs/benchmarks.md, "The cuBLASLt binding").

Why cuBLASLt: ``cublasDgemm_v2`` chooses its kernel on every call; ``cublasLtMatmul`` takes
one chosen before. :class:`LtDgemm` asks ``cublasLtMatmulAlgoGetHeuristic`` once per layout,
GPU and pointer alignment and keeps the answer, which takes 1-3 us of host time off each
call (H200, ``scripts/native_lt_probe.py``: 57.0 against 59.7 us for a 1024^3 call, events
around each call; the same bits as ``cublasDgemm_v2`` at every shape probed). That is part
of what lets the auto policy's native lane cost no more than CuPy's own matmul.

Layouts: ``ozaki_cutlass.device.layouts`` maps strided views onto one column-major DGEMM
(a :class:`~ozaki_cutlass.device.layouts.DgemmPlan`, run here by :class:`LtDgemm`) or one
2-D copy (run by :func:`run_copy`).

Reproducibility: one layout, GPU and pointer alignment always run the one algorithm chosen
for it, and that algorithm needs no workspace, so it has no split-K reduction through
scratch memory and shares none with calls on other streams: the same inputs give the same
bits on every call, on any stream, concurrent or not, for a given libcublasLt and GPU.
(Pointer alignment is part of the choice: the same numbers at an address aligned differently
may take another kernel, as with any cuBLAS call.) Where the heuristic offers no algorithm,
and for k == 0 (C = beta C, no product), the call goes to ``cublasDgemm_v2`` on a handle per
(context, thread) in cuBLAS's default math mode and host pointer mode. DGEMM runs on the
FP64 units on the GPUs this project targets (sm_80, sm_90; cuBLAS 13's own FP64 emulation,
on Blackwell, is opt-in).
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
from dataclasses import dataclass
from math import copysign

import numpy as np

from . import driver
from .layouts import CopyPlan, DgemmPlan, call_pointers

__all__ = ["NativeUnavailable", "CublasError", "Handles", "LtDgemm", "available", "version", "library", "handles",
           "lt_dgemm", "dgemm", "run_copy", "handle_dgemm", "current_context", "zgemm",
           "dgemm_strided_batched"]


class NativeUnavailable(RuntimeError):
    """libcublas cannot be found or opened: native DGEMM is not available here."""


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""

    def __init__(self, what: str, status: int):
        self.status = int(status)
        try:
            from nvmath.bindings.cublas import Status
            self.status_name = f"CUBLAS_STATUS_{Status(self.status).name}"
        except (ImportError, ValueError):
            self.status_name = f"unknown cublasStatus_t {self.status}"
        super().__init__(f"{what} failed: {self.status_name} ({self.status})")


# --------------------------------------------------------------------------- library

@dataclass(frozen=True, slots=True)
class _Libraries:
    blas: object        # nvmath.bindings.cublas: the handle's settings, version, k == 0 and fallback DGEMMs
    lt: object          # nvmath.bindings.cublasLt: every other DGEMM
    errors: tuple       # the exceptions the two raise for a status other than success
    op_n: int           # cublasOperation_t
    op_t: int

    def call(self, what: str, fn, *args):
        """``fn(*args)`` (a function of ``blas`` or ``lt``), a status other than success
        raised as CublasError naming ``what``."""
        try:
            return fn(*args)
        except self.errors as exc:
            raise CublasError(what, exc.status) from None


_LOCK = threading.Lock()
_LIB: _Libraries | None = None
_LOAD_ERROR: str | None = None      # the first failure, repeated without searching again
_LT_PLANS: dict[tuple, "LtDgemm"] = {}
_LT_PLAN_LIMIT = 4096

_HOW_TO_FIX = ("install the CUDA toolkit (and put its lib64 on LD_LIBRARY_PATH or set CUDA_HOME) "
               "or the cuBLAS wheel matching the driver (pip install nvidia-cublas for CUDA 13, "
               "nvidia-cublas-cu12 for CUDA 12)")


def _bindings():
    """nvmath-python's cuBLAS and cuBLASLt bindings, imported on first use (it takes a few tenths of a second)."""
    from nvmath.bindings import cublas as blas, cublasLt as lt
    return blas, lt


def _open() -> _Libraries:
    try:
        blas, lt = _bindings()
    except ImportError as exc:
        raise NativeUnavailable(f"native DGEMM needs nvmath-python (a dependency of ozaki-cutlass: "
                                f"pip install nvmath-python): {exc}") from exc
    try:  # the bindings load each library on its first call: make it now
        blas.get_property(0)
        lt.get_version()
    except Exception as exc:  # noqa: BLE001 - pathfinder's and nvmath's own errors: not found, no driver
        raise NativeUnavailable(f"libcublas/libcublasLt (cuBLAS, looked up by nvmath-python through "
                                f"cuda.pathfinder: NVIDIA wheels, conda, the system loader, CUDA_PATH/CUDA_HOME) "
                                f"could not be loaded ({str(exc).strip()}); to use native DGEMM, "
                                f"{_HOW_TO_FIX}") from exc
    return _Libraries(blas, lt, (blas.cuBLASError, lt.cuBLASLtError), int(blas.Operation.N), int(blas.Operation.T))


def library() -> _Libraries:
    """nvmath's cuBLAS and cuBLASLt bindings with their libraries loaded, on the first call in
    this process; a failure is remembered and raised again (as NativeUnavailable) without
    searching again."""
    global _LIB, _LOAD_ERROR
    if _LIB is None:
        with _LOCK:
            if _LIB is None:
                if _LOAD_ERROR is not None:
                    raise NativeUnavailable(_LOAD_ERROR)
                try:
                    _LIB = _open()
                except NativeUnavailable as exc:
                    _LOAD_ERROR = str(exc)
                    raise
    return _LIB


def available() -> bool:
    """Whether libcublas can be opened here (it is, on the first call)."""
    try:
        library()
    except NativeUnavailable:
        return False
    return True


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the libcublas in use; for recording where a timing was taken."""
    lib = library()
    major, minor, patch = (lib.call("cublasGetProperty", lib.blas.get_property, which) for which in (0, 1, 2))
    return int(major), int(minor), int(patch)


def current_context() -> int:
    """The CUDA context current on this thread (the GPU a handle is made for); CudaError if none."""
    current = driver.current_context()
    if current == 0:
        raise driver.CudaError("cuBLAS: no CUDA context is current on this thread "
                              "(ozaki_cutlass.device.driver.ensure_context makes the device's primary one current)")
    return current


class Handles:
    """The cuBLASLt handle of one (context, thread), and its cuBLAS handle made on first need
    (both as integers), in relaxed capture mode: cuBLAS allocates for them."""

    __slots__ = ("lib", "lt", "_blas")

    def __init__(self, lib: _Libraries):
        self.lib, self._blas = lib, None
        with driver.relaxed_capture():
            self.lt = lib.call("cublasLtCreate", lib.lt.create)

    def blas(self) -> int:
        if self._blas is None:
            lib = self.lib
            with driver.relaxed_capture():
                handle = lib.call("cublasCreate_v2", lib.blas.create)
            lib.call("cublasSetPointerMode_v2", lib.blas.set_pointer_mode, handle, int(lib.blas.PointerMode.HOST))
            lib.call("cublasSetMathMode", lib.blas.set_math_mode, handle, int(lib.blas.Math.DEFAULT_MATH))
            self._blas = handle
        return self._blas


_HANDLES: dict[tuple[int, int], Handles] = {}
_MINE = threading.local()  # .handles: this thread's {context: Handles}, the same objects as in _HANDLES


def handles(context: int | None = None) -> Handles:
    """The handles of (current context, this thread), created on first use (one driver
    query per call otherwise, none when the caller passes the ``context`` it knows is
    current). Keyed by thread ident: a thread that ends leaves its handles to the next
    thread that gets its ident (never used by two live threads at once), so handles do
    not pile up."""
    context = current_context() if context is None else context
    mine = getattr(_MINE, "handles", None)
    found = mine.get(context) if mine is not None else None
    if found is None:
        key = (context, threading.get_ident())
        found = _HANDLES.get(key)
        if found is None:
            found = Handles(library())
            with _LOCK:
                _HANDLES[key] = found
        if mine is None:
            mine = _MINE.handles = {}
        mine[context] = found
    return found


class _HostScalar:
    """A float64 at a fixed host address, for the alpha and beta cuBLAS reads in host pointer mode."""

    __slots__ = ("value", "ptr")

    def __init__(self, value: float):
        self.value = ctypes.c_double(value)
        self.ptr = ctypes.addressof(self.value)


# made once: cuBLAS only reads them
_ONE, _ZERO = _HostScalar(1.0), _HostScalar(0.0)
_HEURISTIC_WORKSPACE, _HEURISTIC_ANSWERS = 32 << 20, 8
_STATUS_NOT_SUPPORTED = 15     # cublasStatus_t: the heuristic has nothing for this problem


class LtDgemm:
    """``plan``'s DGEMM as ``cublasLtMatmul`` on one GPU, whatever the pointers: the matmul and
    layout descriptors made once, the algorithm chosen once per pointer alignment (the
    first answer of ``cublasLtMatmulAlgoGetHeuristic`` that needs no workspace) and kept.
    Where the heuristic has none for an alignment, that alignment runs ``cublasDgemm_v2``.
    Made by :func:`lt_dgemm` (cached); :meth:`run` enqueues one call."""

    __slots__ = ("plan", "_lib", "_desc", "_layouts", "_ld_bits", "_algos", "_kept")

    def __init__(self, lib: _Libraries, plan: DgemmPlan):
        from nvmath import CudaDataType
        self.plan, self._lib, self._algos, self._kept, self._layouts = plan, lib, {}, [], []
        lt, r64 = lib.lt, int(CudaDataType.CUDA_R_64F)
        self._desc = lib.call("cublasLtMatmulDescCreate", lt.matmul_desc_create, int(lib.blas.ComputeType.COMPUTE_64F),
                           r64)
        for attr, trans in ((lt.MatmulDescAttribute.TRANSA, plan.transa), (lt.MatmulDescAttribute.TRANSB, plan.transb)):
            op = np.array(lib.op_t if trans else lib.op_n, dtype=np.int32)
            lib.call("cublasLtMatmulDescSetAttribute", lt.matmul_desc_set_attribute, self._desc, int(attr),
                  op.ctypes.data, op.nbytes)
        m, n, k = plan.m, plan.n, plan.k
        for rows, cols, ld in ((k, m, plan.lda) if plan.transa else (m, k, plan.lda),
                               (n, k, plan.ldb) if plan.transb else (k, n, plan.ldb), (m, n, plan.ldc)):
            self._layouts.append(lib.call("cublasLtMatrixLayoutCreate", lt.matrix_layout_create, r64, rows, cols, ld))
        # the leading dimensions bound the alignment a kernel may assume, as the pointers do
        self._ld_bits = 8 * (plan.lda | plan.ldb | plan.ldc) | 256

    def __del__(self):
        try:
            lt = self._lib.lt
            for layout in self._layouts:
                lt.matrix_layout_destroy(layout)
            lt.matmul_desc_destroy(self._desc)
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone already
            pass

    def _choose(self, handles: Handles, alignment: int) -> int | None:
        """The address of the algorithm for pointers aligned to ``alignment`` bytes (kept
        alive by this object), or None: the heuristic's first answer that needs no
        workspace. The heuristic is told a workspace of _HEURISTIC_WORKSPACE bytes is
        allowed (its ranking differs: at 4096^3 on the H200 it then ranks first a
        workspace-free algorithm 0.7 % faster than the one it ranks first when told none
        is; docs/bench/2026-11-29-run40-h200x2-lt-probe.txt), but nothing that needs one is
        taken."""
        lib = self._lib
        lt = lib.lt
        pref = lib.call("cublasLtMatmulPreferenceCreate", lt.matmul_preference_create)
        results = np.zeros(_HEURISTIC_ANSWERS, dtype=lt.matmul_heuristic_result_dtype)
        count = np.zeros(1, dtype=np.int32)
        try:
            attrs = lt.MatmulPreferenceAttribute
            settings = [(attrs.MAX_WORKSPACE_BYTES, np.array(_HEURISTIC_WORKSPACE, dtype=np.uint64))]
            settings += [(attr, np.array(alignment, dtype=np.uint32))
                         for attr in (attrs.MIN_ALIGNMENT_A_BYTES, attrs.MIN_ALIGNMENT_B_BYTES,
                                      attrs.MIN_ALIGNMENT_C_BYTES, attrs.MIN_ALIGNMENT_D_BYTES)]
            for attr, value in settings:
                lib.call("cublasLtMatmulPreferenceSetAttribute", lt.matmul_preference_set_attribute, pref,
                      int(attr), value.ctypes.data, value.nbytes)
            a, b, c = self._layouts
            lt.matmul_algo_get_heuristic(handles.lt, self._desc, a, b, c, c, pref, _HEURISTIC_ANSWERS,
                                         results.ctypes.data, count.ctypes.data)
        except lib.errors as exc:
            if exc.status == _STATUS_NOT_SUPPORTED:
                return None
            raise CublasError(f"cublasLtMatmulAlgoGetHeuristic(m={self.plan.m}, n={self.plan.n}, "
                              f"k={self.plan.k})", exc.status) from None
        finally:
            lt.matmul_preference_destroy(pref)
        for i in range(int(count[0])):
            if results["state"][i] == 0 and results["workspace_size"][i] == 0:
                algo = results[i:i + 1].copy()   # the algorithm is the result's first member
                self._kept.append(algo)
                return algo.ctypes.data
        return None

    def descriptors(self) -> tuple[int, tuple[int, int, int]]:
        """The matmul descriptor and the layouts of A, B and C (cuBLASLt objects, as integers)."""
        return self._desc, tuple(self._layouts)

    def algorithm(self, handles: Handles, a_ptr: int, b_ptr: int, c_ptr: int) -> int | None:
        """The address of the algorithm these pointers run (chosen on first need for their
        alignment, then kept), or None where they run ``cublasDgemm_v2``."""
        low = a_ptr | b_ptr | c_ptr | self._ld_bits
        alignment = low & -low
        if alignment not in self._algos:
            self._algos[alignment] = self._choose(handles, alignment)
        return self._algos[alignment]

    def run(self, handles: Handles, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
            stream: int) -> None:
        """Enqueue C = alpha op(A) op(B) + beta C on the CUstream handle ``stream`` with the
        plan's layouts and these pointers (the plan's own are not used; a transposed plan's
        a and b are the caller's B and A, see :func:`call_pointers`). Does not synchronize."""
        low = a_ptr | b_ptr | c_ptr | self._ld_bits
        alignment = low & -low                  # the largest power of two dividing all, at most 256
        algo = self._algos.get(alignment, False)
        if algo is False:
            algo = self.algorithm(handles, a_ptr, b_ptr, c_ptr)
        if algo is None:
            _blas_dgemm(handles, self.plan, a_ptr, b_ptr, c_ptr, alpha, beta, stream)
            return
        a, b, c = self._layouts
        one_alpha = alpha == 1.0
        zero_beta = beta == 0.0 and copysign(1.0, beta) > 0
        alpha_at = _ONE if one_alpha else _HostScalar(alpha)   # read by cuBLAS before the call returns
        beta_at = _ZERO if zero_beta else _HostScalar(beta)
        try:
            self._lib.lt.matmul(handles.lt, self._desc, alpha_at.ptr, a_ptr, a, b_ptr, b, beta_at.ptr, c_ptr, c,
                                c_ptr, c, algo, 0, 0, stream)
        except self._lib.errors as exc:  # the message only on failure: this is the native fast lane's hot path
            raise CublasError(f"cublasLtMatmul(m={self.plan.m}, n={self.plan.n}, k={self.plan.k})",
                              exc.status) from None


def _layout_key(plan: DgemmPlan) -> tuple:
    return plan.transa, plan.transb, plan.m, plan.n, plan.k, plan.lda, plan.ldb, plan.ldc


def lt_dgemm(plan: DgemmPlan, context: int) -> LtDgemm:
    """The :class:`LtDgemm` of ``plan``'s layout on the GPU of ``context`` (made on first
    use, then cached)."""
    key = (context,) + _layout_key(plan)
    found = _LT_PLANS.get(key)
    if found is None:
        found = LtDgemm(library(), plan)
        with _LOCK:
            if len(_LT_PLANS) >= _LT_PLAN_LIMIT:
                _LT_PLANS.clear()
            _LT_PLANS[key] = found
    return found


def _blas_dgemm(handles, plan: DgemmPlan, a_ptr, b_ptr, c_ptr, alpha, beta, stream) -> None:
    lib, handle = handles.lib, handles.blas()
    lib.call("cublasSetStream_v2", lib.blas.set_stream, handle, stream)
    alpha_at, beta_at = _HostScalar(alpha), _HostScalar(beta)
    lib.call(f"cublasDgemm_v2(m={plan.m}, n={plan.n}, k={plan.k})", lib.blas.dgemm, handle,
          lib.op_t if plan.transa else lib.op_n, lib.op_t if plan.transb else lib.op_n, plan.m, plan.n, plan.k,
          alpha_at.ptr, a_ptr, plan.lda, b_ptr, plan.ldb, beta_at.ptr, c_ptr, plan.ldc)


def _read_when_used(plan: DgemmPlan, alpha) -> DgemmPlan:
    """``plan``, or where alpha == 0 the same with k = 0: BLAS's convention is that alpha == 0
    reads neither A nor B, while cuBLAS multiplies them (their NaN and Inf reach C); with
    k = 0 cuBLAS computes C = beta C (beta == 0: C unread)."""
    return dataclasses.replace(plan, k=0) if alpha == 0 and plan.k else plan


def dgemm(plan: DgemmPlan, alpha: float, beta: float, stream, *, pointers: tuple[int, int, int] | None = None,
          context: int | None = None) -> None:
    """Enqueue ``plan`` on ``stream`` (anything :func:`ozaki_cutlass.device.driver.stream_handle`
    takes) in the current CUDA context: C = alpha op(A) op(B) + beta C, cuBLAS semantics
    (beta == 0: C is not read; k == 0 or alpha == 0: C = beta C, A and B unread; m == 0 or
    n == 0: nothing is launched).
    Does not synchronize. ``pointers``: the caller's (A, B, O) to use instead of the
    plan's, for a plan made once for these shapes and strides (its own pointers unused).
    ``context``: the current context as an int, when the caller has just made it so."""
    if plan.m == 0 or plan.n == 0:
        return
    plan = _read_when_used(plan, alpha)
    a_ptr, b_ptr, c_ptr = call_pointers(plan, pointers)
    library()  # a missing libcublas is reported before anything else
    context = current_context() if context is None else context
    found = handles(context)
    if plan.k == 0:  # no product (or alpha == 0): cublasDgemm_v2's documented C = beta C
        _blas_dgemm(found, plan, a_ptr, b_ptr, c_ptr, alpha, beta, driver.stream_handle(stream))
        return
    lt_dgemm(plan, context).run(found, a_ptr, b_ptr, c_ptr, alpha, beta, driver.stream_handle(stream))


def _blas_start(plan: DgemmPlan, alpha, pointers, context, stream):
    """What a call on the (context, thread)'s cuBLAS handle starts with: (the plan as run,
    see :func:`_read_when_used`; the libraries; the handle, set to ``stream``; the (A, B, C)
    pointers)."""
    plan = _read_when_used(plan, alpha)
    lib = library()
    handle = handles(current_context() if context is None else context).blas()
    lib.call("cublasSetStream_v2", lib.blas.set_stream, handle, driver.stream_handle(stream))
    return plan, lib, handle, call_pointers(plan, pointers)


def zgemm(plan: DgemmPlan, ops: tuple[str, str], alpha: complex, beta: complex, stream, *,
          batched: tuple[tuple[int, int, int], int] | None = None, pointers: tuple[int, int, int] | None = None,
          context: int | None = None) -> None:
    """``plan`` on complex128 matrices (leading dimensions in complex elements; pointers as
    :func:`dgemm_strided_batched`'s) as ``cublasZgemm_v2`` with ``ops`` ("N", "T", "C":
    layouts.complex_ops), cuBLAS semantics; ``batched`` = (strides, batch): one
    ``cublasZgemmStridedBatched``. Enqueued on the (context, thread)'s handle, no sync."""
    if plan.m == 0 or plan.n == 0 or (batched is not None and batched[1] == 0):
        return
    plan, lib, handle, (a_ptr, b_ptr, c_ptr) = _blas_start(plan, alpha, pointers, context, stream)
    scalars = (ctypes.c_double * 4)(alpha.real, alpha.imag, beta.real, beta.imag)  # read before the call returns
    at = ctypes.addressof(scalars)
    op = {name: int(getattr(lib.blas.Operation, name)) for name in ops}
    if batched is None:
        lib.call(f"cublasZgemm_v2(m={plan.m}, n={plan.n}, k={plan.k})", lib.blas.zgemm, handle, op[ops[0]],
                 op[ops[1]], plan.m, plan.n, plan.k, at, a_ptr, plan.lda, b_ptr, plan.ldb, at + 16, c_ptr, plan.ldc)
        return
    (sa, sb, sc), batch = batched
    lib.call(f"cublasZgemmStridedBatched(m={plan.m}, n={plan.n}, k={plan.k}, batch={batch})",
             lib.blas.zgemm_strided_batched, handle, op[ops[0]], op[ops[1]], plan.m, plan.n, plan.k, at, a_ptr,
             plan.lda, sa, b_ptr, plan.ldb, sb, at + 16, c_ptr, plan.ldc, sc, batch)


def dgemm_strided_batched(plan: DgemmPlan, strides: tuple[int, int, int], batch: int, alpha: float, beta: float,
                          stream, *, pointers: tuple[int, int, int] | None = None,
                          context: int | None = None) -> None:
    """Enqueue ``batch`` DGEMMs of ``plan``'s layout as one ``cublasDgemmStridedBatched``:
    problem i at the plan's pointers (or the caller's (A, B, O) ``pointers``, placed as
    :func:`call_pointers` does) plus i times ``strides`` (the plan's a, b, c; in elements, 0
    for an operand shared by every problem). Does not synchronize."""
    if plan.m == 0 or plan.n == 0 or batch == 0:
        return
    plan, lib, handle, (a_ptr, b_ptr, c_ptr) = _blas_start(plan, alpha, pointers, context, stream)
    alpha_at, beta_at = _HostScalar(alpha), _HostScalar(beta)
    lib.call(f"cublasDgemmStridedBatched(m={plan.m}, n={plan.n}, k={plan.k}, batch={batch})",
             lib.blas.dgemm_strided_batched, handle, lib.op_t if plan.transa else lib.op_n,
             lib.op_t if plan.transb else lib.op_n, plan.m, plan.n, plan.k, alpha_at.ptr, a_ptr, plan.lda,
             strides[0], b_ptr, plan.ldb, strides[1], beta_at.ptr, c_ptr, plan.ldc, strides[2], batch)


def handle_dgemm(handles, plan: DgemmPlan, pointers, alpha: float, beta: float, stream) -> None:
    """``plan`` by cublasDgemm_v2 on ``handles.blas()`` (a Handles' or the like) on the caller's (A, B, O)."""
    _blas_dgemm(handles, plan, *call_pointers(plan, pointers), alpha, beta, driver.stream_handle(stream))


# --------------------------------------------------------------------------- 2-D copy

def run_copy(plan: CopyPlan, stream) -> None:
    """Enqueue the 2-D copy ``plan`` (from :func:`plan_copy`) on ``stream``."""
    if plan.height == 0:
        return
    cu = driver.bindings()
    p = cu.CUDA_MEMCPY2D()
    p.srcMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    p.srcDevice = plan.src_ptr
    p.srcPitch = plan.src_pitch
    p.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    p.dstDevice = plan.dst_ptr
    p.dstPitch = plan.dst_pitch
    p.WidthInBytes = plan.width
    p.Height = plan.height
    driver.check(cu.cuMemcpy2DAsync(p, driver.as_cu_stream(stream)), "cuMemcpy2DAsync")
