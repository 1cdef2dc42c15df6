"""Complex GEMM: ``ozaki_cutlass.gemm`` on complex128 operands.

The complex call is one real call on realified operands (``ozaki_cutlass.numerics.zgemm``
defines the steps and their NumPy twins): op(A) and op(B) become the real Ahat (m x 2k) and
Bhat (2k x 2n), the real pipeline computes That = Ahat Bhat (alpha 1, beta 0) with every
option of the call (moduli, mode, accuracy contract, policy, kernel, path, timings), and
That, a complex128 m x n matrix in memory, goes through alpha T + beta C in complex. NumPy
operands are realified on the host (the reference's own functions); device operands by
the stage kernels P_realify and P_complex_axpby, into buffers kept per GPU and stream
(``COMPLEX_WORKSPACES``), so a loop of calls allocates nothing but its results. Two steps
are only copies and are skipped where they can be: op(A) not conjugated with unit column
stride is Ahat in its own memory (read as float64), and with alpha 1 and no C the real
call writes T straight into an out of unit column stride.

Native: where the auto policy decides native DGEMM for the realified problem (the same
decision as the real call would make: m x 2n x 2k), or ``policy="native"``, a device call
runs cuBLAS's own ZGEMM on the complex operands when their layouts allow one call (a
conjugated operand must be read transposed, c must be out or unused); otherwise the real
call runs native DGEMM on the realified operands.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np

from .call import check_settings, decide_settings, validate
from .device import cublas, driver
from .device.arch import visible_arch
from .device.arrays import (DeviceArray, Matrix, allocate_like, check_writable, current_stream, describe_input,
                            overlaps)
from .device.driver import is_capturing
from .device.layouts import DgemmPlan, complex_ops, plan_dgemm
from .device.workspace import COMPLEX_WORKSPACES
from .execute import CAPTURED_QUESTION, execute
from .kernels.stages import load_stages
from .numerics.zgemm import apply_op, as_complex_scalar, host_zgemm
from .operands.prepared import Prepared
from .options import as_op, check_sizes
from .paths.launch import PhaseTimer

__all__ = ["zgemm", "realified_on_device"]

_C128 = np.dtype(np.complex128)


class _Borrowed:
    """A float64 matrix with unit column stride (row stride ``ld`` elements, default
    ``cols``) in a workspace buffer or in a complex operand's own memory, shown to the real
    call through the CUDA array interface (v3, with the stream that writes it)."""

    def __init__(self, ptr: int, rows: int, cols: int, stream: int, ld: int | None = None):
        strides = None if ld is None or ld == cols else (8 * ld, 8)
        self.__cuda_array_interface__ = {"shape": (rows, cols), "typestr": "<f8", "data": (ptr, False),
                                         "version": 3, "strides": strides,
                                         "stream": driver.canonical_stream(stream)}


def _describe(x, name: str):
    if isinstance(x, Prepared):
        raise TypeError(f"{name} is a prepared operand: prepared operands are real (float64); complex128 "
                        "operands are passed as arrays")
    return describe_input(x, name, _C128)


def zgemm(a: Any, b: Any, *, c: Any = None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, moduli=None,
          mode=None, out=None, stream=None, kernel=None, path=None, policy: str = "auto", timings=None,
          accuracy=None) -> Any:
    """``ozaki_cutlass.gemm`` for complex128 ``a`` and ``b`` (and ``c``, ``out``); trans_a
    and trans_b take "N", "T", "C" (False / True: "N" / "T"); alpha and beta may be
    complex. The same bits as ``ozaki_cutlass.reference.gemm`` on the same inputs."""
    op_a, op_b = as_op(trans_a, "trans_a"), as_op(trans_b, "trans_b")
    alpha, beta = as_complex_scalar(alpha, "alpha"), as_complex_scalar(beta, "beta")
    # the real call checks them again; here for the calls that compute nothing (alpha == 0, m, n or k 0)
    check_settings(moduli=moduli, mode=mode, kernel=kernel, path=path, policy=policy, timings=timings,
                   stream=stream, accuracy=accuracy)
    A, B = _describe(a, "a"), _describe(b, "b")
    C = _describe(c, "c") if c is not None else None
    O = _describe(out, "out") if out is not None else None
    if O is not None:
        check_writable(out, "out")
    inputs = [("a", A), ("b", B)] + [(n, x) for n, x in (("c", C), ("out", O)) if x is not None]
    host = [isinstance(x, np.ndarray) for _, x in inputs]
    if any(host) and not all(host):
        raise ValueError("a, b, c and out must all be NumPy arrays or all be GPU arrays: got "
                         + ", ".join(f"{n}={'NumPy' if isinstance(x, np.ndarray) else x.kind}" for n, x in inputs))
    m, n, k = _product_shape(A, B, op_a, op_b)
    for name, x in (("c", C), ("out", O)):
        if x is not None and tuple(x.shape) != (m, n):
            raise ValueError(f"{name} must have shape {(m, n)}, got {tuple(x.shape)}")
    if C is None and beta != 0:
        raise ValueError("beta != 0 needs c")
    real = dict(moduli=moduli, mode=mode, kernel=kernel, path=path, policy=policy, timings=timings,
                accuracy=accuracy)
    if timings is not None and not (alpha != 0 and m and n and k):
        timings.update(path="none", kernel=None, policy="alpha == 0 or an empty product: no product computed")
    if host[0]:
        return _on_host(A, B, C, out, op_a, op_b, alpha, beta, stream, real)
    devices = {x.device for _, x in inputs if x.device is not None}
    if len(devices) > 1:
        raise ValueError(f"a, b, c and out are on different GPUs {sorted(devices)}")
    if O is not None:
        same_c = C is not None and (beta == 0 or (O.ptr, O.rs, O.cs) == (C.ptr, C.rs, C.cs))  # as call.py
        for name, x in (("a", A), ("b", B)) + ((("c", C),) if C is not None and not same_c else ()):
            if overlaps(O, x):
                raise ValueError(f"out overlaps {name}: pass an out that shares no memory with a, b "
                                 "(and c, unless out is c itself)")
    return _on_device(A, B, C, O, out, op_a, op_b, alpha, beta, m, n, k, devices.pop() if devices else 0,
                      stream, real)


def _product_shape(A, B, op_a: str, op_b: str) -> tuple[int, int, int]:
    """(m, n, k) of op(A) op(B); ValueError where the inner dimensions differ or the
    realified product (2m, 2n, 2k) is too large."""
    m, k = (A.shape[1], A.shape[0]) if op_a != "N" else A.shape
    kb, n = (B.shape[1], B.shape[0]) if op_b != "N" else B.shape
    if kb != k:
        raise ValueError(f"inner dimensions differ: op(a) is {(m, k)}, op(b) is {(kb, n)}")
    check_sizes(**{"2m": 2 * m, "2n": 2 * n, "2k": 2 * k})  # the realified product
    return m, n, k


def _on_host(A, B, C, out, op_a, op_b, alpha, beta, stream, real: dict):
    def product(a_hat, b_hat):
        return execute(dataclasses.replace(validate(a_hat, b_hat, c=None, alpha=1.0, beta=0.0, trans_a=False,
                                                    trans_b=False, out=None, stream=stream, **real), realified=True))

    result = host_zgemm(apply_op(A, op_a), apply_op(B, op_b), C, alpha, beta, product)
    if out is None:
        return result
    out[...] = result
    return out


def _on_device(A: Matrix, B: Matrix, C, O, out, op_a, op_b, alpha, beta, m, n, k, device, stream, real: dict):
    with driver.on_device(device):
        arch = visible_arch(device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {device} is not supported (compute capability 8.0 or newer needed)")
        kind = A.kind
        sh = current_stream(kind, stream, device)
        for X in (A, B, C, O):  # out too: work on its producer's stream may still use it
            if X is not None and X.stream is not None:
                driver.order_after(X.stream, sh)
        if out is None:
            result, O = allocate_like(kind, m, n, device, _C128)
        else:
            result = out
        if isinstance(result, DeviceArray):  # written on sh now: what its users wait for
            result.stream = sh
        native, why = decide_settings(real, m, 2 * n, 2 * k, arch, device, realified=True)
        zplan = _zgemm_plan(A, B, C, O, op_a, op_b, beta) if native else None
        if zplan is not None:
            timer = PhaseTimer(sh, real["timings"] is not None)
            timer.mark("start")
            cublas.zgemm(*zplan, alpha, beta, sh)
            timer.mark("native")
            if real["timings"] is not None:
                real["timings"].update(timer.result(), path="native", kernel="cublasZgemm_v2", policy=why)
            return result
        stages = load_stages(arch)
        # captured into the caller's CUDA graph, which keeps Ahat's, Bhat's and T's addresses,
        # the stream takes its capture workspace, pinned (device.workspace)
        with COMPLEX_WORKSPACES.hold(device, sh) as ws:
            t = 0
            if alpha != 0 and k and m and n:
                a_hat, b_hat = _realify(stages, ws, A, B, op_a, op_b, m, n, k, sh)
                # alpha 1 and no C: out is T itself (complex_axpby would copy T as it is)
                direct = alpha == 1 and (C is None or beta == 0) and O.cs == 1 and O.rs >= n
                t, t_ld = (O.ptr, O.rs) if direct else (ws.get("t", 16 * m * n), n)
                execute(dataclasses.replace(
                    validate(a_hat, b_hat, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
                             out=_Borrowed(t, m, 2 * n, sh, 2 * t_ld), stream=sh, **real), realified=True))
                if direct:
                    return result
            c_ptr, c_rs, c_cs = (C.ptr, C.rs, C.cs) if C is not None and beta != 0 else (0, 0, 0)
            stages.complex_axpby(t, m, n, n, alpha if t else 0j, beta, c_ptr, c_rs, c_cs, O.ptr, O.rs, O.cs, sh)
        return result


def _realify(stages, ws, A: Matrix, B: Matrix, op_a: str, op_b: str, m: int, n: int, k: int, sh: int):
    """op(A) and op(B) realified (Ahat m x 2k, Bhat 2k x 2n) on stream ``sh``, as _Borrowed
    arrays (the caller holds ``ws.lock`` while they are used). Bhat goes into ``ws``'s
    buffer; so does Ahat, unless op(A) is not conjugated and has unit column stride: then
    its memory, read as float64, is Ahat already (Re and Im interleaved along each row)."""
    X = A.t() if op_a != "N" else A
    if op_a != "C" and X.cs == 1 and X.rs >= k:
        a_hat = _Borrowed(X.ptr, m, 2 * k, sh, 2 * X.rs)
    else:
        ptr = ws.get("a_hat", 16 * m * k)
        stages.realify(X.ptr, m, k, X.rs, X.cs, op_a == "C", False, ptr, sh)
        a_hat = _Borrowed(ptr, m, 2 * k, sh)
    Y = B.t() if op_b != "N" else B
    b_hat = ws.get("b_hat", 32 * k * n)
    stages.realify(Y.ptr, k, n, Y.rs, Y.cs, op_b == "C", True, b_hat, sh)
    return a_hat, _Borrowed(b_hat, 2 * k, 2 * n, sh)


@contextlib.contextmanager
def realified_on_device(a: Any, b: Any, trans_a, trans_b, stream):
    """complex128 GPU operands a and b, op(a) and op(b) realified on their GPU (the
    ``stream`` as gemm reads it): yields (Ahat, Bhat, the stream), real float64 GPU arrays
    valid inside the block (ozaki_cutlass.contract asks about them: the complex call's
    choice is the realified product's). Refuses NumPy, mixed or mismatched operands as
    gemm does."""
    op_a, op_b = as_op(trans_a, "trans_a"), as_op(trans_b, "trans_b")
    A, B = _describe(a, "a"), _describe(b, "b")
    if isinstance(A, np.ndarray) or isinstance(B, np.ndarray):
        raise ValueError("a and b must both be GPU arrays here (NumPy operands: ozaki_cutlass.reference.contract)")
    m, n, k = _product_shape(A, B, op_a, op_b)
    devices = {x.device for x in (A, B) if x.device is not None}
    if len(devices) > 1:
        raise ValueError(f"a and b are on different GPUs {sorted(devices)}")
    device = devices.pop() if devices else 0
    with driver.on_device(device):
        arch = visible_arch(device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {device} is not supported (compute capability 8.0 or newer needed)")
        sh = current_stream(A.kind, stream, device)
        if is_capturing(sh):  # before Ahat and Bhat go into the caller's graph
            raise ValueError(CAPTURED_QUESTION)
        for X in (A, B):
            if X.stream is not None:
                driver.order_after(X.stream, sh)
        with COMPLEX_WORKSPACES.hold(device, sh) as ws:
            yield (*_realify(load_stages(arch), ws, A, B, op_a, op_b, m, n, k, sh), sh)


def _zgemm_plan(A: Matrix, B: Matrix, C, O: Matrix, op_a: str, op_b: str,
                beta: complex) -> tuple[DgemmPlan, tuple[str, str]] | None:
    """(plan, ops) of one cuBLAS ZGEMM computing the call in place, or None."""
    if C is not None and beta != 0 and (C.ptr, C.rs, C.cs) != (O.ptr, O.rs, O.cs):
        return None   # c would have to be copied into out first
    X, Y = (A.t() if op_a != "N" else A), (B.t() if op_b != "N" else B)
    if overlaps(O, X) or overlaps(O, Y):
        return None
    plan = plan_dgemm(X, Y, O)
    ops = complex_ops(plan, op_a == "C", op_b == "C") if plan is not None else None
    return None if ops is None else (plan, ops)
