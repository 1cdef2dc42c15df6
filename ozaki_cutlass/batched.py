"""Batched GEMM: ``ozaki_cutlass.gemm`` on 3-D operands, (batch, m, k) x (batch, k, n), or a
2-D operand broadcast against a 3-D one.

Semantics are those of the loop of single calls C[i] = alpha op(A[i]) op(B[i]) + beta C[i]
(trans flags act on the last two dimensions), with the same bits: each element gets its
own accuracy-contract choice, exactly as a single call would. How it runs:

- where the auto policy decides native for the element shape (the same decision a single
  call makes), or ``policy="native"``, float64 device operands whose batches are evenly
  strided run as ONE ``cublasDgemmStridedBatched`` (a broadcast operand has batch stride
  0), complex128 ones as one ``cublasZgemmStridedBatched`` where cuBLAS can take the
  flags' layouts (a conjugated operand read transposed, as a single complex call); the
  decision and plan are kept per shapes, strides and settings (``DECISIONS.lanes``,
  cleared by ``dispatch.forget_tables()``), so the next such call on CuPy or PyTorch
  arrays with no c, out, stream or timings goes straight to cuBLAS;
- otherwise, for float64 operands on the GPU that emulate where the dispatcher runs the
  element shape on the staged path (or ``path="staged"``), each element's own stages,
  then one INT8 GEMM launch per k chunk for the INT8 products of many elements
  (``paths.staged_batch``: a run of consecutive elements with one moduli count and mode,
  up to ``BATCH_BYTES`` of planes), then each element's CRT; ``timings`` has the phases
  summed and ``int8_launches``;
- otherwise (NumPy operands, complex128, element shapes the dispatcher runs fused, where
  fused calls one by one measured faster than the staged batch) one call per element,
  in order, on the call's stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .call import check_settings, decide_settings, validate
from .device import cublas, driver
from .device.arch import visible_arch
from .device.arrays import Matrix, check_writable, current_stream, describe_input, dtype_of, kind_of
from .device.layouts import complex_ops, plan_dgemm
from .dispatch.policy import DECISIONS
from .execute import execute_batch
from .numerics.zgemm import as_complex_scalar
from .options import as_op, as_trans, check_empty_batch, is_complex_scalar, not_a_matrix
from .paths.launch import PhaseTimer

__all__ = ["ndim_of", "batched_gemm"]

_TIMED = ("scale", "residues", "prologue_gemm", "int8_gemm", "crt", "native", "total")


def ndim_of(x) -> int | None:
    """The number of dimensions of an array gemm may take, or None where it cannot tell."""
    ndim = getattr(x, "ndim", None)
    if isinstance(ndim, int):
        return ndim
    cai = getattr(x, "__cuda_array_interface__", None)
    return len(cai["shape"]) if isinstance(cai, dict) and "shape" in cai else None


class _Element:
    """Element i of a 3-D array of no known library, as a 2-D CUDA-array-interface view."""

    def __init__(self, owner, cai: dict, i: int):
        shape, typestr = tuple(cai["shape"]), cai["typestr"]
        size = np.dtype(typestr).itemsize
        strides = cai.get("strides") or (shape[1] * shape[2] * size, shape[2] * size, size)
        self._owner = owner
        self.__cuda_array_interface__ = dict(cai, shape=shape[1:], strides=tuple(strides[1:]),
                                             data=(int(cai["data"][0]) + i * strides[0], bool(cai["data"][1])))


def _array_ndim(x, name: str) -> int:
    """ndim_of(x), or TypeError naming ``name`` where x is no array gemm takes."""
    nd = ndim_of(x)
    if nd is None:
        raise TypeError(f"{name} must be an array (NumPy, CuPy, PyTorch, or with __cuda_array_interface__), "
                        f"got {type(x).__name__}")
    return nd


def _elements(x, name: str):
    """(batch size or None for a 2-D operand, element getter) of an operand."""
    nd = _array_ndim(x, name)
    if nd == 2:
        return None, (lambda i: x)
    if nd != 3:
        raise not_a_matrix(name, _shape(x))
    if kind_of(x) == "cai":
        cai = x.__cuda_array_interface__
        return int(cai["shape"][0]), (lambda i: _Element(x, cai, i))
    if kind_of(x) in ("numpy", "cupy", "torch"):
        return int(x.shape[0]), (lambda i: x[i])
    raise TypeError(f"{name}: 3-D operands are NumPy, CuPy or PyTorch arrays, or objects with "
                    f"__cuda_array_interface__; got {type(x).__name__}")


def batched_gemm(gemm, a: Any, b: Any, *, c=None, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
                 stream=None, timings=None, **options) -> Any:
    """``gemm`` (ozaki_cutlass.gemm, passed in) over a batch; see the module. ``options``:
    gemm's moduli, mode, kernel, path, policy, accuracy."""
    lane_key = None
    if c is None and out is None and stream is None and timings is None and beta == 0 \
            and not is_complex_scalar(alpha):
        lane_key = _lane_key(a, b, trans_a, trans_b, options)
        lane = DECISIONS.lanes.get(lane_key) if lane_key is not None else None
        result = lane.run(a, b, alpha) if lane is not None else None
        if result is not None:   # None: another GPU is current, or grad; the general path decides
            return result
    check_settings(stream=stream, timings=timings, **options)  # before anything runs, whatever the batch
    nb_a, elem_a = _elements(a, "a")
    nb_b, elem_b = _elements(b, "b")
    if nb_a is not None and nb_b is not None and nb_a != nb_b:
        raise ValueError(f"batch sizes differ: a has {nb_a}, b has {nb_b}")
    batch = nb_a if nb_a is not None else nb_b
    for name, x in (("c", c), ("out", out)):
        if x is not None and _array_ndim(x, name) != 3:
            raise ValueError(f"{name} of a batched call must be 3-D (batch, m, n), got {ndim_of(x)}-D")
    if c is None and beta != 0:
        raise ValueError("beta != 0 needs c")
    elem_c = lambda i: None  # noqa: E731
    if c is not None:
        nb_c, elem_c = _elements(c, "c")
        if nb_c != batch:
            raise ValueError(f"c must have batch size {batch}, got {nb_c}")
    (ra, ca), (rb, cb) = _shape(a)[-2:], _shape(b)[-2:]
    m = ca if as_trans(trans_a, "trans_a") else ra
    n = rb if as_trans(trans_b, "trans_b") else cb
    result = out if out is not None else _allocate(a, b, batch, m, n)
    if out is not None and _shape(out) != (batch, m, n):
        raise ValueError(f"out must have shape {(batch, m, n)}, got {_shape(out)}")
    elem_o = _elements(result, "out")[1]
    if batch == 0:   # nothing runs: what each element would have checked, on the operands' dtypes
        check_empty_batch({n: dtype_of(x) for n, x in (("a", a), ("b", b), ("c", c), ("out", out)) if x is not None},
                          alpha, beta)
        return result
    if out is not None:
        check_writable(out, "out")
        _check_batch_overlap(a, b, c, out, batch, beta)
    lane = _native_batch(a, b, c, result, batch, m, n, alpha, beta, trans_a, trans_b, stream, timings, options)
    if lane is not None:
        if lane_key is not None:
            DECISIONS.remember_lane(lane_key, lane)
        return result
    element_timings = [{} if timings is not None else None for _ in range(batch)]
    if dtype_of(result) == np.float64 and not is_complex_scalar(alpha) and not is_complex_scalar(beta):
        # every element checked before anything is launched; then one run (execute_batch)
        calls = [validate(elem_a(i), elem_b(i), c=elem_c(i), out=elem_o(i), alpha=alpha, beta=beta,
                          trans_a=trans_a, trans_b=trans_b, stream=stream, timings=element_timings[i], **options)
                 for i in range(batch)]
        together = execute_batch(calls)
        if together is not None:
            if timings is not None:
                timings.update(together, batch=batch)
            return result
    else:
        for i in range(batch):  # element 0 checks every setting and shape before anything is launched
            gemm(elem_a(i), elem_b(i), c=elem_c(i), out=elem_o(i), alpha=alpha, beta=beta, trans_a=trans_a,
                  trans_b=trans_b, stream=stream, timings=element_timings[i], **options)
    if timings is not None:  # phases summed; the rest one value where the elements agree, else the list
        totals: dict = {}
        for key in dict.fromkeys(key for t in element_timings for key in t):
            values = [t.get(key) for t in element_timings]
            if key in _TIMED:
                totals[key] = sum(v for v in values if v is not None)
            else:
                totals[key] = values[0] if all(v == values[0] for v in values) else values
        timings.update(totals, batch=batch, batched="one call per element")
    return result


def _check_batch_overlap(a, b, c, out, batch: int, beta) -> None:
    """ValueError where ``out`` meets a or b anywhere in the batch (an element's result
    would overwrite what a later element reads; each element's call sees only its own
    share), or, with beta != 0, meets c in another layout (out=c itself is taken, as in a
    single call). Whole spans of the batch: conservative."""
    def extent(x, name):  # (the byte range, the layout) of x over the batch
        if isinstance(x, np.ndarray):
            ptr = lo = hi = x.__array_interface__["data"][0]
            for size, stride in zip(x.shape, x.strides) if x.size else ():
                lo, hi = (lo + stride * (size - 1), hi) if stride < 0 else (lo, hi + stride * (size - 1))
            return (lo, hi + x.itemsize if x.size else hi), (ptr, x.shape, x.strides)
        X, stride = _element0(x, name, dtype_of(x))
        return _span(X, stride, batch, dtype_of(x).itemsize), (X.ptr, X.rows, X.cols, X.rs, X.cs, stride)

    if isinstance(out, np.ndarray) != isinstance(a, np.ndarray):
        return  # a mix of NumPy and GPU arrays: each element's call refuses it
    (o0, o1), o_layout = extent(out, "out")
    for name, x in (("a", a), ("b", b), ("c", c if beta != 0 else None)):
        if x is None or isinstance(x, np.ndarray) != isinstance(out, np.ndarray):
            continue
        (x0, x1), x_layout = extent(x, name)
        if o0 < x1 and x0 < o1 and (name != "c" or x_layout != o_layout):
            raise ValueError(f"out overlaps {name}: an element's result would overwrite what another element "
                             f"reads; pass an out that shares no memory with a and b"
                             + (" (out=c itself is taken)" if name == "c" else ""))


def _shape(x) -> tuple[int, ...]:
    return tuple(int(d) for d in (getattr(x, "shape", None) or x.__cuda_array_interface__["shape"]))


def _allocate(a, b, batch: int, m: int, n: int):
    """A new (batch, m, n) result of the operands' kind and dtype."""
    three = a if ndim_of(a) == 3 else b
    kind, dtype = kind_of(three), dtype_of(three)
    dtype = np.dtype(np.complex128) if dtype is not None and dtype.kind == "c" else np.dtype(np.float64)
    if kind == "numpy":
        return np.empty((batch, m, n), dtype=dtype)
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(three.device.id):
            return cupy.empty((batch, m, n), dtype=dtype)
    if kind == "torch":
        import torch

        return torch.empty((batch, m, n), dtype=torch.complex128 if dtype.kind == "c" else torch.float64,
                           device=three.device)
    raise ValueError("a batched call on arrays of no known library needs out= (a 3-D array to write into)")


class _Lane:
    """A decided native batch of CuPy or PyTorch arrays, kept for the next calls of the
    same shapes, strides, dtype, GPU, flags and settings (the batched counterpart of
    paths.fast_lane): its plan, batch strides and context, so such a call allocates its
    result and makes one cuBLAS call."""

    def __init__(self, plan, strides, batch: int, shape: tuple[int, int, int], device: int, context: int,
                 kind: str, ops: tuple[str, str] | None):
        self.plan, self.strides, self.batch, self.shape = plan, strides, batch, shape
        self.device, self.context, self.kind, self.ops = device, context, kind, ops   # ops: complex (ZGEMM)

    def run(self, a, b, alpha: float):
        """alpha a b into a new array, or None: the general path takes the call."""
        if self.kind == "cupy":
            import cupy

            if cupy.cuda.runtime.getDevice() != self.device or driver.current_context() != self.context:
                return None
            out = cupy.empty(self.shape, dtype=complex if self.ops else float)
            pointers, stream = (a.data.ptr, b.data.ptr, out.data.ptr), cupy.cuda.get_current_stream().ptr
        else:
            import torch

            if (torch.cuda.current_device() != self.device or a.requires_grad or b.requires_grad
                    or driver.current_context() != self.context):
                return None
            out = torch.empty(self.shape, dtype=torch.complex128 if self.ops else torch.float64, device=a.device)
            pointers, stream = (a.data_ptr(), b.data_ptr(), out.data_ptr()), torch.cuda.current_stream().cuda_stream
        if self.ops:
            cublas.zgemm(self.plan, self.ops, complex(alpha), 0j, stream, batched=(self.strides, self.batch),
                         pointers=pointers, context=self.context)
        else:
            cublas.dgemm_strided_batched(self.plan, self.strides, self.batch, float(alpha), 0.0, stream,
                                         pointers=pointers, context=self.context)
        return out


def _lane_key(a, b, trans_a, trans_b, options) -> tuple | None:
    """The lane key of a call on CuPy or PyTorch arrays (both of one kind), else None."""
    kind = kind_of(a)
    if kind != kind_of(b) or kind not in ("cupy", "torch"):
        return None
    if kind == "cupy":
        parts = (a.shape, a.strides, a.dtype.char, a.data.device_id, b.shape, b.strides, b.dtype.char,
                 b.data.device_id)
    else:
        try:
            parts = (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device())
        except RuntimeError:   # a tensor without strides: the general path says what is wrong
            return None
    try:
        key = ("batched", kind, *parts, trans_a, trans_b, tuple(sorted(options.items())))
        hash(key)
    except TypeError:   # a setting that is not hashable: the general path checks it
        return None
    return key


def _native_batch(a, b, c, out, batch, m, n, alpha, beta, trans_a, trans_b, stream, timings, options):
    """Run the batch as one cublasDgemmStridedBatched (complex128: one
    cublasZgemmStridedBatched) where the auto policy (or policy="native") runs native for
    the element shape (a complex element's: its realified problem's, as a single complex
    call decides) and the layouts allow, and return its _Lane (kept for later calls on
    CuPy or PyTorch arrays); None (nothing done) otherwise."""
    kinds = {kind_of(x) for x in (a, b, out) if x is not None}
    if kinds - {"cupy", "torch", "cai"} or c is not None and beta != 0:
        return None
    dtype = dtype_of(out)
    if dtype not in (np.float64, np.complex128) or any(dtype_of(x) != dtype for x in (a, b)):
        return None
    cplx = dtype == np.complex128
    (A, sa), (B, sb), (O, so) = (_element0(x, name, dtype) for x, name in ((a, "a"), (b, "b"), (out, "out")))
    o0, o1 = _span(O, so, batch, dtype.itemsize)
    if any(o0 < x1 and x0 < o1 for x0, x1 in (_span(A, sa, batch, dtype.itemsize),
                                               _span(B, sb, batch, dtype.itemsize))):
        return None   # out meets a or b (whole spans: conservative)
    op_a, op_b = (as_op(t, name) if cplx else "T" if as_trans(t, name) else "N"
                  for t, name in ((trans_a, "trans_a"), (trans_b, "trans_b")))
    A, B = (A.t() if op_a != "N" else A), (B.t() if op_b != "N" else B)
    devices = {x.device for x in (A, B, O) if x.device is not None}
    if A.cols != B.rows or so == 0 or len(devices) > 1:  # several GPUs: each element's call refuses it
        return None
    device = O.device if O.device is not None else 0
    with driver.on_device(device):
        arch = visible_arch(device)
        if arch is None:
            return None
        native, why = decide_settings(options, m, 2 * n if cplx else n, 2 * A.cols if cplx else A.cols, arch,
                                      device, realified=cplx)
        plan = plan_dgemm(A, B, O) if native and A.cols else None
        ops = complex_ops(plan, op_a == "C", op_b == "C") if cplx and plan is not None else None
        if plan is None or cplx and ops is None:
            return None
        sh = current_stream(next(iter(kinds)), stream, device)
        for x in (A, B, O):
            if x.stream is not None:
                driver.order_after(x.stream, sh)
        strides = (sb, sa, so) if plan.transposed else (sa, sb, so)
        timer = PhaseTimer(sh, timings is not None)
        timer.mark("start")
        if cplx:
            cublas.zgemm(plan, ops, as_complex_scalar(alpha, "alpha"), as_complex_scalar(beta, "beta"), sh,
                         batched=(strides, batch))
        else:
            cublas.dgemm_strided_batched(plan, strides, batch, float(alpha), float(beta), sh)
        timer.mark("native")
        if timings is not None:
            timings.update(timer.result(), path="native", policy=why, batch=batch, batched="one launch",
                           kernel="cublasZgemmStridedBatched" if cplx else "cublasDgemmStridedBatched")
        return _Lane(plan, strides, batch, (batch, m, n), device, cublas.current_context(), next(iter(kinds)), ops)


def _element0(x, name: str, dtype: np.dtype) -> tuple[Matrix, int]:
    """Element 0 of ``x`` (a 2-D operand: itself) as a Matrix of ``dtype``, and the batch
    stride in elements (0 for a 2-D operand: broadcast)."""
    if ndim_of(x) == 2:
        return describe_input(x, name, dtype), 0
    if kind_of(x) in ("cupy", "torch"):   # the framework's own view: its GPU is known
        stride = x.strides[0] // dtype.itemsize if kind_of(x) == "cupy" else x.stride(0)
        return describe_input(x[0], name, dtype), stride
    cai = x.__cuda_array_interface__
    shape, strides = tuple(cai["shape"]), cai.get("strides")
    return (describe_input(_Element(x, cai, 0), name, dtype),
            (strides[0] // dtype.itemsize if strides else shape[1] * shape[2]))


def _span(x: Matrix, stride: int, batch: int, itemsize: int) -> tuple[int, int]:
    """The byte range a batch of ``x`` (element 0, ``stride`` elements apart) covers."""
    last = (x.rows - 1) * x.rs + (x.cols - 1) * x.cs + (batch - 1) * stride
    return x.ptr, x.ptr + itemsize * (last + 1)
