"""The tile-local prologue prototype (path="prologue") on the GPU.

The kernel's int32 planes equal a NumPy model of the staged residues' products (partial
edge tiles, shifts that take both residue paths, strided k, a k window, padding columns);
whole calls are bit-identical to path="staged" and to ozaki_cutlass.reference.gemm
(fresh phi-family inputs, m/n/k off the 128x128x64 tile, both modes, transposes, several
moduli counts, k > K_CHUNK).
"""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.device import driver
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits
from ozaki_cutlass.generator.prologue import default_prologue_variant
from ozaki_cutlass.kernels.library import UnsupportedProblem
from ozaki_cutlass.numerics.moduli import K_CHUNK, MODULI_TABLE, padded_k, padded_n

pytestmark = pytest.mark.gpu

VARIANT = default_prologue_variant()
TILE_M, TILE_N, TILE_K = VARIANT.tile_m, VARIANT.tile_n, VARIANT.tile_k


@pytest.fixture(scope="module")
def kernel():
    driver.ensure_context()
    from ozaki_cutlass.kernels.prologue import load_prologue_gemm

    return load_prologue_gemm()


def _planes_model(x, y, mu, nu, moduli, k0, k1, n_out):
    """int32 planes of the staged residues' products over k in [k0, k1)."""
    ra = reference.residues(reference.scale_to_integers(x, mu, 1), moduli)[:, :, k0:k1].astype(np.int64)
    rb = reference.residues(reference.scale_to_integers(y, nu, 1), moduli)[:, :, k0:k1].astype(np.int64)
    out = np.zeros((len(moduli), x.shape[0], n_out), dtype=np.int64)
    for g in range(len(moduli)):
        out[g, :, :y.shape[0]] = ra[g] @ rb[g].T
    return out.astype(np.int32)  # |sum| < 2^31 for k1 - k0 <= K_CHUNK


# (m, n, k, moduli count, shift range): partial tiles in every direction; large shifts
# make |2^mu a| exceed 2^53 (the residue_scaled path, exponents past the 2^e table too)
KERNEL_CASES = [
    (1, 1, 1, 2, (0, 10)),
    (TILE_M, TILE_N, TILE_K, 5, (0, 40)),
    (TILE_M + 1, TILE_N - 3, TILE_K + 7, 8, (20, 60)),
    (2 * TILE_M + 37, TILE_N + 61, 3 * TILE_K - 5, 20, (40, 200)),
    (77, 3 * TILE_N + 9, 33, 15, (-5, 90)),
]


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}_N{c[3]}" for c in KERNEL_CASES])
@pytest.mark.parametrize("strided", [False, True], ids=["k-contiguous", "k-strided"])
def test_planes_equal_the_residue_products(kernel, dev, rng, case, strided):
    m, n, k, count, (lo, hi) = case
    moduli = MODULI_TABLE[:count]
    x = random_matrix(m, k, 2.0, rng)
    y = random_matrix(n, k, 2.0, rng)
    mu = rng.integers(lo, hi, size=m).astype(np.int32)
    nu = rng.integers(lo, hi, size=n).astype(np.int32)
    n_out = padded_n(n)
    if strided:  # element l of vector v at v + l * nvec (the columns of a row-major matrix)
        a, a_vs, a_es = dev.put(np.ascontiguousarray(x.T)), 1, m
        b, b_vs, b_es = dev.put(np.ascontiguousarray(y.T)), 1, n
    else:
        a, a_vs, a_es = dev.put(x), k, 1
        b, b_vs, b_es = dev.put(y), k, 1
    c = dev.empty(4 * count * m * n_out)
    kernel(m, n, n_out, k, 0, padded_k(k), moduli, a, a_vs, a_es, dev.put(mu), b, b_vs, b_es,
           dev.put(nu), c.ptr, n_out, m * n_out)
    got = dev.get(c, np.int32, (count, m, n_out))
    want = _planes_model(x, y, mu, nu, moduli, 0, k, n_out)
    assert np.array_equal(got, want)


def test_a_k_window_sums_only_its_entries(kernel, dev, rng):
    m, n, k, k0, kl = 70, 90, 300, 64, 100
    moduli = MODULI_TABLE[:6]
    x, y = random_matrix(m, k, 1.0, rng), random_matrix(n, k, 1.0, rng)
    mu = rng.integers(10, 70, size=m).astype(np.int32)
    nu = rng.integers(10, 70, size=n).astype(np.int32)
    c = dev.empty(4 * len(moduli) * m * 92)
    kernel(m, n, 92, k, k0, kl, moduli, dev.put(x), k, 1, dev.put(mu), dev.put(y), k, 1, dev.put(nu),
           c.ptr, 92, m * 92)
    assert np.array_equal(dev.get(c, np.int32, (len(moduli), m, 92)),
                          _planes_model(x, y, mu, nu, moduli, k0, k0 + kl, 92))


def test_refuses_a_k_window_past_exact_int32(kernel):
    with pytest.raises(UnsupportedProblem, match="2\\^17"):
        kernel(4, 4, 4, 2**18, 0, 2**17 + 16, (256, 255), 16, 2**18, 1, 16, 16, 2**18, 1, 16, 16, 4, 16)


# --- whole calls ---------------------------------------------------------------------
SHAPES = [(1, 1, 1), (5, 130, 33), (129, 63, 200), (TILE_M * 2 + 1, TILE_N + 5, TILE_K * 3 + 1),
          (300, 257, 515)]


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("phi", [0.5, 2.0, 4.0])
def test_bit_identical_to_staged_and_reference(rng, mode, phi):
    for i, (m, n, k) in enumerate(SHAPES):
        count = (8, 15, 20, 11, 14)[i]
        ta, tb = bool(i % 2), bool(i % 3 == 0)
        a = random_matrix(k, m, phi, rng) if ta else random_matrix(m, k, phi, rng)
        b = random_matrix(n, k, phi, rng) if tb else random_matrix(k, n, phi, rng)
        want = reference.gemm(a, b, trans_a=ta, trans_b=tb, moduli=count, mode=mode)
        staged = ozaki_cutlass.gemm(a, b, trans_a=ta, trans_b=tb, moduli=count, mode=mode, path="staged")
        t = {}
        got = ozaki_cutlass.gemm(a, b, trans_a=ta, trans_b=tb, moduli=count, mode=mode, path="prologue",
                                 timings=t)
        assert t["path"] == "prologue" and t["kernel"] == VARIANT.name
        assert same_bits(got, want), (m, n, k, count, ta, tb)
        assert same_bits(got, staged), (m, n, k, count, ta, tb)


def test_alpha_beta_and_c(rng):
    m, n, k = 150, 140, 90
    a, b, c = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng), random_matrix(m, n, 1.0, rng)
    want = reference.gemm(a, b, c=c, alpha=-1.5, beta=0.25, moduli=12)
    got = ozaki_cutlass.gemm(a, b, c=c, alpha=-1.5, beta=0.25, moduli=12, path="prologue")
    assert same_bits(got, want)


def test_k_beyond_one_chunk(rng):
    m, n, k = 40, 33, K_CHUNK + 300
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    for mode in ("fast", "accurate"):
        want = reference.gemm(a, b, moduli=14, mode=mode)
        assert same_bits(ozaki_cutlass.gemm(a, b, moduli=14, mode=mode, path="prologue"), want)


def test_nonfinite_entries(rng):
    m, n, k = 130, 70, 100
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    a[3, 5], b[7, 2], a[100, 0] = np.nan, np.inf, -np.inf
    want = reference.gemm(a, b, moduli=10)
    assert same_bits(ozaki_cutlass.gemm(a, b, moduli=10, path="prologue"), want)


def test_auto_never_takes_the_prologue_path(rng):
    a, b = random_matrix(200, 100, 1.0, rng), random_matrix(100, 150, 1.0, rng)
    t = {}
    ozaki_cutlass.gemm(a, b, moduli=12, timings=t)
    assert t["path"] != "prologue"
