"""Interop on the GPU: producers of no known library (only __cuda_array_interface__) get
their stream honoured and their GPU found; the DeviceArray we return for them is taken by
CuPy and PyTorch through DLPack and the CUDA array interface."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.device import driver
from ozaki_cutlass.device.arrays import DeviceArray
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")


class Producer:
    """A foreign array: only the CUDA array interface (v3), with the producer's stream."""

    def __init__(self, arr, stream):
        self._arr = arr
        self.__cuda_array_interface__ = dict(arr.__cuda_array_interface__, stream=stream)


def test_a_foreign_producers_stream_is_waited_for(rng):
    a, b = random_matrix(512, 512, 1.0, rng), random_matrix(512, 512, 1.0, rng)
    want = reference.gemm(a, b, policy="emulate")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        da, db = cp.empty((512, 512)), cp.empty((512, 512))
        busy = cp.ones((4096, 4096))
        for _ in range(8):
            busy = busy @ busy * 1e-4  # keep the producer's stream busy for a while
        da.set(a, stream=s)
        db.set(b, stream=s)
    got = ozaki_cutlass.gemm(Producer(da, s.ptr), Producer(db, s.ptr), policy="emulate")
    assert isinstance(got, DeviceArray) and got.device == 0
    assert same_bits(got.get(), want)


def test_our_device_array_goes_to_cupy_and_torch(rng):
    a, b = random_matrix(64, 48, 1.0, rng), random_matrix(48, 32, 1.0, rng)
    got = ozaki_cutlass.gemm(Producer(cp.asarray(a), 1), Producer(cp.asarray(b), 1), policy="emulate")
    host = got.get()
    assert same_bits(host, reference.gemm(a, b, policy="emulate"))
    assert got.__dlpack_device__() == (2, 0) and got.__cuda_array_interface__["stream"] >= 1
    assert same_bits(cp.asnumpy(cp.from_dlpack(got)), host)
    assert same_bits(cp.asnumpy(cp.asarray(got)), host)
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(got)
    assert t.is_cuda and same_bits(t.cpu().numpy(), host)
    del got  # the tensor keeps the memory alive
    assert same_bits(t.cpu().numpy(), host)


def test_pointer_device():
    x = cp.zeros(4)
    assert driver.pointer_device(int(x.data.ptr)) == 0
    assert driver.pointer_device(np.zeros(4).ctypes.data) is None
