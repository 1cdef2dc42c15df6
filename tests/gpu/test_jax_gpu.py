"""JAX arrays outside jit: ozaki_cutlass.gemm takes them (through their CUDA array
interface or DLPack) and gives the reference's bits; JAX takes the result back through
DLPack."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import ozaki_cutlass  # noqa: E402
from ozaki_cutlass import reference  # noqa: E402
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    jax.config.update("jax_enable_x64", True)
    devices = [d for d in jax.devices() if d.platform == "gpu"]
    if not devices:
        pytest.skip("JAX sees no GPU")
    return devices[0]


def test_jax_arrays_in_and_out_native(gpu):
    # policy "native": cuBLAS only, no generated kernel needed
    rng = np.random.default_rng(4)
    a_np, b_np = random_matrix(64, 48, 1.0, rng), random_matrix(48, 32, 1.0, rng)
    a, b = jax.device_put(a_np, gpu), jax.device_put(b_np, gpu)
    got = ozaki_cutlass.gemm(a, b, policy="native")
    host = got.get()
    np.testing.assert_allclose(host, a_np @ b_np, rtol=1e-13, atol=1e-13)
    back = jax.dlpack.from_dlpack(got)
    assert same_bits(np.asarray(back), host)
    assert same_bits(ozaki_cutlass.gemm(a, b, policy="native").get(), host)  # reproducible


def test_jax_arrays_give_the_references_bits(gpu):
    rng = np.random.default_rng(5)
    a_np, b_np = random_matrix(90, 70, 2.0, rng), random_matrix(70, 40, 2.0, rng)
    a, b = jax.device_put(a_np, gpu), jax.device_put(b_np, gpu)
    assert a.dtype == np.float64
    want = reference.gemm(a_np, b_np, policy="emulate")
    got = ozaki_cutlass.gemm(a, b, policy="emulate")
    assert same_bits(got.get(), want)
    back = jax.dlpack.from_dlpack(got)
    assert same_bits(np.asarray(back), want)
    # a transposed view made by JAX is a new array: the bits of the product of the copies
    got_t = ozaki_cutlass.gemm(b.T, a.T, policy="emulate")
    assert same_bits(got_t.get(), reference.gemm(b_np.T.copy(), a_np.T.copy(), policy="emulate"))
