"""Array interop on the CPU: the CUDA array interface v3 stream and device of producers of
no known library, the stream ordering they get, and the DLPack capsule's lifetime. The GPU
side (CuPy and PyTorch consuming our DeviceArray): tests/gpu/test_interop_gpu.py."""

import ctypes

import numpy as np
import pytest

from ozaki_cutlass.device import arrays, dlpack, driver


class CAI:
    def __init__(self, version=3, stream=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f8", "data": (ptr, False),
                                         "version": version, "strides": None}
        if stream is not ...:
            self.__cuda_array_interface__["stream"] = stream


def test_a_producers_stream_is_kept_and_checked():
    assert arrays.describe_input(CAI(stream=None), "a").stream is None
    assert arrays.describe_input(CAI(stream=7), "a").stream == 7
    assert arrays.describe_input(CAI(stream=1), "a").t().stream == 1
    assert arrays.describe_input(CAI(version=2, stream=7), "a").stream is None  # v2 has no stream
    for bad in (0, -3, True, "s"):
        with pytest.raises(ValueError, match="stream"):
            arrays.describe_input(CAI(stream=bad), "a")


def test_the_device_of_an_unknown_producer_comes_from_the_driver(monkeypatch):
    monkeypatch.setattr(arrays, "pointer_device", lambda ptr: 3 if ptr == 0x7F0000000000 else None)
    assert arrays.describe_input(CAI(), "a").device == 3
    assert driver.pointer_device(0x1234) is None or isinstance(driver.pointer_device(0x1234), int)


def test_order_after_waits_only_across_streams(monkeypatch):
    calls = []

    class Fake:
        class CUresult:
            CUDA_SUCCESS = 0

        class CUevent_flags:
            CU_EVENT_DISABLE_TIMING = 2

        def CUstream(self, h):
            return h

        def cuEventCreate(self, flags):
            calls.append(("create", flags))
            return (0, "ev")

        def cuEventRecord(self, ev, s):
            calls.append(("record", ev, s))
            return (0,)

        def cuStreamWaitEvent(self, s, ev, flags):
            calls.append(("wait", s, ev))
            return (0,)

        def cuEventDestroy(self, ev):
            calls.append(("destroy", ev))
            return (0,)

    fake = Fake()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    driver.order_after(0, 1)  # both the legacy default stream
    driver.order_after(9, 9)
    assert calls == []
    driver.order_after(9, 0)
    assert calls == [("create", 2), ("record", "ev", 9), ("wait", 0, "ev"), ("destroy", "ev")]


def _name(capsule):
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule)


def test_a_dlpack_capsule_keeps_its_owner_until_released():
    owner = object()
    cap = dlpack.capsule(owner, 0x7F0000001000, (5, 3), (3, 1), 0)
    assert _name(cap) == b"dltensor" and len(dlpack._LIVE) == 1
    (kept, managed, shape, strides), = dlpack._LIVE.values()
    assert kept is owner and list(shape) == [5, 3] and list(strides) == [3, 1]
    t = managed.dl_tensor
    assert (t.data, t.device.device_type, t.ndim, t.dtype.code, t.dtype.bits) == (0x7F0000001000, 2, 2, 2, 64)
    del cap  # never consumed: the capsule's destructor calls the deleter
    assert dlpack._LIVE == {}
    # a consumer renames the capsule and calls the deleter itself
    cap = dlpack.capsule(owner, 0x7F0000001000, (5, 3), (3, 1), 0)
    address = next(iter(dlpack._LIVE))
    rename = ctypes.pythonapi.PyCapsule_SetName
    rename.restype, rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    assert rename(cap, b"used_dltensor") == 0
    del cap
    assert len(dlpack._LIVE) == 1  # the consumer owns it now
    managed = dlpack._DLManagedTensor.from_address(address)
    managed.deleter(ctypes.pointer(managed))
    assert dlpack._LIVE == {}


def test_device_array_dlpack_export(monkeypatch):
    import types

    import numpy as np

    import contextlib

    waits, contexts = [], []
    monkeypatch.setattr(arrays, "order_after", lambda producer, consumer: waits.append((producer, consumer)))
    monkeypatch.setattr(arrays, "on_device", lambda device: contexts.append(device) or contextlib.nullcontext())
    da = arrays.DeviceArray.__new__(arrays.DeviceArray)  # no device memory: only the export is checked
    da.shape, da.dtype, da.device, da.stream = (3, 2), np.dtype(np.float64), 1, 5
    da._buf = types.SimpleNamespace(ptr=0x7F0000002000)
    assert da.__dlpack_device__() == (dlpack.KDL_CUDA, 1)
    assert da.__cuda_array_interface__["stream"] == 5 and da.__cuda_array_interface__["version"] == 3
    cap = da.__dlpack__(stream=9)
    assert waits == [(5, 9)] and _name(cap) == b"dltensor"
    assert contexts == [1]  # the wait is made in the array's GPU's context, whatever is current
    (kept, managed, shape, strides), = [v for v in dlpack._LIVE.values() if v[0] is da]
    assert list(shape) == [3, 2] and list(strides) == [2, 1]
    del cap, kept, managed
    da.__dlpack__(stream=-1)  # -1: the consumer asks for no ordering
    da.__dlpack__()  # None: the legacy default stream
    assert waits == [(5, 9), (5, 1)]
    with pytest.raises(BufferError, match="does not copy"):
        da.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="lives on"):
        da.__dlpack__(dl_device=(2, 0))
    da.stream = 0
    assert da.__cuda_array_interface__["stream"] == 1  # the legacy default stream, as the protocol spells it


def test_device_array_from_host_takes_only_matrices():
    # refused before any allocation: no GPU needed
    for bad in (np.zeros(3), np.zeros((2, 2, 2))):
        with pytest.raises(ValueError, match="2-D"):
            arrays.DeviceArray.from_host(bad)
