"""ozaki_cutlass.gemm on the GPU equals ozaki_cutlass.reference.gemm bit for bit.

Fresh random inputs (phi family) per test; shapes include 1, odd sizes, k > K_CHUNK,
transposes, strided views; every INT8 GEMM variant of both arches gives the same bits.
"""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import dispatch, reference
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits
from ozaki_cutlass.numerics.contract import CONTRACT_MODULI
from ozaki_cutlass.numerics.moduli import K_CHUNK
from variants_support import ALL_VARIANTS

pytestmark = pytest.mark.gpu

# the kernels the shipped tuning table routes to (swizzled tile orders among them)
_TABLE, _TABLE_SOURCE = dispatch.load_table()
TABLE_CANDIDATES = dispatch.candidates_from_table(_TABLE, _TABLE_SOURCE)


def _problem(rng, m, n, k, phi, trans_a=False, trans_b=False):
    a = random_matrix(k, m, phi, rng) if trans_a else random_matrix(m, k, phi, rng)
    b = random_matrix(n, k, phi, rng) if trans_b else random_matrix(k, n, phi, rng)
    return a, b


SHAPES = [(1, 1, 1), (1, 7, 3), (5, 1, 33), (17, 19, 1), (33, 65, 127), (129, 63, 200), (200, 301, 515)]


@pytest.mark.parametrize("path", ["staged", "fused"])
@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("phi", [0.5, 1.0, 2.0, 4.0])
def test_bit_identical_to_reference(rng, mode, phi, path):
    for i, (m, n, k) in enumerate(SHAPES):
        count = 8 + (i * 5 + int(phi * 3)) % 13          # 8..20 across the cases
        ta, tb = bool(i % 2), bool(i % 3 == 0)
        a, b = _problem(rng, m, n, k, phi, ta, tb)
        want = reference.gemm(a, b, trans_a=ta, trans_b=tb, moduli=count, mode=mode)
        t = {}
        got = ozaki_cutlass.gemm(a, b, trans_a=ta, trans_b=tb, moduli=count, mode=mode, path=path, timings=t)
        assert same_bits(got, want), (m, n, k, count, ta, tb, t["path"], t["kernel"])


@pytest.mark.parametrize("count", CONTRACT_MODULI)
def test_every_moduli_count(rng, count):
    a, b = _problem(rng, 70, 45, 150, 1.0)
    for mode in ("fast", "accurate"):
        assert same_bits(ozaki_cutlass.gemm(a, b, moduli=count, mode=mode),
                         reference.gemm(a, b, moduli=count, mode=mode))


def test_alpha_beta_and_c(rng):
    a, b = _problem(rng, 40, 50, 60, 2.0)
    c = random_matrix(40, 50, 2.0, rng)
    for alpha, beta in [(1.0, 1.0), (-2.5, 0.75), (0.0, 3.0), (1.5, 0.0)]:
        want = reference.gemm(a, b, c=c, alpha=alpha, beta=beta, moduli=16)
        assert same_bits(ozaki_cutlass.gemm(a, b, c=c, alpha=alpha, beta=beta, moduli=16), want)


def test_k_above_chunk(rng):
    a, b = _problem(rng, 3, 5, K_CHUNK + 1000, 0.5)
    for mode in ("fast", "accurate"):
        assert same_bits(ozaki_cutlass.gemm(a, b, moduli=14, mode=mode), reference.gemm(a, b, moduli=14, mode=mode))


def test_hostile_scaling(rng):
    a, b = _problem(rng, 24, 20, 48, 4.0)
    a[0] *= 2.0**600
    a[1] *= 2.0**-600
    a[2] = 0.0
    b[:, 0] *= 2.0**-1050
    b[:, 3] = 0.0
    for count in (8, 15, 20):
        for mode in ("fast", "accurate"):
            assert same_bits(ozaki_cutlass.gemm(a, b, moduli=count, mode=mode),
                             reference.gemm(a, b, moduli=count, mode=mode))


@pytest.mark.parametrize("path", ["staged", "fused"])
@pytest.mark.parametrize("m,n,k", [(40, 1030, 24), (21, 4096, 16), (9, 1025, 40)])
def test_accurate_shifts_from_one_read(rng, path, m, n, k):
    """n >= 1024: the accurate shifts read the coarse GEMM's int32 output once (n not a
    multiple of 4 included, and zero and tiny columns); the same bits as the reference."""
    for tb in (False, True):
        a, b = _problem(rng, m, n, k, 2.0, trans_b=tb)
        cols = b.T if tb else b  # B's columns, as views
        cols[:, 1] = 0.0
        cols[:, 2] *= 2.0**-1040
        want = reference.gemm(a, b, trans_b=tb, moduli=15, mode="accurate")
        assert same_bits(ozaki_cutlass.gemm(a, b, trans_b=tb, moduli=15, mode="accurate", path=path), want)


def test_nan_inf_pattern(rng):
    a, b = _problem(rng, 10, 9, 12, 1.0)
    a[1, 3] = np.nan
    a[2, 0] = np.inf
    a[3, 5], a[3, 6] = -np.inf, np.inf
    a[4, 7] = np.inf
    b[7, 2] = 0.0
    b[0, 4] = -np.inf
    b[8, 8] = np.nan
    got = ozaki_cutlass.gemm(a, b, moduli=12)
    with np.errstate(invalid="ignore"):
        expect = a @ b
    assert np.array_equal(np.isnan(got), np.isnan(expect))
    assert np.array_equal(np.isposinf(got), np.isposinf(expect))
    assert np.array_equal(np.isneginf(got), np.isneginf(expect))
    assert same_bits(got, reference.gemm(a, b, moduli=12))


@pytest.mark.parametrize("variant", ALL_VARIANTS, ids=lambda v: v.name)
def test_every_variant_same_bits(rng, variant):
    a, b = _problem(rng, 150, 270, 300, 1.0)
    want = reference.gemm(a, b, moduli=15)
    for mode in ("fast", "accurate"):
        assert same_bits(ozaki_cutlass.gemm(a, b, moduli=15, mode=mode, kernel=variant),
                         reference.gemm(a, b, moduli=15, mode=mode))
    assert same_bits(ozaki_cutlass.gemm(a, b, moduli=15, kernel=variant.name), want)


@pytest.mark.parametrize("cand", TABLE_CANDIDATES, ids=lambda c: f"{c.path}-{c.variant.name}")
def test_table_kernels_same_bits(rng, cand):
    """Every kernel the shipped table can choose, on a shape of many tiles in both
    directions (so a swizzled tile order is exercised), equals the reference."""
    a, b = _problem(rng, 1100, 1300, 260, 1.0, trans_b=True)
    for mode in ("fast", "accurate"):
        got = ozaki_cutlass.gemm(a, b, trans_b=True, moduli=15, mode=mode, kernel=cand.variant, path=cand.path)
        assert same_bits(got, reference.gemm(a, b, trans_b=True, moduli=15, mode=mode))


@pytest.mark.parametrize("shape", [(3, 4, 0), (0, 4, 3), (3, 0, 5)])
def test_empty_problems_emulated(rng, shape):
    """Empty m, n or k on the emulated path: the reference's result (beta c, or an empty array)."""
    m, n, k = shape
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    c = random_matrix(m, n, 1.0, rng)
    for path in ("staged", "fused"):
        got = ozaki_cutlass.gemm(a, b, c=c, beta=0.5, path=path, policy="emulate")
        assert same_bits(got, reference.gemm(a, b, c=c, beta=0.5))


def test_timings_opt_in(rng):
    a, b = _problem(rng, 256, 256, 256, 0.5)
    t = {}
    ozaki_cutlass.gemm(a, b, policy="emulate", timings=t)
    assert set(t) >= {"scale", "residues", "int8_gemm", "crt", "total", "path", "kernel"}
    assert all(t[p] >= 0 for p in ("scale", "residues", "int8_gemm", "crt")) and t["total"] > 0


def test_out_numpy(rng):
    a, b = _problem(rng, 30, 20, 10, 0.5)
    out = np.full((30, 20), np.nan)
    r = ozaki_cutlass.gemm(a, b, out=out, policy="emulate")
    assert r is out and same_bits(out, reference.gemm(a, b))


# --------------------------------------------------------------------------- frameworks

def test_cupy_arrays_and_layouts(rng):
    cp = pytest.importorskip("cupy")
    a, b = _problem(rng, 64, 48, 80, 1.0)
    want = reference.gemm(a, b, moduli=16)
    # row-major, column-major (Fortran order) and a leading-dimension view
    big = cp.asarray(np.pad(a, ((0, 3), (0, 5))))
    for da, db in [(cp.asarray(a), cp.asarray(b)),
                   (cp.asfortranarray(cp.asarray(a)), cp.asfortranarray(cp.asarray(b))),
                   (big[:64, :80], cp.asarray(b))]:
        got = ozaki_cutlass.gemm(da, db, moduli=16)
        assert isinstance(got, cp.ndarray)
        assert same_bits(cp.asnumpy(got), want)
    out = cp.full((64, 48), cp.nan)
    assert ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), moduli=16, out=out) is out
    assert same_bits(cp.asnumpy(out), want)


def test_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    a, b = _problem(rng, 33, 41, 57, 2.0)
    c = random_matrix(33, 41, 1.0, rng)
    want = reference.gemm(a, b, c=c, beta=-1.0, moduli=18)
    ta, tb, tc = (torch.from_numpy(x).cuda() for x in (a, b, c))
    got = ozaki_cutlass.gemm(ta, tb, c=tc, beta=-1.0, moduli=18)
    assert isinstance(got, torch.Tensor) and got.is_cuda
    assert same_bits(got.cpu().numpy(), want)
    # transposed views (strides) instead of copies
    got_t = ozaki_cutlass.gemm(ta.t().contiguous().t(), tb, c=tc, beta=-1.0, moduli=18)
    assert same_bits(got_t.cpu().numpy(), want)
    with pytest.raises(ValueError, match="PyTorch tensor on cpu"):
        ozaki_cutlass.gemm(torch.from_numpy(a), tb)
    for policy in ("auto", "native", "emulate"):   # sparse: refused by name, also past the native fast lane
        with pytest.raises(TypeError, match=r"b is a PyTorch tensor with layout torch.sparse_coo.*to_dense"):
            ozaki_cutlass.gemm(ta, tb.to_sparse(), policy=policy)
        with pytest.raises(TypeError, match=r"a is a PyTorch tensor with layout torch.sparse_csr"):
            ozaki_cutlass.gemm(ta.to_sparse_csr(), tb, policy=policy)
    with pytest.raises(ValueError, match="all be NumPy arrays or all be GPU arrays"):
        ozaki_cutlass.gemm(a, tb)


def test_cuda_array_interface_object(rng):
    cp = pytest.importorskip("cupy")
    a, b = _problem(rng, 20, 30, 40, 0.5)

    class Plain:
        def __init__(self, arr):
            self._arr = arr
            self.__cuda_array_interface__ = arr.__cuda_array_interface__

    got = ozaki_cutlass.gemm(Plain(cp.asarray(a)), Plain(cp.asarray(b)), policy="emulate")
    assert hasattr(got, "__cuda_array_interface__") and not isinstance(got, cp.ndarray)
    assert same_bits(got.get(), reference.gemm(a, b))


# --------------------------------------------------------------------------- auto policy

def _close_to_float64(got, a, b, c=None, alpha=1.0, beta=0.0):
    want = alpha * (a @ b) + (beta * c if c is not None else 0.0)
    scale = np.abs(alpha) * (np.abs(a) @ np.abs(b)) + (np.abs(beta * c) if c is not None else 0.0)
    return np.all(np.abs(got - want) <= 1e-13 * scale + 1e-300)


def test_auto_policy_small_shape_runs_native(rng):
    """A small problem is predicted (H200 model) or measured (table) faster natively: the
    auto policy runs cuBLAS DGEMM, with float64 accuracy; an explicit moduli count, or
    policy="emulate", runs the emulation and gives the reference's bits."""
    a, b = _problem(rng, 96, 80, 64, 1.0)
    t = {}
    got = ozaki_cutlass.gemm(a, b, timings=t)
    assert t["path"] == "native" and t["kernel"] == "cublasDgemm_v2" and t["policy"]
    assert _close_to_float64(got, a, b)
    for kwargs in ({"moduli": 15}, {"policy": "emulate"}, {"path": "staged"}):
        t = {}
        got = ozaki_cutlass.gemm(a, b, timings=t, **kwargs)
        want = reference.gemm(a, b, moduli=kwargs.get("moduli"), policy="emulate")
        assert t["path"] in ("staged", "fused") and same_bits(got, want)


def test_native_policy_layouts_and_beta(rng):
    cp = pytest.importorskip("cupy")
    a, b = _problem(rng, 70, 50, 90, 1.0)
    c = random_matrix(70, 50, 1.0, rng)
    da, db, dc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    for xa, xb in [(da, db), (cp.asfortranarray(da), db), (da, cp.asfortranarray(db))]:
        got = ozaki_cutlass.gemm(xa, xb, c=dc, alpha=-0.5, beta=2.0, policy="native")
        assert _close_to_float64(cp.asnumpy(got), a, b, c, -0.5, 2.0)
        again = ozaki_cutlass.gemm(xa, xb, c=dc, alpha=-0.5, beta=2.0, policy="native")
        assert same_bits(cp.asnumpy(got), cp.asnumpy(again))  # run to run, same bits
    # transposes, NumPy in and out, k = 0
    got = ozaki_cutlass.gemm(a.T.copy(), b, trans_a=True, policy="native")
    assert _close_to_float64(got, a, b)
    z = ozaki_cutlass.gemm(np.ones((3, 0)), np.ones((0, 4)), c=np.full((3, 4), 2.0), beta=0.5, policy="native")
    assert np.array_equal(z, np.ones((3, 4)))
    # a layout cuBLAS cannot take (no unit stride): refused under "native", emulated under "auto"
    wide = cp.asarray(np.pad(a, ((0, 0), (0, 90))))[:, ::2]
    with pytest.raises(ValueError, match="cuBLAS cannot take"):
        ozaki_cutlass.gemm(wide, db, policy="native")
    t = {}
    got = ozaki_cutlass.gemm(wide, db, timings=t)
    assert t["path"] in ("staged", "fused")
    assert same_bits(cp.asnumpy(got), reference.gemm(cp.asnumpy(wide), b))
    with pytest.raises(ValueError, match="policy"):
        ozaki_cutlass.gemm(da, db, policy="fastest")


def test_native_nan_inf_pattern(rng):
    """Native DGEMM under auto (the general path's first call, then the fast lane): the
    NaN/Inf pattern of float64 @, and the same bits on both calls."""
    from ozaki_cutlass import call

    cp = pytest.importorskip("cupy")
    a, b = _problem(rng, 40, 36, 48, 1.0)
    a[1, 3], a[2, 0], a[3, 5], a[3, 6] = np.nan, np.inf, -np.inf, np.inf
    b[0, 4], b[8, 8], b[7, 2] = -np.inf, np.nan, 0.0
    da, db = cp.asarray(a), cp.asarray(b)
    t = {}
    first = ozaki_cutlass.gemm(da, db, timings=t)
    assert t["path"] == "native", t
    with pytest.MonkeyPatch.context() as mp:  # the second call must take the fast lane
        mp.setattr(call, "describe_input", lambda *args: pytest.fail("the general path ran"))
        fast = ozaki_cutlass.gemm(da, db)
    with np.errstate(invalid="ignore"):
        expect = a @ b
    for got in (cp.asnumpy(first), cp.asnumpy(fast)):
        assert np.array_equal(np.isnan(got), np.isnan(expect))
        assert np.array_equal(np.isposinf(got), np.isposinf(expect))
        assert np.array_equal(np.isneginf(got), np.isneginf(expect))
    assert same_bits(cp.asnumpy(first), cp.asnumpy(fast))


def test_native_fast_lane_same_result_as_the_general_path(rng):
    """The second auto call of a shape decided native skips the general path: same bits
    as the general native call, for CuPy and PyTorch, and transposed-view operands."""
    from ozaki_cutlass import call
    from ozaki_cutlass.dispatch.policy import DECISIONS

    cp = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    a, b = _problem(rng, 64, 48, 32, 1.0)
    for to in (cp.asarray, lambda x: torch.from_numpy(x).cuda()):
        xa, xb = to(a), to(b)
        first = ozaki_cutlass.gemm(xa, xb, policy="native")
        DECISIONS.clear()
        general = ozaki_cutlass.gemm(xa, xb, alpha=2)           # decides (native), general path
        assert any(v for v in DECISIONS.native.values())
        with pytest.MonkeyPatch.context() as mp:                # the fast lane: the general path would fail
            mp.setattr(call, "describe_input", lambda *args: pytest.fail("the general path ran"))
            fast = ozaki_cutlass.gemm(xa, xb, alpha=2)
        host = (lambda x: cp.asnumpy(x)) if isinstance(first, cp.ndarray) else (lambda x: x.cpu().numpy())
        assert same_bits(host(general), host(fast)) and same_bits(host(general), 2 * host(first))
        xt = to(np.ascontiguousarray(b.T)).T                    # a transposed view: column-major b
        assert same_bits(host(ozaki_cutlass.gemm(xa, xt)), host(ozaki_cutlass.gemm(xa, xt, policy="native")))
