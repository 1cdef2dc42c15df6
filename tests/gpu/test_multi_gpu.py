"""Arrays on the second GPU while the first is current (needs two GPUs; skips otherwise):
the emulation runs on the arrays' GPU, with that GPU's arch and current stream, and gives
the reference's bits; prepare() too. Native DGEMM as well."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.numerics.accuracy import random_matrix

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return cupy


def test_arrays_on_the_second_gpu(cp, rng):
    a, b = random_matrix(300, 200, 1.0, rng), random_matrix(200, 260, 1.0, rng)
    with cp.cuda.Device(1):
        da, db = cp.asarray(a), cp.asarray(b)
    assert cp.cuda.runtime.getDevice() == 0
    for mode in ("fast", "accurate"):
        got = ozaki_cutlass.gemm(da, db, mode=mode, policy="emulate")
        assert got.device.id == 1
        want = reference.gemm(a, b, mode=mode)
        assert np.array_equal(cp.asnumpy(got).view(np.int64), want.view(np.int64)), mode
    pa = ozaki_cutlass.prepare(da, "left", mode="fast")
    got = ozaki_cutlass.gemm(pa, db)
    assert np.array_equal(cp.asnumpy(got).view(np.int64), reference.gemm(a, b, mode="fast").view(np.int64))
    native = ozaki_cutlass.gemm(da, db, policy="native")
    assert native.device.id == 1
    np.testing.assert_allclose(cp.asnumpy(native), a @ b, rtol=0, atol=1e-13 * (np.abs(a) @ np.abs(b)).max())
    assert cp.cuda.runtime.getDevice() == 0  # the caller's current GPU is left as it was
    # the auto policy's native fast lane on the second GPU: the first call decides native,
    # the second goes straight to cuBLASLt with GPU 1's handle; the same bits
    with cp.cuda.Device(1):
        sa, sb = cp.asarray(a[:64, :64]), cp.asarray(b[:64, :64])
        t = {}
        first = ozaki_cutlass.gemm(sa, sb, timings=t)
        assert t["path"] == "native", t
        again = ozaki_cutlass.gemm(sa, sb)
        assert again.device.id == 1
        assert cp.array_equal(first.view(cp.int64), again.view(cp.int64))
