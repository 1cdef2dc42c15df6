"""Shared pieces of the GPU tests: the stage-kernel library and device buffers."""

import numpy as np
import pytest

from ozaki_cutlass.device import driver
from ozaki_cutlass.generator import Arch


@pytest.fixture(scope="module")
def st():
    """The stage kernels of the visible GPU's arch (built on first use)."""
    driver.ensure_context()
    from ozaki_cutlass.device.arch import visible_arch
    from ozaki_cutlass.kernels.stages import load_stages

    return load_stages(visible_arch() or Arch.SM90A)


class Dev:
    """Upload/download helpers that keep their buffers alive; new buffers are poisoned."""

    def __init__(self):
        self.keep = []

    def put(self, x):
        x = np.ascontiguousarray(x)
        buf = driver.DeviceBuffer(max(x.nbytes, 16))
        buf.upload(x)
        self.keep.append(buf)
        return buf.ptr

    def empty(self, nbytes, poison=0x5A):
        buf = driver.DeviceBuffer(max(nbytes, 16))
        buf.fill_bytes(poison)
        self.keep.append(buf)
        return buf

    @staticmethod
    def get(buf, dtype, shape):
        driver.synchronize()
        return buf.download(np.empty(shape, dtype))


@pytest.fixture
def dev():
    return Dev()
