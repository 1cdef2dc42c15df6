"""A thin layer over ``cuda.bindings.driver``: errors, context, memory, streams, events.

Everything the runtime does with the CUDA driver goes through here, so error handling
is uniform: every driver call is checked and a failure raises :class:`CudaError` naming
the call. The driver is imported on first use, never at import time.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import threading
from dataclasses import dataclass

import numpy as np


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


class NoGpuError(RuntimeError):
    """No usable CUDA driver or device."""


class OutOfMemoryError(MemoryError):
    """The GPU had not enough free memory for an allocation of ours; the message says how
    much was asked and what to do. Nothing is left half-done: the next call works."""


_DRIVER = None

__all__ = ["CudaError", "NoGpuError", "OutOfMemoryError", "MIN_DRIVER_CUDA", "driver_refusal", "bindings", "check",
           "ensure_context", "current_context", "primary_context", "on_device", "read_back", "PinnedRead",
           "copy_async", "pointer_device",
           "canonical_stream",
           "order_after",
           "DeviceBuffer", "check_stream", "stream_key", "names_capture", "is_capturing", "PER_THREAD_STREAM",
           "stream_handle", "as_cu_stream",
           "synchronize", "wait_event", "new_stream", "destroy_stream", "new_event", "destroy_event",
           "relaxed_capture", "EventTimer",
           "event_times"]


def bindings():
    """cuda.bindings.driver, imported on first use (dozens of calls per GEMM use it)."""
    global _DRIVER
    if _DRIVER is None:
        from cuda.bindings import driver

        _DRIVER = driver
    return _DRIVER


def check(result, what: str = "CUDA call"):
    """Unpack a cuda-bindings result tuple, raising CudaError when the status is not success."""
    cu = bindings()
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        _, text = cu.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
        raise CudaError(f"{what} failed: {name}: {text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


_CONTEXTS: dict[int, object] = {}

#: The CUDA version a driver must support (cuDriverGetVersion, 1000 major + 10 minor):
#: the kernels are built with CUDA 13's nvcc and runtime, and the runtime runs on cuda-python
#: 13, neither of which works on a CUDA 12 driver (branches 535-575).
MIN_DRIVER_CUDA = 13000


def driver_refusal(version: int) -> str | None:
    """Why a driver supporting CUDA ``version`` (cuDriverGetVersion's number) cannot run
    the GPU path, or None when it can."""
    if version >= MIN_DRIVER_CUDA:
        return None
    return (f"the NVIDIA driver supports CUDA {version // 1000}.{version % 1000 // 10}, and ozaki-cutlass needs "
            f"a driver for CUDA {MIN_DRIVER_CUDA // 1000}.0 or newer (driver 580 or later): its kernels are built "
            "with CUDA 13 (nvcc and runtime) and it runs on cuda-python 13. Update the driver; meanwhile "
            "ozaki_cutlass.reference.gemm runs the same algorithm on the CPU")


def ensure_context(ordinal: int = 0):
    """Retain the device's primary context (the one CuPy and PyTorch use) and make it
    current on this thread. Raises NoGpuError when there is no driver or device. After
    the first call for a device, a call finding that context current costs one query."""
    ctx = _CONTEXTS.get(ordinal)
    if ctx is not None:
        cu = bindings()
        current = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) != int(ctx):
            check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return ctx
    try:
        cu = bindings()
        check(cu.cuInit(0), "cuInit")
        version = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
        count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
    except (ImportError, OSError, CudaError) as exc:
        raise NoGpuError(f"no CUDA GPU is usable here ({exc}); "
                         "ozaki_cutlass.reference.gemm runs the same algorithm on the CPU") from exc
    except Exception as exc:  # cuda.pathfinder raises its own error when libcuda is absent
        raise NoGpuError(f"no CUDA driver found ({exc}); "
                         "ozaki_cutlass.reference.gemm runs the same algorithm on the CPU") from exc
    why = driver_refusal(int(version))
    if why is not None:
        raise NoGpuError(why)
    if ordinal >= count:
        raise NoGpuError(f"GPU {ordinal} requested but {count} visible")
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
    ctx = check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _CONTEXTS[ordinal] = ctx
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def current_context() -> int:
    """The CUDA context current on this thread as an int, 0 where none (one driver query:
    the lanes compare it with the primary context their launches were made for)."""
    return int(check(bindings().cuCtxGetCurrent(), "cuCtxGetCurrent"))


def primary_context(ordinal: int) -> int | None:
    """GPU ``ordinal``'s primary context as an int, once ensure_context has retained it
    (no driver call), else None."""
    ctx = _CONTEXTS.get(ordinal)
    return None if ctx is None else int(ctx)


@contextlib.contextmanager
def on_device(ordinal: int = 0):
    """``with on_device(i):`` runs the block with GPU i's primary context current
    (ensure_context) and then makes current again whatever context was current before
    (none included), so a call on another GPU's arrays does not move the caller's CuPy or
    PyTorch onto that GPU."""
    try:
        previous = check(bindings().cuCtxGetCurrent(), "cuCtxGetCurrent")
    except Exception:  # noqa: BLE001 - no driver, or not initialized: ensure_context says why
        previous = None
    ctx = ensure_context(ordinal)
    try:
        yield ctx
    finally:
        if previous is not None and int(previous) != int(ctx):
            check(bindings().cuCtxSetCurrent(previous), "cuCtxSetCurrent")


class DeviceBuffer:
    """Device memory from cuMemAlloc, freed on close() or garbage collection; both in
    relaxed capture mode (:func:`relaxed_capture`), so that neither ends any thread's
    capture."""

    def __init__(self, nbytes: int):
        cu = bindings()
        self.nbytes = int(nbytes)
        self._ptr = None
        with relaxed_capture():
            err, *rest = cu.cuMemAlloc(max(self.nbytes, 1))
        if err == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            raise OutOfMemoryError(f"out of GPU memory: {self.nbytes / 2**30:.2f} GiB asked for; free memory "
                                   "held elsewhere (ozaki_cutlass.empty_cache() releases the emulation's "
                                   "workspaces, CuPy and PyTorch have their own) or use a smaller problem")
        self._ptr = check((err, *rest), f"cuMemAlloc({self.nbytes})")

    @property
    def ptr(self) -> int:
        return int(self._ptr)

    def close(self) -> None:
        if self._ptr is not None:
            with relaxed_capture():
                check(bindings().cuMemFree(self._ptr), "cuMemFree")
            self._ptr = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def upload(self, host: np.ndarray, stream=0) -> None:
        host = np.ascontiguousarray(host)
        if host.nbytes > self.nbytes:
            raise ValueError(f"{host.nbytes} bytes do not fit a {self.nbytes}-byte buffer")
        check(bindings().cuMemcpyHtoDAsync(self._ptr, host.ctypes.data, host.nbytes, stream_handle(stream)),
              "cuMemcpyHtoDAsync")
        synchronize(stream)

    def download(self, host: np.ndarray, stream=0) -> np.ndarray:
        if not host.flags.c_contiguous or host.nbytes > self.nbytes:
            raise ValueError("download needs a C-contiguous array no larger than the buffer")
        check(bindings().cuMemcpyDtoHAsync(host.ctypes.data, self._ptr, host.nbytes, stream_handle(stream)),
              "cuMemcpyDtoHAsync")
        synchronize(stream)
        return host

    def fill_bytes(self, value: int, stream=0) -> None:
        check(bindings().cuMemsetD8Async(self._ptr, value & 0xFF, self.nbytes, stream_handle(stream)),
              "cuMemsetD8Async")


def read_back(ptr: int, host: np.ndarray, stream=0) -> np.ndarray:
    """Copy ``host.nbytes`` bytes from device pointer ``ptr`` into ``host`` (C-contiguous)
    after the work on ``stream``, and wait for the stream (:class:`PinnedRead` waits for
    the copy alone)."""
    check(bindings().cuMemcpyDtoHAsync(host.ctypes.data, ptr, host.nbytes, stream_handle(stream)),
          "cuMemcpyDtoHAsync")
    synchronize(stream)
    return host


class PinnedRead:
    """A small read from the device that the host waits for alone: page-locked host memory
    (so the copy is asynchronous) and an event behind it. :meth:`start` enqueues the copy
    on a stream, after the work already there; work enqueued after it may run on while
    :meth:`wait` blocks until the copy alone has landed. One read in flight at a time: the
    contract's read of its certificate (its workspace holds one). Made and freed in
    relaxed capture mode, as :class:`DeviceBuffer` is."""

    def __init__(self, count: int, dtype=np.float64):
        cu = bindings()
        self.dtype = np.dtype(dtype)
        self.count = int(count)
        self.nbytes = self.count * self.dtype.itemsize
        self._host = self._event = None
        with relaxed_capture():
            self._host = int(check(cu.cuMemHostAlloc(max(self.nbytes, 1), cu.CU_MEMHOSTALLOC_PORTABLE),
                                   "cuMemHostAlloc"))
        self._event = new_event()

    def start(self, ptr: int, stream=0) -> None:
        """Copy ``count`` values from device pointer ``ptr`` after the work on ``stream``."""
        cu = bindings()
        check(cu.cuMemcpyDtoHAsync(self._host, ptr, self.nbytes, stream_handle(stream)), "cuMemcpyDtoHAsync")
        check(cu.cuEventRecord(self._event, as_cu_stream(stream)), "cuEventRecord")

    def wait(self) -> np.ndarray:
        """Block until the copy :meth:`start` enqueued has landed; a copy of the values."""
        wait_event(self._event)
        raw = (ctypes.c_char * self.nbytes).from_address(self._host)
        return np.frombuffer(raw, dtype=self.dtype, count=self.count).copy()

    def close(self) -> None:
        if self._event is not None:
            destroy_event(self._event)
            self._event = None
        if self._host is not None:
            with relaxed_capture():
                check(bindings().cuMemFreeHost(self._host), "cuMemFreeHost")
            self._host = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def copy_async(dst: int, src: int, nbytes: int, stream) -> None:
    """Copy ``nbytes`` bytes between device pointers, in order on ``stream``."""
    if nbytes:
        check(bindings().cuMemcpyDtoDAsync(dst, src, nbytes, stream_handle(stream)), "cuMemcpyDtoDAsync")


def pointer_device(ptr: int) -> int | None:
    """The CUDA ordinal of the GPU that holds device pointer ``ptr``, or None when the driver
    cannot tell (no driver or GPU, or not a device pointer)."""
    try:
        cu = bindings()
        check(cu.cuInit(0), "cuInit")
        value = check(cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
                      "cuPointerGetAttribute")
    except Exception:  # noqa: BLE001 - no driver library, no GPU, or a host pointer: unknown
        return None
    return int(value)


def canonical_stream(handle: int) -> int:
    """A stream handle with the legacy default stream spelled one way (0 and
    CU_STREAM_LEGACY = 1 are the same stream)."""
    return 1 if handle in (0, 1) else handle


#: CU_STREAM_PER_THREAD: one handle for a different stream in every thread.
PER_THREAD_STREAM = 2


_THREAD = threading.local()
_THREAD_SERIALS = itertools.count()


def is_capturing(stream: int) -> bool:
    """Whether ``stream`` is being captured into a graph (the caller's own capture, say)."""
    cu = bindings()
    status = check(cu.cuStreamIsCapturing(as_cu_stream(stream)), "cuStreamIsCapturing")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def stream_key(handle: int):
    """What names the stream ``handle`` in this thread, for what is kept per stream (the
    workspaces, the replay lane). The driver hands a destroyed stream's handle to a stream
    made later, which must not find the first one's workspace (a caller's graph may still
    use it), so a stream is known by the driver's id (cuStreamGetId). The id cannot be read
    while the stream is captured (the read ends the capture, in any mode: H100, driver
    580.159.04, 2026-12-06), and calls captured into a caller's graph take a workspace
    apart from the stream's (no later direct call then shares the buffers the graph
    keeps): ("capture", handle) then, shared by the captures made on that handle. The legacy
    default stream is 1 (0 and 1 both name it); the per-thread default stream, whose one
    handle is a different stream in each thread, is the handle and the thread (a serial
    number of its own: a thread's ident is reused once it has ended, its work maybe
    not). A stream's key took 3.4 us on an H100 (driver 580.159.04), 2.1 of them the
    capture query: a call learns from its workspace's key whether it is captured
    (:func:`names_capture`), without asking again."""
    if handle in (0, 1):  # never captured
        return 1
    if handle == PER_THREAD_STREAM:
        serial = getattr(_THREAD, "serial", None)
        if serial is None:
            serial = _THREAD.serial = next(_THREAD_SERIALS)
        name = handle, serial
    else:
        name = handle
    if is_capturing(handle):
        return "capture", name
    if handle == PER_THREAD_STREAM:
        return name
    cu = bindings()
    return "id", int(check(cu.cuStreamGetId(cu.CUstream(handle)), "cuStreamGetId"))


def names_capture(key) -> bool:
    """Whether :func:`stream_key`'s ``key`` names a stream being captured: what is kept
    under it serves only calls captured into a caller's graph."""
    return type(key) is tuple and key[0] == "capture"


def order_after(producer: int, consumer: int) -> None:
    """Make the work enqueued later on stream ``consumer`` wait for the work enqueued on
    stream ``producer`` so far (an event; nothing when they are the same stream)."""
    if canonical_stream(producer) == canonical_stream(consumer):
        return
    cu = bindings()
    event = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        check(cu.cuEventRecord(event, as_cu_stream(producer)), "cuEventRecord")
        check(cu.cuStreamWaitEvent(as_cu_stream(consumer), event, 0), "cuStreamWaitEvent")
    finally:
        check(cu.cuEventDestroy(event), "cuEventDestroy")  # the wait keeps what it needs


_STREAM_ATTRS = ("cuda_stream", "ptr", "handle")


def check_stream(stream, name: str = "stream") -> None:
    """TypeError or ValueError naming ``name`` unless ``stream`` is what
    :func:`stream_handle` takes: None, a non-negative int handle, a cuda-bindings
    CUstream, or a stream object with ``.cuda_stream``/``.ptr``/``.handle`` (PyTorch,
    CuPy, cuda.core). Checked before anything is launched; needs no GPU."""
    if stream is None or any(hasattr(stream, attr) for attr in _STREAM_ATTRS) or hasattr(stream, "getPtr"):
        return
    if isinstance(stream, (bool, np.bool_)) or not isinstance(stream, (int, np.integer)):
        raise TypeError(f"{name} must be None, an int stream handle or a CUDA stream object (PyTorch, CuPy, "
                        f"cuda-python), got {type(stream).__name__}")
    if stream < 0:
        raise ValueError(f"{name}={int(stream)} is not a stream handle")


def stream_handle(stream) -> int:
    """An int CUstream handle from None/0 (the legacy default stream), an int, a
    cuda-bindings CUstream, or an object with ``.handle``/``.ptr``/``cuda_stream``."""
    if type(stream) is int:  # the common case, before the attribute probes (a bool goes on)
        return stream
    if stream is None:
        return 0
    for attr in _STREAM_ATTRS:
        if hasattr(stream, attr) and not isinstance(stream, int):
            return int(getattr(stream, attr))
    return int(stream)


def as_cu_stream(stream):
    return bindings().CUstream(stream_handle(stream))


# The host's waits, in relaxed capture mode: in global mode, while any thread captures in
# global mode, cuStreamSynchronize and cuEventSynchronize are refused, even for a stream or
# event the capture does not touch, and that capture ends invalidated (H100, 2026-12-06;
# scripts/capture_probe.py).
def synchronize(stream=0) -> None:
    """Wait for the work enqueued on ``stream``."""
    with relaxed_capture():
        check(bindings().cuStreamSynchronize(as_cu_stream(stream)), "cuStreamSynchronize")


def wait_event(event) -> None:
    """Wait for ``event`` (a CUevent) to complete."""
    with relaxed_capture():
        check(bindings().cuEventSynchronize(event), "cuEventSynchronize")


# Streams and events the package keeps, made and destroyed in relaxed capture mode (as
# DeviceBuffer's memory is).
def new_stream():
    """A new non-blocking stream (a CUstream)."""
    cu = bindings()
    with relaxed_capture():
        return check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")


def destroy_stream(stream) -> None:
    with relaxed_capture():
        check(bindings().cuStreamDestroy(as_cu_stream(stream)), "cuStreamDestroy")


def new_event():
    """A new event without timing (a CUevent), to order streams or wait for a copy."""
    cu = bindings()
    with relaxed_capture():
        return check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")


def destroy_event(event) -> None:
    with relaxed_capture():
        check(bindings().cuEventDestroy(event), "cuEventDestroy")


@contextlib.contextmanager
def relaxed_capture():
    """``with relaxed_capture():`` this thread's driver calls in the block may allocate, free
    and create streams while a stream is being captured in global mode (CUDA's default, and
    PyTorch's), this thread's capture or another's: such calls are otherwise refused and
    end the capture. For what the emulation keeps, whose addresses a caller's graph may
    hold (device.workspace pins them); the block must not touch the capturing stream or
    the legacy stream."""
    cu = bindings()
    relaxed = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    previous = check(cu.cuThreadExchangeStreamCaptureMode(relaxed), "cuThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        check(cu.cuThreadExchangeStreamCaptureMode(previous), "cuThreadExchangeStreamCaptureMode")


@dataclass
class EventTimer:
    """Elapsed time between two CUDA events on a stream, in milliseconds."""

    stream: object = 0

    def __post_init__(self):
        cu = bindings()
        self._start = check(cu.cuEventCreate(0), "cuEventCreate")
        self._stop = check(cu.cuEventCreate(0), "cuEventCreate")

    def start(self):
        check(bindings().cuEventRecord(self._start, as_cu_stream(self.stream)), "cuEventRecord")

    def stop(self) -> float:
        cu = bindings()
        check(cu.cuEventRecord(self._stop, as_cu_stream(self.stream)), "cuEventRecord")
        wait_event(self._stop)
        return float(check(cu.cuEventElapsedTime(self._start, self._stop), "cuEventElapsedTime"))


def event_times(calls, warmup: int, reps: int, stream=0, rotate: bool = False) -> tuple[list[list[float]], list]:
    """Milliseconds of each of ``calls`` (callables without arguments), every call timed
    by CUDA events recorded on ``stream`` around the whole Python call (host work
    included, as a user sees it). The calls run in alternation, round after round
    (``warmup`` untimed rounds first, then ``reps`` timed ones), so that they share the
    GPU's clock and thermal state. ``rotate``: timed round r starts at call r mod
    len(calls), so that no call always follows the same one (under a power cap a call
    after a power-hungry one may start at a lower clock). Returns (the times of each
    call, its last result)."""
    timer = EventTimer(stream)
    last = [None] * len(calls)
    for _ in range(warmup):
        for i, fn in enumerate(calls):
            last[i] = fn()
    times: list[list[float]] = [[] for _ in calls]
    for r in range(reps):
        start = r % len(calls) if rotate and calls else 0
        for i in [*range(start, len(calls)), *range(start)]:
            timer.start()
            last[i] = calls[i]()
            times[i].append(timer.stop())
    return times, last

