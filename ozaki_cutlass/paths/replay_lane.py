"""The replay lane of ``ozaki_cutlass.gemm``: a repeated emulated call with an explicit
moduli count goes straight to the CUDA graph of its launches.

Where a call replays its launches as a graph (``device.graphs.Replays``, ``execute.py``),
the Python in front of the graph's launch (checks, dispatch, the workspace, the graph's
key) decides again what the earlier call of the same arrays and settings decided, while
the GPU of a call timed alone waits for it (docs/benchmarks.md, "A call alone and calls
back to back"). The lane keeps, per key of what a framework gives cheaply (CuPy arrays or
PyTorch CUDA tensors: shape, strides, dtype, GPU and address of a and b, the current
stream, the output's where one is given, and the settings), what such a call replayed:
its workspace, its graph's key and its launch. A later call of the same key launches that
graph and then its own finish (into its output, a new one where none is given, with its
alpha) under the workspace's lock: the kernels and arguments of
the general path's replay, so the same bits.

Taken only by calls with an ``int`` ``moduli``, ``policy`` "auto" or "emulate", alpha != 0,
beta == 0 and no c, transposes, kernel, stream, timings or accuracy (``out`` may be given:
its shape, strides and address are part of the key), and only once the general path has
replayed the same call (the lane is learned there: ``learn``).
The general path takes the call where the graph has gone since (a workspace buffer freed
or replaced, the graph evicted), where ``OZAKI_GRAPHS=0`` or ``OZAKI_OVERLAP`` changed,
where the stream is being captured, where another GPU or a context other than the GPU's
primary one (which CuPy and PyTorch make current) is current, or a tensor requires grad.
Lanes are kept with the auto policy's decisions (``dispatch.policy.DECISIONS``) and
forgotten with them (``ozaki_cutlass.dispatch.forget_tables``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from .. import config
from ..device import driver
from ..device.arrays import Matrix, lane_function
from ..device.workspace import Workspace
from ..dispatch.policy import DECISIONS
from .launch import Launch

__all__ = ["Replay", "replay_lane", "learn", "lane_settings", "lane_stream_key"]

_TAG = "replay"  # first item of every key here (the native lane's keys share DECISIONS.lanes)
_FRAMEWORKS: dict[type, object] = {}  # array type -> its key-and-replay function (fixed for the process)


@dataclass(frozen=True, slots=True)
class Replay:
    """What a call that replayed its graph leaves for later calls of its lane key."""

    ws: Workspace
    key: Hashable    # the graph's key in ws.replays (paths.launch.replay_key)
    launch: Launch   # the call's launch, holding no array (each call gives its O and alpha)
    overlap: bool    # config.overlap() when it ran (part of the graph's key)
    device: int
    context: int     # the GPU's primary context (the graph's), which must be current to launch it
    stream: int


def lane_settings(*, c, out, alpha: float, beta: float, trans_a, trans_b, moduli, mode, kernel, path, policy,
                  stream, timings, accuracy) -> tuple | None:
    """The settings part of a lane key for a gemm call (alpha and beta already real
    numbers), or None where the call takes no lane."""
    if (type(moduli) is not int or c is not None or kernel is not None or stream is not None
            or timings is not None or accuracy is not None or trans_a is not False or trans_b is not False
            or beta != 0.0 or alpha == 0.0 or policy not in ("auto", "emulate")
            or not (mode is None or type(mode) is str) or not (path is None or type(path) is str)):
        return None  # (a mode or path of another type, unhashable say: the general path says what is wrong)
    return (moduli, mode, path, policy)


def replay_lane(a, b, out, alpha: float, settings: tuple) -> tuple[tuple | None, object]:
    """(the lane key of ``a``, ``b``, ``out`` (None: a new result) and ``settings``, None
    where these arrays have none; the call's result through the lane, None where the
    general path takes the call)."""
    kind = type(a)
    if type(b) is not kind or (out is not None and type(out) is not kind):
        return None, None
    lane = _FRAMEWORKS.get(kind)
    if lane is None:
        lane = _FRAMEWORKS.setdefault(kind, lane_function(kind, _cupy_lane, _torch_lane, _none))
    return lane(a, b, out, alpha, settings)


def lane_stream_key(key: tuple):
    """The current stream's driver.stream_key that lane key ``key`` holds (its item before
    the settings): the general path's workspace is found with it, not asked of the driver
    again (3.4 us on an H100, driver 580.159.04)."""
    return key[-2]


def learn(key: tuple, ws: Workspace, replay_key: Hashable, L: Launch, overlap: bool, device: int) -> None:
    """Keep, under lane key ``key``, what the call ``L`` that just replayed (or captured and
    launched) the graph ``replay_key`` of workspace ``ws`` needs to be replayed again."""
    context = driver.primary_context(device)
    if context is None:  # (not after a launch on the GPU; no lane rather than a wrong one)
        return
    bare = dataclasses.replace(L, A=_bare(L.A), B=_bare(L.B), O=_bare(L.O))
    DECISIONS.remember_lane(key, Replay(ws, replay_key, bare, overlap, device, context, L.stream))


def _bare(X: Matrix) -> Matrix:
    return dataclasses.replace(X, owner=None, stream=None)


def _replay(entry: Replay, alpha: float, allocate):
    """The call through ``entry`` (``allocate()``: the result, the caller's out or a new
    m x n float64 array of the framework, and its device pointer), or None where its
    graph is not there to launch. (A stream being captured has a lane key of its own,
    driver.stream_key's, which no call learns: the caller's capture never gets here.)"""
    if not config.graphs() or config.overlap() != entry.overlap or driver.current_context() != entry.context:
        return None
    L = entry.launch
    with entry.ws.lock:
        launched, finish = entry.ws.replays.replay(entry.key, entry.stream)
        if not launched:
            return None
        result, ptr = allocate()
        finish(dataclasses.replace(L, O=dataclasses.replace(L.O, ptr=ptr), alpha=alpha))
    entry.ws.touch()  # in use: not the pool's to close for a new stream's (device.workspace)
    return result


def _none(a, b, out, alpha, settings):
    """No lane: the general path takes every call."""
    return None, None


def _cupy_lane(cupy, a, b, out, alpha, settings):
    da, db = a.data, b.data
    device = da.device_id
    if cupy.cuda.runtime.getDevice() != device:  # the stream read below is the current GPU's
        return None, None
    o = None if out is None else (out.shape, out.strides, out.dtype.char, out.data.device_id, out.data.ptr)
    key = (_TAG, a.shape, a.strides, a.dtype.char, device, da.ptr, b.shape, b.strides, b.dtype.char,
           db.device_id, db.ptr, o, driver.stream_key(cupy.cuda.get_current_stream().ptr), settings)
    entry = DECISIONS.lanes.get(key)
    if entry is None:
        return key, None

    def allocate():
        if out is not None:
            return out, o[4]
        result = cupy.ndarray((entry.launch.m, entry.launch.n), np.float64)  # cupy.empty without its Python frame
        return result, result.data.ptr
    return key, _replay(entry, alpha, allocate)


def _torch_lane(current_device, current_stream, a, b, out, alpha, settings):
    try:  # get_device(): the CUDA ordinal, -1 on the CPU
        device = a.get_device()
        o = None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr())
        key = (_TAG, a.shape, a.stride(), a.dtype, device, a.data_ptr(), b.shape, b.stride(), b.dtype,
               b.get_device(), b.data_ptr(), o)
    except RuntimeError:  # a tensor without strides (sparse): the general path says what is wrong
        return None, None
    if device < 0 or current_device() != device:  # the stream read below is the current GPU's
        return None, None
    key += (driver.stream_key(current_stream(device)), settings)
    entry = DECISIONS.lanes.get(key)
    # the general path refuses tensors that require grad
    if entry is None or a.requires_grad or b.requires_grad or (out is not None and out.requires_grad):
        return key, None

    def allocate():
        if out is not None:
            return out, o[4]
        result = a.new_empty((entry.launch.m, entry.launch.n))  # a's dtype (float64) and GPU
        return result, result.data_ptr()
    return key, _replay(entry, alpha, allocate)
