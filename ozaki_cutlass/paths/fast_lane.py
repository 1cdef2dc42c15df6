"""The native fast lane of ``ozaki_cutlass.gemm``: the common auto-policy call on a shape
already decided native goes straight to cuBLASLt.

The call: two CuPy arrays or two PyTorch CUDA tensors, float64, no c, out, transposes,
stream or timings, alpha != 0 (cuBLASLt would read A and B). Anything else, and the
first call of a shape (which records the decision, ``ozaki_cutlass.paths.native.decide``),
take the general path, and so does a call where another GPU, or a context other than the
GPU's primary one (which CuPy and PyTorch make current), is current: the general path
switches to it. Keys hold only
what each framework gives cheaply (shapes, strides, dtype, GPU, mode); the lane for one is
worked out once, and kept with the decisions (``dispatch.policy.DECISIONS``) until
``ozaki_cutlass.dispatch.forget_tables()``. So calling ozaki_cutlass.gemm costs no more
host time than the framework's own matmul (measured: scripts/native_call_cost.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..device import cublas, driver
from ..device.arrays import Matrix, lane_function
from ..device.layouts import plan_dgemm
from ..dispatch.policy import DECISIONS
from .native import decision_key

__all__ = ["Lane", "fast_lane"]

_LANES = DECISIONS.lanes  # a framework's key -> Lane, or None: the general path (cleared with the decisions)
_FRAMEWORK_LANES: dict[type, object] = {}  # array type -> its lane function (fixed for the process)


@dataclass(frozen=True, slots=True)
class Lane:
    shape: tuple[int, int]  # the result's
    swap: bool              # the cuBLAS call computes O^T: its first operand is the caller's b
    lt: cublas.LtDgemm
    context: int            # the GPU's primary context, the one CuPy and PyTorch make current


def fast_lane(a, b, alpha: float, mode: str):
    """The result of alpha a b through the lane, or None: the general path takes the call."""
    kind = type(a)
    if type(b) is not kind:
        return None
    lane = _FRAMEWORK_LANES.get(kind)
    if lane is None:
        lane = _FRAMEWORK_LANES.setdefault(kind, lane_function(kind, _cupy_lane, _torch_lane, _none))
    return lane(a, b, alpha, mode)


def _none(a, b, alpha, mode):
    """No lane: the general path takes every call."""
    return None


def _cupy_lane(cupy, a, b, alpha, mode):
    da, db = a.data, b.data
    key = (a.shape, a.strides, a.dtype.char, da.device_id, b.shape, b.strides, b.dtype.char, db.device_id, mode)
    lane = _LANES.get(key, False)
    if lane is False:
        lane = _new_lane(key, 1, key[2] == key[6] == "d")
    # only on the current GPU, its primary context current (the general path switches to it)
    if lane is None or cupy.cuda.runtime.getDevice() != key[3] or driver.current_context() != lane.context:
        return None
    out = cupy.ndarray(lane.shape, np.float64)  # cupy.empty without its Python frame
    pa, pb = (db.ptr, da.ptr) if lane.swap else (da.ptr, db.ptr)
    lane.lt.run(cublas.handles(lane.context), pa, pb, out.data.ptr, alpha, 0.0,
                cupy.cuda.get_current_stream().ptr)
    return out


def _torch_lane(current_device, current_stream, a, b, alpha, mode):
    try:  # get_device(): the CUDA ordinal, -1 on the CPU
        key = (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device(), mode)
    except RuntimeError:  # a tensor without strides (sparse): the general path says what is wrong
        return None
    lane = _LANES.get(key, False)
    if lane is False:
        import torch

        lane = _new_lane(key, 8, key[2] is key[6] is torch.float64 and key[3] >= 0)
    # a tensor that requires grad: the general path refuses it (no gradient is recorded)
    if (lane is None or current_device() != key[3] or a.requires_grad or b.requires_grad
            or driver.current_context() != lane.context):
        return None
    out = a.new_empty(lane.shape)  # a's dtype (float64) and GPU
    pa, pb = (b.data_ptr(), a.data_ptr()) if lane.swap else (a.data_ptr(), b.data_ptr())
    lane.lt.run(cublas.handles(lane.context), pa, pb, out.data_ptr(), alpha, 0.0, current_stream(key[3]))
    return out


def _new_lane(key: tuple, stride_unit: int, float64: bool):
    """The lane of a framework's ``key`` (shape, strides in units of ``stride_unit`` bytes,
    dtype and GPU of a, the same of b, mode), stored, or None: these arrays take the
    general path (``float64``: both are float64 arrays on a GPU). Nothing is stored while
    the general path has not yet decided the shape under the tuning table in force. A
    stored lane holds until ozaki_cutlass.dispatch.forget_tables() (which a process that changes
    OZAKI_TUNING_TABLE or rewrites its table calls): reading the setting on every call
    would cost the lane a tenth of its time."""
    (a_shape, a_strides, _, device, b_shape, b_strides, _, b_device, mode) = key[:9]
    lane = None
    strides = [s * stride_unit for s in a_strides + b_strides]
    if (float64 and len(a_shape) == len(b_shape) == 2 and device == b_device and a_shape[1] == b_shape[0]
            and all(s % 8 == 0 for s in strides)):
        (m, k), n = a_shape, b_shape[1]
        decided = DECISIONS.native.get(decision_key(m, n, k, mode, device))
        if decided is None:
            return None
        context = driver.primary_context(device)
        if decided and context is not None and min(m, n, k) > 0:
            ra, ca, rb, cb = (s // 8 for s in strides)
            plan = plan_dgemm(Matrix(0, m, k, ra, ca, "", device, None),
                                      Matrix(0, k, n, rb, cb, "", device, None),
                                      Matrix(0, m, n, n, 1, "", device, None))
            if plan is not None:
                lane = Lane((m, n), plan.transposed, cublas.lt_dgemm(plan, context), context)
    DECISIONS.remember_lane(key, lane)
    return lane
