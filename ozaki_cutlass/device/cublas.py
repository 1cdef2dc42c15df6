"""Native FP64 GEMM: a ctypes binding of cuBLASLt's ``cublasLtMatmul`` for DGEMM, and a 2-D device copy.

What: the few cuBLAS calls the "auto" policy needs to run a problem on the GPU's own FP64
units (DGEMM) where the INT8 emulation would be slower (small or skinny shapes, GPUs with
fast FP64). libcublas and libcublasLt are found by ``cuda.pathfinder`` (part of
cuda-bindings, already a dependency) and opened with ctypes, so there is no CuPy or PyTorch
dependency and nothing to compile. They are loaded on first use, once per process, never at
import time.

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
scratch memory and shares none with calls on other streams: the same inputs give
the same bits on every call, on any stream, concurrent or not, for a given libcublasLt and
GPU. (Pointer alignment is part of the choice: the same numbers at an address aligned
differently may take another kernel, as with any cuBLAS call.) Where the heuristic offers no
algorithm, and for k == 0 (C = beta C, no product), the call goes to ``cublasDgemm_v2`` on a
handle per (context, thread) in cuBLAS's default math mode and host pointer mode. DGEMM runs
on the FP64 units on the GPUs this project targets (sm_80, sm_90; cuBLAS 13's own FP64
emulation, on Blackwell, is opt-in).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from math import copysign

from . import driver
from .layouts import CopyPlan, DgemmPlan, call_pointers, plan_copy

__all__ = ["NativeUnavailable", "CublasError", "Handles", "LtDgemm", "available", "version", "library", "handles",
           "lt_dgemm", "dgemm", "copy_matrix", "run_copy", "EMULATION_SINCE", "EmulationUnavailable",
           "emulation_problem", "handle_dgemm", "current_context"]

_OP_N, _OP_T = 0, 1                 # cublasOperation_t
_POINTER_MODE_HOST = 0              # cublasPointerMode_t
_DEFAULT_MATH = 0                   # cublasMath_t
_MAJOR, _MINOR, _PATCH = 0, 1, 2    # libraryPropertyType
_CUDA_R_64F, _COMPUTE_64F = 1, 70   # cudaDataType, cublasComputeType_t
_DESC_TRANSA, _DESC_TRANSB = 3, 4   # cublasLtMatmulDescAttributes_t
_PREF_MAX_WORKSPACE_BYTES = 1       # cublasLtMatmulPreferenceAttributes_t, then the
_PREF_MIN_ALIGNMENT_BYTES = (5, 6, 7, 8)  # minimum alignments of A, B, C and D

# cublasStatus_t -> name (cublas_api.h)
STATUS_NAMES = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}


class NativeUnavailable(RuntimeError):
    """libcublas cannot be found or opened: native DGEMM is not available here."""


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""

    def __init__(self, what: str, status: int):
        self.status = int(status)
        self.status_name = STATUS_NAMES.get(self.status, f"unknown cublasStatus_t {self.status}")
        super().__init__(f"{what} failed: {self.status_name} ({self.status})")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CublasError(what, status)


# --------------------------------------------------------------------------- library

_p, _int, _dbl, _size = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_size_t
_pp = ctypes.POINTER(ctypes.c_void_p)


class _LtAlgo(ctypes.Structure):
    """cublasLtMatmulAlgo_t: opaque, 64 bytes."""
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _LtHeuristic(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""
    _fields_ = [("algo", _LtAlgo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_SIGNATURES = {
    "cublasCreate_v2": [_pp],
    "cublasSetStream_v2": [_p, _p],
    "cublasSetPointerMode_v2": [_p, _int],
    "cublasSetMathMode": [_p, _int],
    "cublasGetProperty": [_int, ctypes.POINTER(ctypes.c_int)],
    "cublasDgemm_v2": [_p, _int, _int, _int, _int, _int, _dbl, _p, _int, _p, _int, _dbl, _p, _int],
}
_LT_SIGNATURES = {
    "cublasLtCreate": [_pp],
    "cublasLtMatmulDescCreate": [_pp, _int, _int],
    "cublasLtMatmulDescDestroy": [_p],
    "cublasLtMatmulDescSetAttribute": [_p, _int, _p, _size],
    "cublasLtMatrixLayoutCreate": [_pp, _int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64],
    "cublasLtMatrixLayoutDestroy": [_p],
    "cublasLtMatmulPreferenceCreate": [_pp],
    "cublasLtMatmulPreferenceDestroy": [_p],
    "cublasLtMatmulPreferenceSetAttribute": [_p, _int, _p, _size],
    "cublasLtMatmulAlgoGetHeuristic": [_p, _p, _p, _p, _p, _p, _p, _int, ctypes.POINTER(_LtHeuristic),
                                       ctypes.POINTER(ctypes.c_int)],
    # the C signature, and the load check; LtDgemm.run calls _Libraries.matmul (the same symbol, no argtypes)
    "cublasLtMatmul": [_p, _p, _dbl, _p, _p, _p, _p, _dbl, _p, _p, _p, _p, ctypes.POINTER(_LtAlgo), _p, _size, _p],
}


@dataclass(frozen=True, slots=True)
class _Libraries:
    blas: ctypes.CDLL   # libcublas: the handle's settings, version, k == 0 and fallback DGEMMs
    lt: ctypes.CDLL     # libcublasLt: every other DGEMM
    # cublasLtMatmul without argtypes, for LtDgemm.run: every argument is passed as a ctypes
    # object already (pointers, size_t), which skips a Python conversion per argument
    matmul: object


_LOCK = threading.Lock()
_LIB: _Libraries | None = None
_LOAD_ERROR: str | None = None      # the first failure, repeated without searching again
_LT_PLANS: dict[tuple, "LtDgemm"] = {}
_LT_PLAN_LIMIT = 4096

_HOW_TO_FIX = ("install the CUDA toolkit (and put its lib64 on LD_LIBRARY_PATH or set CUDA_HOME) "
               "or the cuBLAS wheel matching the driver (pip install nvidia-cublas for CUDA 13, "
               "nvidia-cublas-cu12 for CUDA 12)")


def _open_one(pathfinder, name: str, signatures: dict) -> ctypes.CDLL:
    try:
        loaded = pathfinder.load_nvidia_dynamic_lib(name)
    except Exception as exc:  # noqa: BLE001 - pathfinder raises its own RuntimeError subclasses
        raise NativeUnavailable(f"lib{name} (cuBLAS, looked up by cuda.pathfinder as \"{name}\": "
                                f"NVIDIA wheels, conda, the system loader, CUDA_PATH/CUDA_HOME) was "
                                f"not found ({str(exc).strip()}); to use native DGEMM, {_HOW_TO_FIX}") from exc
    if not loaded.abs_path:
        raise NativeUnavailable(f"cuda.pathfinder loaded lib{name} but reported no path for it")
    try:
        lib = ctypes.CDLL(loaded.abs_path)
        for fn_name, argtypes in signatures.items():
            fn = getattr(lib, fn_name)
            fn.restype, fn.argtypes = ctypes.c_int, argtypes
    except (OSError, AttributeError) as exc:
        raise NativeUnavailable(f"{loaded.abs_path} could not be used as lib{name} ({exc}); "
                                f"to use native DGEMM, {_HOW_TO_FIX}") from exc
    return lib


def _open() -> _Libraries:
    try:
        from cuda import pathfinder
    except ImportError as exc:
        raise NativeUnavailable(f"native DGEMM needs cuda.pathfinder (installed with cuda-bindings) "
                                f"to find libcublas: {exc}") from exc
    blas = _open_one(pathfinder, "cublas", _SIGNATURES)
    lt = _open_one(pathfinder, "cublasLt", _LT_SIGNATURES)
    matmul = lt["cublasLtMatmul"]   # a second function object: argtypes None, restype int
    matmul.restype = ctypes.c_int
    return _Libraries(blas, lt, matmul)


def library() -> _Libraries:
    """libcublas and libcublasLt, opened on the first call in this process; a failure is
    remembered and raised again (as NativeUnavailable) without searching again."""
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
    lib = library().blas
    parts = []
    for which in (_MAJOR, _MINOR, _PATCH):
        value = ctypes.c_int()
        _check(lib.cublasGetProperty(which, ctypes.byref(value)), "cublasGetProperty")
        parts.append(value.value)
    return parts[0], parts[1], parts[2]


def current_context() -> int:
    """The CUDA context current on this thread (the GPU a handle is made for); CudaError if none."""
    current = int(driver.check(driver.bindings().cuCtxGetCurrent(), "cuCtxGetCurrent"))
    if current == 0:
        raise driver.CudaError("cuBLAS: no CUDA context is current on this thread "
                              "(ozaki_cutlass.device.driver.ensure_context makes the device's primary one current)")
    return current


class Handles:
    """The cuBLASLt handle of one (context, thread), and its cuBLAS handle made on first need."""

    __slots__ = ("lib", "lt", "_blas")

    def __init__(self, lib: _Libraries):
        self.lib, self._blas = lib, None
        self.lt = ctypes.c_void_p()
        _check(lib.lt.cublasLtCreate(ctypes.byref(self.lt)), "cublasLtCreate")

    def blas(self) -> ctypes.c_void_p:
        if self._blas is None:
            handle, lib = ctypes.c_void_p(), self.lib.blas
            _check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate_v2")
            _check(lib.cublasSetPointerMode_v2(handle, _POINTER_MODE_HOST), "cublasSetPointerMode_v2")
            _check(lib.cublasSetMathMode(handle, _DEFAULT_MATH), "cublasSetMathMode")
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


class LtDgemm:
    """``plan``'s DGEMM as ``cublasLtMatmul`` on one GPU, whatever the pointers: the matmul and
    layout descriptors made once, the algorithm chosen once per pointer alignment (the
    first answer of ``cublasLtMatmulAlgoGetHeuristic`` that needs no workspace) and kept.
    Where the heuristic has none for an alignment, that alignment runs ``cublasDgemm_v2``.
    Made by :func:`lt_dgemm` (cached); :meth:`run` enqueues one call."""

    __slots__ = ("plan", "_desc", "_layouts", "_ld_bits", "_algos")

    def __init__(self, lt: ctypes.CDLL, plan: DgemmPlan):
        self.plan, self._algos = plan, {}
        self._desc, self._layouts = ctypes.c_void_p(), []
        _check(lt.cublasLtMatmulDescCreate(ctypes.byref(self._desc), _COMPUTE_64F, _CUDA_R_64F),
               "cublasLtMatmulDescCreate")
        for attr, trans in ((_DESC_TRANSA, plan.transa), (_DESC_TRANSB, plan.transb)):
            op = ctypes.c_int32(_OP_T if trans else _OP_N)
            _check(lt.cublasLtMatmulDescSetAttribute(self._desc, attr, ctypes.byref(op), 4),
                   "cublasLtMatmulDescSetAttribute")
        m, n, k = plan.m, plan.n, plan.k
        for rows, cols, ld in ((k, m, plan.lda) if plan.transa else (m, k, plan.lda),
                               (n, k, plan.ldb) if plan.transb else (k, n, plan.ldb), (m, n, plan.ldc)):
            layout = ctypes.c_void_p()
            _check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), _CUDA_R_64F, rows, cols, ld),
                   "cublasLtMatrixLayoutCreate")
            self._layouts.append(layout)
        # the leading dimensions bound the alignment a kernel may assume, as the pointers do
        self._ld_bits = 8 * (plan.lda | plan.ldb | plan.ldc) | 256

    def __del__(self):
        lib = _LIB
        try:
            for layout in self._layouts:
                lib.lt.cublasLtMatrixLayoutDestroy(layout)
            lib.lt.cublasLtMatmulDescDestroy(self._desc)
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone already
            pass

    def _choose(self, handles: Handles, alignment: int):
        """The algorithm for pointers aligned to ``alignment`` bytes, or None: the
        heuristic's first answer that needs no workspace. The heuristic is told a workspace
        of _HEURISTIC_WORKSPACE bytes is allowed (its ranking differs: at 4096^3 on the H200
        it then ranks first a workspace-free algorithm 0.7 % faster than the one it ranks
        first when told none is; docs/bench/2026-11-29-run40-h200x2-lt-probe.txt), but
        nothing that needs one is taken."""
        lt, pref = handles.lib.lt, ctypes.c_void_p()
        _check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "cublasLtMatmulPreferenceCreate")
        try:
            settings = [(_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(_HEURISTIC_WORKSPACE))]
            settings += [(attr, ctypes.c_uint32(alignment)) for attr in _PREF_MIN_ALIGNMENT_BYTES]
            for attr, value in settings:
                _check(lt.cublasLtMatmulPreferenceSetAttribute(pref, attr, ctypes.byref(value),
                                                               ctypes.sizeof(value)),
                       "cublasLtMatmulPreferenceSetAttribute")
            results, count = (_LtHeuristic * _HEURISTIC_ANSWERS)(), ctypes.c_int(0)
            a, b, c = self._layouts
            status = lt.cublasLtMatmulAlgoGetHeuristic(handles.lt, self._desc, a, b, c, c, pref, _HEURISTIC_ANSWERS,
                                                       results, ctypes.byref(count))
        finally:
            lt.cublasLtMatmulPreferenceDestroy(pref)
        if status == _NOT_SUPPORTED:
            return None
        _check(status, f"cublasLtMatmulAlgoGetHeuristic(m={self.plan.m}, n={self.plan.n}, k={self.plan.k})")
        return next((r.algo for r in results[:count.value] if r.state == 0 and r.workspace_size == 0), None)

    def run(self, handles: Handles, a_ptr: int, b_ptr: int, c_ptr: int, alpha: float, beta: float,
            stream: int) -> None:
        """Enqueue C = alpha op(A) op(B) + beta C on the CUstream handle ``stream`` with the
        plan's layouts and these pointers (the plan's own are not used; a transposed plan's
        a and b are the caller's B and A, see :func:`call_pointers`). Does not synchronize."""
        low = a_ptr | b_ptr | c_ptr | self._ld_bits
        alignment = low & -low                  # the largest power of two dividing all, at most 256
        algo = self._algos.get(alignment, False)
        if algo is False:
            found = self._choose(handles, alignment)
            algo = self._algos[alignment] = None if found is None else ctypes.pointer(found)
        if algo is None:
            _blas_dgemm(handles, self.plan, a_ptr, b_ptr, c_ptr, alpha, beta, stream)
            return
        a, b, c = self._layouts
        c_ptr = _p(c_ptr)
        # every argument a ctypes object of the C parameter's type (the raw function has no
        # argtypes): pointers as c_void_p or pointer instances, the workspace size as size_t
        status = handles.lib.matmul(
            handles.lt, self._desc, _ONE if alpha == 1.0 else ctypes.pointer(ctypes.c_double(alpha)),
            _p(a_ptr), a, _p(b_ptr), b,
            _ZERO if beta == 0.0 and copysign(1.0, beta) > 0 else ctypes.pointer(ctypes.c_double(beta)),
            c_ptr, c, c_ptr, c, algo, None, _NO_WORKSPACE, _p(stream))
        if status != 0:  # the message only on failure: this is the native fast lane's hot path
            raise CublasError(f"cublasLtMatmul(m={self.plan.m}, n={self.plan.n}, k={self.plan.k})", status)


_NOT_SUPPORTED = 15
_HEURISTIC_WORKSPACE, _HEURISTIC_ANSWERS = 32 << 20, 8
# made once: cuBLAS only reads them
_ONE, _ZERO = ctypes.pointer(ctypes.c_double(1.0)), ctypes.pointer(ctypes.c_double(0.0))
_NO_WORKSPACE = ctypes.c_size_t(0)


def _layout_key(plan: DgemmPlan) -> tuple:
    return plan.transa, plan.transb, plan.m, plan.n, plan.k, plan.lda, plan.ldb, plan.ldc


def lt_dgemm(plan: DgemmPlan, context: int) -> LtDgemm:
    """The :class:`LtDgemm` of ``plan``'s layout on the GPU of ``context`` (made on first
    use, then cached)."""
    key = (context,) + _layout_key(plan)
    found = _LT_PLANS.get(key)
    if found is None:
        found = LtDgemm(library().lt, plan)
        with _LOCK:
            if len(_LT_PLANS) >= _LT_PLAN_LIMIT:
                _LT_PLANS.clear()
            _LT_PLANS[key] = found
    return found


def _blas_dgemm(handles: Handles, plan: DgemmPlan, a_ptr, b_ptr, c_ptr, alpha, beta, stream) -> None:
    lib, handle = handles.lib.blas, handles.blas()
    _check(lib.cublasSetStream_v2(handle, stream), "cublasSetStream_v2")
    status = lib.cublasDgemm_v2(handle, _OP_T if plan.transa else _OP_N, _OP_T if plan.transb else _OP_N,
                                plan.m, plan.n, plan.k, ctypes.c_double(alpha), a_ptr, plan.lda,
                                b_ptr, plan.ldb, ctypes.c_double(beta), c_ptr, plan.ldc)
    if status != 0:
        raise CublasError(f"cublasDgemm_v2(m={plan.m}, n={plan.n}, k={plan.k})", status)


def dgemm(plan: DgemmPlan, alpha: float, beta: float, stream, *, pointers: tuple[int, int, int] | None = None,
          context: int | None = None) -> None:
    """Enqueue ``plan`` on ``stream`` (anything :func:`ozaki_cutlass.device.driver.stream_handle`
    takes) in the current CUDA context: C = alpha op(A) op(B) + beta C, cuBLAS semantics
    (beta == 0: C is not read; k == 0: C = beta C; m == 0 or n == 0: nothing is launched).
    Does not synchronize. ``pointers``: the caller's (A, B, O) to use instead of the
    plan's, for a plan made once for these shapes and strides (its own pointers unused).
    ``context``: the current context as an int, when the caller has just made it so."""
    if plan.m == 0 or plan.n == 0:
        return
    a_ptr, b_ptr, c_ptr = call_pointers(plan, pointers)
    library()  # a missing libcublas is reported before anything else
    context = current_context() if context is None else context
    found = handles(context)
    if plan.k == 0:  # no product: cublasDgemm_v2's documented C = beta C
        _blas_dgemm(found, plan, a_ptr, b_ptr, c_ptr, alpha, beta, driver.stream_handle(stream))
        return
    lt_dgemm(plan, context).run(found, a_ptr, b_ptr, c_ptr, alpha, beta, driver.stream_handle(stream))


def handle_dgemm(handles, plan: DgemmPlan, pointers, alpha: float, beta: float, stream) -> None:
    """``plan`` by cublasDgemm_v2 on ``handles.blas()`` (a Handles' or the like) on the caller's (A, B, O)."""
    _blas_dgemm(handles, plan, *call_pointers(plan, pointers), alpha, beta, driver.stream_handle(stream))


# --------------------------------------------------------------------------- 2-D copy

def copy_matrix(src, dst, rows: int, cols: int, stream) -> bool:
    """Enqueue a copy of device matrix ``src`` into ``dst`` (both rows x cols float64,
    Matrix-like) on ``stream`` with ``cuMemcpy2DAsync``; False, with nothing done, when
    their layouts do not allow one 2-D copy (see :func:`plan_copy`): the caller copies
    another way. Does not synchronize."""
    plan = plan_copy(src, dst, rows, cols)
    if plan is None:
        return False
    run_copy(plan, stream)
    return True


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


# --------------------------------------------------------------------------- cuBLAS's FP64 emulation

# What ``ozaki_cutlass.device.cublas_emulation`` calls (never ``gemm``). cuBLAS 13.1 (CUDA
# 13.0 Update 2) brought them (the strategy setter came with 12.9's FP32 emulation).
EMULATION_SINCE = (13, 1)
_EMULATION_SIGNATURES = {
    "cublasDestroy_v2": [_p],
    "cublasSetWorkspace_v2": [_p, _p, _size],
    "cublasSetEmulationStrategy": [_p, _int],
    "cublasSetFixedPointEmulationMantissaControl": [_p, _int],
    "cublasSetFixedPointEmulationMantissaBitCountPointer": [_p, _p],
}
_EMULATION_STATE: list = []   # [""] once bound, [reason] where it cannot be


class EmulationUnavailable(RuntimeError):
    """cuBLAS's FP64 emulation cannot be called here (the message says why)."""


def _bind_emulation() -> str:
    try:
        lib, have = library().blas, version()
    except (NativeUnavailable, CublasError) as exc:
        return f"libcublas is not usable here ({exc})"
    missing = [name for name in _EMULATION_SIGNATURES if not hasattr(lib, name)]
    if have[:2] < EMULATION_SINCE or missing:
        return (f"libcublas {'.'.join(map(str, have))} has no FP64 emulation (cuBLAS 13.1, from CUDA 13.0 "
                "Update 2, brought it" + (f"; {', '.join(missing)} missing)" if missing else ")"))
    for name, argtypes in _EMULATION_SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = ctypes.c_int, argtypes
    return ""


def emulation_problem() -> str | None:
    """Why the libcublas in use cannot run cuBLAS's FP64 emulation (too old, a function or
    the library missing), or None: its functions are bound. Asked once (no GPU needed)."""
    if not _EMULATION_STATE:  # two threads at once bind twice, to the same answer
        _EMULATION_STATE.append(_bind_emulation())
    return _EMULATION_STATE[0] or None
