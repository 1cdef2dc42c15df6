"""Generated INT8 GEMMs on the GPU: bit-exact against an exact integer reference.

Parametrized over the same catalog the generator builds (the default set of each arch);
sizes derive from the variant's tile. Inputs are fresh random int8 (never zeros); the
output is poisoned before every launch, so an unwritten element cannot pass.
"""

import numpy as np
import pytest

from ozaki_cutlass.device import driver
from ozaki_cutlass.generator import Arch, catalog
from ozaki_cutlass.kernels.gemm import load_int8_gemm
from ozaki_cutlass.kernels.library import UnsupportedProblem
from ozaki_cutlass.numerics.moduli import K_CHUNK, padded_k, padded_n

pytestmark = pytest.mark.gpu

VARIANTS = [v for arch in (Arch.SM90A, Arch.SM80) for v in catalog(arch)]
POISON = 0x5A


def _sizes(v):
    """1, the alignment, tile +- alignment, odd sizes."""
    return [
        (1, 1, 1),
        (v.tile_m + 1, v.tile_n - 3, v.tile_k + 16),
        (v.tile_m - 1, v.tile_n + 5, v.tile_k - 16),
        (3 * v.tile_m + 7, 2 * v.tile_n + 1, 3 * v.tile_k + 5),
        (77, 131, 999),
    ]


def run_gemm(kernel, a, b, batch_gap=0):
    """C = A B^T for int8 A (batch, m, k) and B (batch, n, k) with n % 4 == 0, through
    device buffers padded as the kernels require (k to padded_k, with zeros).
    ``batch_gap`` leaves unused elements between batches (non-packed batch strides)."""
    batch, m, k = a.shape
    n = b.shape[1]
    assert n % 4 == 0
    kp = padded_k(k)
    sa, sb, sc = m * kp + batch_gap, n * kp + batch_gap, m * n + batch_gap
    host_a = np.zeros((batch, sa), np.int8)
    host_b = np.zeros((batch, sb), np.int8)
    host_a[:, :m * kp].reshape(batch, m, kp)[:, :, :k] = a
    host_b[:, :n * kp].reshape(batch, n, kp)[:, :, :k] = b
    da, db = driver.DeviceBuffer(host_a.nbytes), driver.DeviceBuffer(host_b.nbytes)
    dc = driver.DeviceBuffer(4 * sc * batch)
    da.upload(host_a)
    db.upload(host_b)
    dc.fill_bytes(POISON)
    ws_bytes = kernel.workspace_size(m, n, kp, batch)
    ws = driver.DeviceBuffer(ws_bytes) if ws_bytes else None
    kernel(m, n, kp, batch, da.ptr, kp, sa, db.ptr, kp, sb, dc.ptr, n, sc,
           ws.ptr if ws else 0, ws_bytes, 0)
    driver.synchronize()
    out = dc.download(np.empty((batch, sc), np.int32))
    return out[:, :m * n].reshape(batch, m, n)


@pytest.fixture(scope="module")
def ctx():
    driver.ensure_context()


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_bit_exact_against_integers(ctx, rng, variant):
    kernel = load_int8_gemm(variant)
    for gap in (0, 64):
        for m, n, k in _sizes(variant):
            batch = 3
            a = rng.integers(-128, 128, (batch, m, k), dtype=np.int8)
            b = np.zeros((batch, padded_n(n), k), np.int8)   # output pitch: n to 4
            b[:, :n] = rng.integers(-128, 128, (batch, n, k), dtype=np.int8)
            got = run_gemm(kernel, a, b, batch_gap=gap)[:, :, :n]
            want = np.einsum("bmk,bnk->bmn", a.astype(np.int64), b[:, :n].astype(np.int64))
            assert np.array_equal(got, want), (variant.name, m, n, k, gap)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_longest_exact_chunk(ctx, variant):
    """k = K_CHUNK at the extreme value -128: the sum K_CHUNK * 2^14 fits int32 exactly."""
    kernel = load_int8_gemm(variant)
    a = np.full((1, 2, K_CHUNK), -128, np.int8)
    b = np.full((1, 4, K_CHUNK), -128, np.int8)
    got = run_gemm(kernel, a, b)
    assert (got == K_CHUNK * 128 * 128).all()


@pytest.mark.parametrize("variant", VARIANTS[:1] + [v for v in VARIANTS if v.arch is Arch.SM80][:1],
                         ids=lambda v: v.name)
def test_misaligned_problem_is_refused(ctx, variant):
    kernel = load_int8_gemm(variant)
    with pytest.raises(UnsupportedProblem, match="16"):
        kernel(4, 4, 13, 1, 16, 13, 0, 16, 13, 0, 16, 4, 0, 0, 0, 0)
