"""``ozaki_cutlass.gemm``: the public entry point.

A call is validated once into a frozen :class:`~ozaki_cutlass.call.Call`
(``ozaki_cutlass.call``), then runs one of the paths (``ozaki_cutlass.paths``): native
DGEMM (cuBLASLt), or the emulation on the staged, fused or prologue path, each of which
mirrors ``ozaki_cutlass.reference`` bit for bit. The common auto-policy call on a shape
already decided native takes the native fast lane first
(``ozaki_cutlass.paths.fast_lane``); a repeated call with an explicit moduli count whose
launches the general path replays as a CUDA graph, the replay lane
(``ozaki_cutlass.paths.replay_lane``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from . import config, dispatch
from .call import validate
from .device import driver
from .device.arch import visible_arch
from .batched import batched_gemm, ndim_of
from .complex_gemm import realified_on_device, zgemm
from .device.arrays import current_stream, dtype_of
from .device.driver import is_capturing
from .device.workspace import COMPLEX_WORKSPACES, WORKSPACES
from .execute import CAPTURED_QUESTION, execute
from .generator import GemmVariant
from .numerics.contract import Choice
from .numerics.zgemm import is_complex_dtype
from .options import as_scalar, check_contract_policy
from .paths.contract import run_contract
from .paths.fast_lane import fast_lane
from .paths.launch import resolve_kernels
from .paths.replay_lane import lane_settings, replay_lane
from .reference import contract as reference_contract

__all__ = ["gemm", "contract", "empty_cache", "memory_held"]


def gemm(a: Any, b: Any, *, c: Any = None, alpha: complex = 1.0, beta: complex = 0.0,
         trans_a: bool | str = False, trans_b: bool | str = False, moduli: int | None = None,
         mode: str | None = None, out: Any = None, stream: Any = None, kernel: str | GemmVariant | None = None,
         path: str | None = None, policy: str = "auto", timings: dict | None = None,
         accuracy: str | float | None = None) -> Any:
    """C = alpha op(A) op(B) + beta C, FP64-accurate, on INT8 tensor cores.

    Same semantics, defaults and bits as :func:`ozaki_cutlass.reference.gemm`. ``a``,
    ``b`` (and ``c``, ``out``) are NumPy arrays (copied to the GPU and back), CuPy arrays,
    PyTorch CUDA tensors, or objects with ``__cuda_array_interface__``; all float64, any
    positive strides, or all complex128 (``ozaki_cutlass.complex_gemm``: alpha and beta
    may be complex, trans_a/trans_b take "N", "T", "C"; for real operands "C" is "T").
    3-D operands (batch, m, k) x (batch, k, n), or a 2-D one broadcast against a 3-D one,
    are a batch (``ozaki_cutlass.batched``): the loop of single calls, bit for bit, with
    one strided-batched cuBLAS call where native runs and shared INT8 launches where the
    emulation runs staged. The result is of the kind given (a new array, or ``out``). Work runs
    on ``stream`` (default: the framework's current stream, else the legacy default
    stream). Device results come back without waiting for the GPU (the NaN/Inf pattern is
    decided on the device); NumPy results, and ``timings``, wait. The dispatcher picks the kernel by
    shape and arch (ozaki_cutlass.dispatch); ``kernel`` (a variant name or GemmVariant)
    and ``path`` ("staged" or "fused") override it; ``path="prologue"`` runs the opt-in
    tile-local prologue prototype (ozaki_cutlass.paths.prologue; never chosen otherwise). Every
    choice gives the same bits.

    ``moduli=None`` (the default) runs the **accuracy contract** (docs/numerics.md): per
    call, the fewest moduli (8..20) whose certified bound ||C - AB||_F <= t || |A||B| ||_F
    meets ``accuracy`` (t = 2^-53 for "dgemm", the default, which makes the bound at most
    DGEMM's classical one divided by k; or a number in [2^-100, 1)), after an exact
    power-of-two equilibration of the inner dimension; ``mode`` defaults to "fast" there.
    It costs one read of 112 bytes per call (the call waits for the scan). Where 20 moduli
    cannot meet the target, ``policy="auto"`` runs native DGEMM (``timings["policy"]``
    says why; not when ``kernel`` or ``path`` is given, nor where 20 moduli still certify
    2^-53) and otherwise 20 moduli run with an
    :class:`~ozaki_cutlass.AccuracyWarning`; :func:`ozaki_cutlass.contract` tells what a
    call chooses. An explicit ``moduli`` (2..20) runs exactly that count, asynchronously,
    with no contract (``accuracy`` must be unset), ``mode`` defaulting to "accurate".

    ``policy``: "auto" (default) runs native cuBLAS DGEMM instead of the emulation where
    that is measured (tuning table) or, on sm_90 outside any table, predicted (H200 cost
    model) to be faster, so that calling this function never loses to DGEMM; it does so
    only when ``moduli``, ``kernel`` and ``path`` are all left unset (an explicit moduli
    count asks for that emulation), ``accuracy`` asks no more than DGEMM's, and cuBLAS
    can take the layouts. Native results carry DGEMM's accuracy and cuBLAS's bits, not
    the reference's. A shape's decision is
    remembered until ozaki_cutlass.dispatch.forget_tables() (call it after changing
    OZAKI_TUNING_TABLE or rewriting the table in a running process). "emulate" always
    emulates (bits equal to ozaki_cutlass.reference.gemm); "native" always runs cuBLAS.
    ``timings``: a dict to fill with per-phase milliseconds (synchronizes); its "path" is
    "staged", "fused" or "native" ("policy" says why for native); "moduli" and "mode" are
    those run, and under the contract "contract" holds the Choice as a dict.

    ``a`` and ``b`` may be operands made by :func:`ozaki_cutlass.prepare` (side "left"
    for ``a``, "right" for ``b``): their per-operand stages are not redone. Such a call
    emulates on the staged path, takes ``moduli`` and ``mode`` from the prepared operand
    when they are left unset, and refuses (ValueError) a mismatch of side, k, moduli,
    mode, GPU or a trans flag. ``mode`` unset means "accurate" otherwise.
    """
    try:  # real scalars take the lanes below; others are checked where the operands' kind is known
        alpha, beta = as_scalar(alpha, "alpha"), as_scalar(beta, "beta")
        real_scalars = True
    except (TypeError, ValueError):
        real_scalars = False
    if (real_scalars and policy == "auto" and c is None and out is None and moduli is None
            and kernel is None and path is None and timings is None and stream is None and not trans_a
            and not trans_b and beta == 0.0 and alpha != 0.0  # alpha == 0: A and B unread (cublas.dgemm)
            and accuracy is None and mode in (None, "accurate", "fast")):
        result = fast_lane(a, b, alpha, mode or "fast")
        if result is not None:
            return result
    lane = None  # the replay lane's key of a repeated explicit-moduli call (paths.replay_lane)
    settings = None if not real_scalars else lane_settings(
        c=c, out=out, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, moduli=moduli, mode=mode,
        kernel=kernel, path=path, policy=policy, stream=stream, timings=timings, accuracy=accuracy)
    if settings is not None:
        lane, result = replay_lane(a, b, out, alpha, settings)
        if result is not None:
            return result
    if ndim_of(a) == 3 or ndim_of(b) == 3:
        return batched_gemm(gemm, a, b, c=c, out=out, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                            stream=stream, timings=timings, moduli=moduli, mode=mode, kernel=kernel, path=path,
                            policy=policy, accuracy=accuracy)
    if _complex(a) or _complex(b):
        return zgemm(a, b, c=c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, moduli=moduli, mode=mode,
                     out=out, stream=stream, kernel=kernel, path=path, policy=policy, timings=timings,
                     accuracy=accuracy)
    if not real_scalars:  # real operands: say what is wrong
        alpha, beta = as_scalar(alpha, "alpha"), as_scalar(beta, "beta")
    call = validate(a, b, c=c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, moduli=moduli, mode=mode,
                    out=out, stream=stream, kernel=kernel, path=path, policy=policy, timings=timings,
                    accuracy=accuracy)
    return execute(dataclasses.replace(call, lane=lane) if lane is not None else call)



def _complex(x) -> bool:
    dtype = dtype_of(x)
    return dtype is not None and is_complex_dtype(dtype)


def contract(a: Any, b: Any, *, trans_a: bool | str = False, trans_b: bool | str = False,
             accuracy: str | float | None = None, mode: str | None = None, policy: str = "auto",
             stream: Any = None) -> Choice:
    """What ``gemm(a, b, ...)`` with these settings and no explicit ``moduli`` chooses under
    the accuracy contract: a :class:`~ozaki_cutlass.numerics.contract.Choice` (the moduli
    count and mode, whether the inner dimension was equilibrated, the certified relative
    bound and the target, or the native fallback and why). GPU arrays are examined on the
    GPU (the contract's stages, no product); NumPy arrays by
    ``ozaki_cutlass.reference.contract``, which makes the same choice. Complex operands:
    the choice of their realified product (numerics.zgemm), which the complex call runs;
    GPU operands are realified on their GPU first. The shape-based native decision of
    ``policy="auto"`` is not part of it (``timings`` of a call shows that).
    ``policy="native"`` runs no contract: ValueError."""
    policy = check_contract_policy(policy)
    if _complex(a) or _complex(b):   # the realified product's choice (numerics.zgemm)
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return reference_contract(a, b, trans_a=trans_a, trans_b=trans_b, accuracy=accuracy, mode=mode,
                                      policy=policy)
        with realified_on_device(a, b, trans_a, trans_b, stream) as (a_hat, b_hat, sh):
            return contract(a_hat, b_hat, accuracy=accuracy, mode=mode, policy=policy, stream=sh)
    call = validate(a, b, c=None, alpha=1.0, beta=0.0, trans_a=trans_a, trans_b=trans_b, moduli=None, mode=mode,
                    out=None, stream=stream, kernel=None, path=None, policy=policy, timings=None, accuracy=accuracy)
    if call.target is None:
        raise ValueError("prepared operands run an explicit moduli count: there is no contract to ask about")
    if call.on_host or not (call.m and call.n and call.k):
        return reference_contract(call.a, call.b, trans_a=call.trans_a, trans_b=call.trans_b,
                                  accuracy=accuracy, mode=mode, policy=policy) if call.on_host else \
            Choice.of_empty_product(call.mode, call.target)
    with driver.on_device(call.device):
        sh = current_stream(call.kind, call.stream, call.device)
        if is_capturing(sh):
            raise ValueError(CAPTURED_QUESTION)
        arch = visible_arch(call.device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {call.device} is not supported (compute capability 8.0 or newer needed)")
        st = resolve_kernels(None, None, arch, dispatch.Problem(call.m, call.n, call.k, call.moduli, arch, contract=True),
                             dispatch.load_table()).stages
        A = call.A.t() if call.trans_a else call.A
        B = call.B.t() if call.trans_b else call.B
        for X in (A, B):
            if X.stream is not None:
                driver.order_after(X.stream, sh)
        with WORKSPACES.hold(call.device, sh) as ws:
            return run_contract(st, A, B, call.m, call.n, call.k, call.target, call.mode, call.may_fall_back, sh,
                                ws, config.overlap())[0]


def empty_cache() -> int:
    """Free the device memory the emulation keeps between calls (its workspaces, on every
    GPU and stream), after the work already enqueued there; returns the bytes freed. Later
    calls allocate again what they need. Kernels, tuning tables and cuBLAS handles stay."""
    return WORKSPACES.clear() + COMPLEX_WORKSPACES.clear()


def memory_held() -> int:
    """Bytes of device memory the emulation's workspaces hold now (what empty_cache frees)."""
    return WORKSPACES.nbytes() + COMPLEX_WORKSPACES.nbytes()
