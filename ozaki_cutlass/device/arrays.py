"""Array interop: what ``ozaki_cutlass.gemm`` accepts and how it answers in kind.

Accepted: NumPy arrays (copied to the GPU and back), CuPy arrays, PyTorch CUDA tensors,
anything with ``__cuda_array_interface__`` (version 2+), and GPU DLPack producers that
CuPy or PyTorch can import. A matrix is a device pointer, a shape and element strides,
so row-major, column-major and leading-dimension layouts all work without copies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..options import check_dtype, check_host_matrix, not_a_matrix
from .dlpack import KDL_CUDA, capsule
from .driver import DeviceBuffer, canonical_stream, on_device, order_after, pointer_device, stream_handle

_F64 = np.dtype(np.float64)
_C128 = np.dtype(np.complex128)


@dataclass(frozen=True, slots=True)
class Matrix:
    """A 2-D matrix on the GPU: element (i, j) at ptr + itemsize (i rs + j cs); float64
    (itemsize 8) everywhere but the complex layer (complex128, itemsize 16)."""

    ptr: int
    rows: int
    cols: int
    rs: int
    cs: int
    kind: str           # "numpy", "cupy", "torch", "cai"
    device: int | None  # CUDA ordinal where known
    owner: object       # keeps the memory alive
    stream: int | None = None  # the producer's stream (CUDA array interface v3) to order after
    itemsize: int = 8

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def t(self) -> "Matrix":
        return Matrix(self.ptr, self.cols, self.rows, self.cs, self.rs, self.kind, self.device, self.owner,
                      self.stream, self.itemsize)


def kind_of(x) -> str:
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        return "numpy"
    if mod == "cupy":
        return "cupy"
    if mod == "torch":
        return "torch"
    if hasattr(x, "__cuda_array_interface__"):
        return "cai"
    if hasattr(x, "__dlpack__"):
        return "dlpack"
    return "unknown"


def _from_cai(x, name: str, kind: str, dtype=_F64) -> Matrix:
    cai = x.__cuda_array_interface__
    shape = tuple(cai["shape"])
    if len(shape) != 2:
        raise not_a_matrix(name, shape)
    check_dtype(np.dtype(cai["typestr"]), name, dtype)
    size = np.dtype(dtype).itemsize
    strides = cai.get("strides")
    if strides is None:
        strides = (shape[1] * size, size)
    if any(s % size for s in strides):
        raise ValueError(f"{name} has strides {strides} bytes, not a multiple of {size}: unsupported")
    rs, cs = strides[0] // size, strides[1] // size
    rows, cols = shape
    if (rows > 1 and rs <= 0) or (cols > 1 and cs <= 0):
        raise ValueError(f"{name} has non-positive strides {strides}: unsupported (make it contiguous)")
    if cai.get("mask") is not None:
        raise ValueError(f"{name} is a masked array: unsupported")
    ptr = int(cai["data"][0])
    if kind == "torch":
        device = x.device.index
    elif kind == "cupy":
        device = x.device.id
    else:  # a producer of no known library: the driver knows where its memory is
        device = pointer_device(ptr) if rows and cols else None
    # version 3: a stream the producer's work is ordered on (None: nothing to wait for)
    stream = cai.get("stream") if int(cai.get("version", 2)) >= 3 else None
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int) or stream <= 0):
        raise ValueError(f"{name} has __cuda_array_interface__ stream {stream!r}: the protocol allows None or "
                         "a positive stream handle (1: the legacy default stream)")
    return Matrix(ptr, rows, cols, rs or 1, cs or 1, kind, device, x, stream, size)


def lane_function(kind: type, cupy_lane, torch_lane, no_lane):
    """The function a lane of ``gemm`` (paths.fast_lane, paths.replay_lane) runs on arrays
    of type ``kind``: ``cupy_lane`` with the cupy module as its first argument,
    ``torch_lane`` with PyTorch's C++ readers of the current device and of a device's
    current raw stream as its first two (no Python objects made: the public calls cost a
    lane microseconds), or ``no_lane`` (another type, or one that only names a framework
    that is not installed)."""
    root = kind.__module__.partition(".")[0]
    if root == "cupy":
        try:
            import cupy
        except ImportError:
            return no_lane
        return functools.partial(cupy_lane, cupy) if issubclass(kind, cupy.ndarray) else no_lane
    if root == "torch":
        try:
            import torch
        except ImportError:
            return no_lane
        if not issubclass(kind, torch.Tensor):
            return no_lane
        current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
        current_stream = getattr(torch._C, "_cuda_getCurrentRawStream",
                                 lambda i: torch.cuda.current_stream(i).cuda_stream)
        return functools.partial(torch_lane, current_device, current_stream)
    return no_lane


def dtype_of(x) -> np.dtype | None:
    """The NumPy dtype of an array gemm may take (NumPy, CuPy, PyTorch, CUDA array interface),
    or None where it cannot tell (gemm then says what is wrong)."""
    dtype = getattr(x, "dtype", None)
    if kind_of(x) == "torch":
        import torch

        return np.dtype(np.complex128) if dtype is torch.complex128 else (
            np.dtype(np.float64) if dtype is torch.float64 else None)
    try:
        if dtype is not None:
            return np.dtype(dtype)
        cai = getattr(x, "__cuda_array_interface__", None)
        return np.dtype(cai["typestr"]) if cai is not None else None
    except (TypeError, KeyError):
        return None


def describe_input(x, name: str, dtype=_F64) -> Matrix | np.ndarray:
    """Validate one input of ``dtype`` (float64 unless told). NumPy arrays come back as
    NumPy arrays (the caller uploads them); device arrays as a :class:`Matrix` view (no copy)."""
    kind = kind_of(x)
    if kind == "numpy":
        return check_host_matrix(x, name, dtype)
    if kind == "torch":
        import torch

        if x.layout is not torch.strided:
            raise TypeError(f"{name} is a PyTorch tensor with layout {x.layout}; pass a dense (strided) "
                            f"tensor, e.g. {name}.to_dense()")
        if x.requires_grad:
            raise TypeError(f"{name} is a PyTorch tensor that requires grad, and ozaki_cutlass.gemm does not "
                            f"record gradients; pass {name}.detach() (or call it under torch.no_grad() with "
                            "detached inputs)")
        if not x.is_cuda:
            raise ValueError(f"{name} is a PyTorch tensor on {x.device}; pass a CUDA tensor or a NumPy array")
    if kind in ("cupy", "torch", "cai"):
        return _from_cai(x, name, kind, dtype)
    if kind == "dlpack":
        for lib in ("cupy", "torch"):
            try:
                mod = __import__(lib)
                return _from_cai(mod.from_dlpack(x), name, lib, dtype)
            except ImportError:
                continue
        raise TypeError(f"{name} is a DLPack producer, but neither CuPy nor PyTorch is installed to import it")
    raise TypeError(f"{name} must be a NumPy array, a CuPy array, a PyTorch CUDA tensor or an object "
                    f"with __cuda_array_interface__, got {type(x).__name__}")


def check_writable(x, name: str) -> None:
    """ValueError where a call would write its result into read-only memory: a NumPy
    array that is not writeable (a broadcast view, a read-only buffer), or an object whose
    ``__cuda_array_interface__`` marks its data read-only. Checked before anything runs."""
    if isinstance(x, np.ndarray):
        readonly = not x.flags.writeable
    elif kind_of(x) == "cai":
        readonly = bool(x.__cuda_array_interface__["data"][1])
    else:
        readonly = False
    if readonly:
        raise ValueError(f"{name} is read-only, and the result is written into it: pass a writable array")


def overlaps(x: Matrix, y: Matrix) -> bool:
    """Whether the address ranges of two (non-empty) device matrices meet."""
    def span(z):
        last = (z.rows - 1) * z.rs + (z.cols - 1) * z.cs
        return z.ptr, z.ptr + z.itemsize * (last + 1)

    if 0 in (x.rows, x.cols, y.rows, y.cols):
        return False
    (x0, x1), (y0, y1) = span(x), span(y)
    return x0 < y1 and y0 < x1


def upload(x: np.ndarray, keep: list) -> Matrix:
    """A NumPy matrix copied to a new device buffer (appended to ``keep``, which holds it
    for the call), as a C-contiguous Matrix view."""
    host = np.ascontiguousarray(x, dtype=np.float64)
    buf = DeviceBuffer(host.nbytes)
    buf.upload(host)
    keep.append(buf)
    return Matrix(buf.ptr, host.shape[0], host.shape[1], host.shape[1], 1, "numpy", None, buf)


def current_stream(kind: str, stream, device: int = 0) -> int:
    """``stream`` as a handle, else the framework's current stream on ``device`` (the GPU
    holding the arrays, which need not be the framework's current one), else the legacy
    default stream."""
    if stream is not None:
        return stream_handle(stream)
    if kind == "torch":
        import torch

        return int(torch.cuda.current_stream(device).cuda_stream)
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


def allocate_like(kind: str, rows: int, cols: int, device: int | None, dtype=_F64):
    """A new C-contiguous matrix of ``dtype`` (float64 unless told, or complex128) of the
    given kind, and its Matrix view. For "numpy" and "cai" inputs the result lives in our
    own device buffer."""
    complex_ = np.dtype(dtype) == _C128
    size = 16 if complex_ else 8
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(device or 0):
            arr = cupy.empty((rows, cols), dtype=cupy.complex128 if complex_ else cupy.float64)
        return arr, Matrix(int(arr.data.ptr), rows, cols, cols or 1, 1, "cupy", device or 0, arr, None, size)
    if kind == "torch":
        import torch

        arr = torch.empty((rows, cols), dtype=torch.complex128 if complex_ else torch.float64,
                          device=f"cuda:{device or 0}")
        return arr, _from_cai(arr, "out", "torch", dtype)
    buf = DeviceArray(rows, cols, device or 0, dtype)
    return buf, Matrix(buf.ptr, rows, cols, cols, 1, "cai", device, buf, None, size)


class DeviceArray:
    """A float64 (or, from the complex layer, complex128) device matrix of our own, returned
    for inputs of no known library. Exports ``__cuda_array_interface__`` (version 3, with
    the stream it was written on) and ``__dlpack__``/``__dlpack_device__`` (so CuPy,
    PyTorch, JAX, Numba can take it, ordered after that stream), and ``get()`` to copy it
    to a NumPy array. Its memory, copies and stream orderings are GPU ``device``'s, whatever
    context is current when they are asked for."""

    def __init__(self, rows: int, cols: int, device: int = 0, dtype=_F64):
        self.shape = (rows, cols)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (_F64, _C128):
            raise TypeError(f"DeviceArray holds float64 or complex128, not {self.dtype}")
        self.device = device
        self.stream = 0  # set by the call that writes it: the legacy default stream until then
        with on_device(device):
            self._buf = DeviceBuffer(self.dtype.itemsize * rows * cols)

    @property
    def ptr(self) -> int:
        return self._buf.ptr

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": canonical_stream(self.stream)}

    def __dlpack_device__(self) -> tuple[int, int]:
        return KDL_CUDA, self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this array (unversioned; no copy). ``stream``: the consumer's
        stream (an int: 1 legacy default, 2 per-thread default, else a handle; -1: no
        ordering; None: the legacy default); it is made to wait for this array's stream."""
        if copy:
            raise BufferError("DeviceArray.__dlpack__ does not copy (copy=True asked)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray lives on {self.__dlpack_device__()}, {tuple(dl_device)} was asked")
        if stream != -1:
            with on_device(self.device):
                order_after(self.stream, 1 if stream is None else int(stream))
        rows, cols = self.shape
        return capsule(self, self.ptr, self.shape, (cols, 1), self.device, complex_=self.dtype == _C128)

    @classmethod
    def from_host(cls, host: np.ndarray, device: int = 0) -> "DeviceArray":
        """A new DeviceArray holding a copy of the 2-D ``host`` (complex128 if it is complex,
        else float64; the copy is done when this returns)."""
        dtype = _C128 if np.iscomplexobj(host) else _F64
        host = np.ascontiguousarray(host, dtype=dtype)
        if host.ndim != 2:
            raise ValueError(f"DeviceArray.from_host takes a 2-D array, got shape {host.shape}")
        x = cls(host.shape[0], host.shape[1], device, dtype)
        if host.nbytes:
            with on_device(device):
                x._buf.upload(host)
        return x

    def get(self) -> np.ndarray:
        """A NumPy copy, after the work on the stream that wrote it (on its GPU)."""
        with on_device(self.device):
            return self._buf.download(np.empty(self.shape, dtype=self.dtype), self.stream)
