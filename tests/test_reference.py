"""The NumPy reference of the Ozaki scheme II: exactness, rigour of the bound, accuracy."""

import math

import numpy as np
import pytest

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import dd_product, exact_product, normwise_error, random_matrix
from ozaki_cutlass.numerics.contract import CONTRACT_MODULI
from ozaki_cutlass.numerics.moduli import K_CHUNK, MAX_MODULI, MIN_MODULI, crt_constants, symmetric_residue

ALL_COUNTS = range(MIN_MODULI, MAX_MODULI + 1)
MODES = ("fast", "accurate")


def bits(x):
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64)


# --------------------------------------------------------------------------- stages

@pytest.mark.parametrize("count", [2, 7, 14, 20])
def test_residues_match_python_integers(rng, count):
    consts = crt_constants(count)
    # integer-valued doubles from 0 up to 2^(pb) in magnitude, both signs
    mags = np.ldexp(rng.random((7, 33)), rng.integers(0, consts.bound_exponent, (7, 33)))
    x = np.trunc(mags) * rng.choice([-1.0, 1.0], (7, 33))
    x[0, :4] = [0.0, -0.0, 2.0**53, -(2.0**60)]
    r = R.residues(x, consts.moduli)
    assert r.dtype == np.int8 and r.shape == (count, 7, 33)
    for g, m in enumerate(consts.moduli):
        for idx, v in np.ndenumerate(x):
            assert r[(g,) + idx] == symmetric_residue(int(v), m), (m, v)


@pytest.mark.parametrize("count", ALL_COUNTS)
def test_crt_reconstruct_recovers_integers(rng, count):
    """Every integer the scaling admits (|X| <= 2^pb, just under P/2) comes back."""
    consts = crt_constants(count)
    lim = 2**consts.bound_exponent
    values = [0, 1, -1, lim, -lim, lim - 1, 2**52 + 1, -(2**40 - 3)]
    values += [int(v) for v in rng.integers(-(2**62), 2**62, 20)]
    values += [int.from_bytes(rng.bytes(24), "little") % (2 * lim + 1) - lim for _ in range(40)]
    values = [v for v in values if abs(v) <= lim]
    r = np.array([[[v % m for v in values]] for m in consts.moduli], dtype=np.int32)
    x = R.crt_reconstruct(r, consts)[0]
    for v, got in zip(values, x):
        if abs(v) <= 2**53:
            assert got == v
        else:  # one rounding of a ~160-bit integer: within one ulp
            assert abs(int(got) - v) <= math.ulp(abs(float(v))), (v, got)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("count", [2, 8, 14, 20])
def test_scaling_bound_is_rigorous(rng, mode, count):
    """sum_l |A'_il||B'_lj| < P/2 checked with Python integers on hostile inputs."""
    consts = crt_constants(count)
    a = random_matrix(12, 40, 4.0, rng)
    b = random_matrix(40, 9, 4.0, rng)
    a[3] *= 2.0**600
    a[4] *= 2.0**-600
    a[5, ::2] = 0.0
    b[:, 2] *= 2.0**-1060            # subnormal column
    b[:, 3] = 0.0
    b[7, :] *= 2.0**300
    sc = R.choose_scaling(a, b, consts, mode)
    ai = R.scale_to_integers(a, sc.mu, axis=1)
    bi = R.scale_to_integers(b, sc.nu, axis=0)
    A = np.vectorize(lambda v: abs(int(v)), otypes=[object])(ai)
    B = np.vectorize(lambda v: abs(int(v)), otypes=[object])(bi)
    worst = max(A.dot(B).flat)
    assert worst <= 2**consts.bound_exponent < consts.product // 2
    # and the bound is not vacuous: most of the budget is used
    assert worst > 2 ** (consts.bound_exponent - 16)


def test_accurate_shifts_never_below_fast(rng):
    consts = crt_constants(14)
    a = random_matrix(30, 50, 2.0, rng)
    b = random_matrix(50, 20, 2.0, rng)
    fast = R.choose_scaling(a, b, consts, "fast")
    acc = R.choose_scaling(a, b, consts, "accurate")
    assert (acc.mu >= fast.mu).all() and (acc.nu >= fast.nu).all()
    assert (acc.mu > fast.mu).any() or (acc.nu > fast.nu).any()


def test_modular_products_split_long_k(rng):
    """k > K_CHUNK: every chunk is an exact int32 sum; the residues equal Python's."""
    k = K_CHUNK + 300
    consts = crt_constants(3)
    ra = np.full((3, 2, k), -128, dtype=np.int8)
    rb = np.full((3, 3, k), -128, dtype=np.int8)
    ra[:, 1] = rng.integers(-127, 128, (3, k))
    out = R.modular_products(ra, rb, consts.moduli)
    for g, m in enumerate(consts.moduli):
        exact = ra[g].astype(np.int64) @ rb[g].astype(np.int64).T
        assert (out[g] == exact % m).all()
    assert 128 * 128 * K_CHUNK < 2**31  # one chunk never overflows int32


# --------------------------------------------------------------------------- gemm exactness

@pytest.mark.parametrize("mode", MODES)
def test_integer_inputs_exact_bit_for_bit(rng, mode):
    m, k, n = 17, 64, 23
    a = rng.integers(-100, 101, (m, k)).astype(np.float64)
    b = rng.integers(-100, 101, (k, n)).astype(np.float64)
    exact = a @ b  # |sums| < 2^53: float64 @ is exact here
    assert np.array_equal(exact, a.astype(np.int64) @ b.astype(np.int64))
    e_max = 7  # 100 < 2^7
    promised = []
    for count in ALL_COUNTS:
        consts = crt_constants(count)
        sc = R.choose_scaling(a, b, consts, mode)
        got = R.gemm(a, b, moduli=count, mode=mode)
        if consts.bound_exponent >= 2 * e_max + math.ceil(math.log2(k)) + 1:
            # the fast bound then provably keeps every bit (shifts >= 0) ...
            assert (sc.mu >= 0).all() and (sc.nu >= 0).all(), count
            promised.append(count)
        if (sc.mu >= 0).all() and (sc.nu >= 0).all():
            # ... and no bit dropped means the exact product, bit for bit
            assert np.array_equal(bits(got), bits(exact)), count
    assert promised == list(range(promised[0], MAX_MODULI + 1)) and promised[0] <= 4


def test_k_equal_one_and_exact_when_all_bits_fit(rng):
    a = rng.standard_normal((9, 1))
    b = rng.standard_normal((1, 7))
    got = R.gemm(a, b, moduli=20)
    # 53 + 53 bits fit in 20 moduli: the exact product rounded once, like a @ b
    assert np.array_equal(bits(got), bits(a @ b))


def test_zero_rows_columns_and_subnormals(rng):
    a = random_matrix(8, 16, 1.0, rng)
    b = random_matrix(16, 6, 1.0, rng)
    a[2] = 0.0
    b[:, 4] = 0.0
    a[5] *= 2.0**-1050          # subnormal row
    b[:, 1] *= 2.0**-1040       # subnormal column
    hi, lo = exact_product(a, b)
    for mode in MODES:
        got = R.gemm(a, b, moduli=16, mode=mode)
        assert (got[2] == 0).all() and (got[:, 4] == 0).all()
        # every entry within a few ulps of the exact value (subnormal ones absolutely)
        tol = np.maximum(4 * np.spacing(np.abs(hi)), 2.0**-1074)
        assert (np.abs(got - hi) <= tol + np.abs(hi) * 2.0**-45).all()


def test_transposes_alpha_beta(rng):
    a = random_matrix(20, 13, 0.5, rng)
    b = random_matrix(11, 20, 0.5, rng)
    c = random_matrix(13, 11, 0.5, rng)
    base = R.gemm(a.T, b.T, moduli=18)
    got = R.gemm(a, b, trans_a=True, trans_b=True, moduli=18)
    assert np.array_equal(bits(got), bits(base))
    got2 = R.gemm(a, b, c=c, alpha=-2.5, beta=0.75, trans_a=True, trans_b=True, moduli=18)
    assert np.array_equal(bits(got2), bits(-2.5 * base + 0.75 * c))
    c_before = c.copy()
    R.gemm(a.T, b.T, c=c, beta=1.0)
    assert np.array_equal(c, c_before)  # c is not modified


def test_k_above_chunk(rng):
    k = K_CHUNK + 77
    a = rng.integers(-2**20, 2**20, (3, k)).astype(np.float64)
    b = rng.integers(-2**20, 2**20, (k, 2)).astype(np.float64)
    exact = a.astype(np.int64) @ b.astype(np.int64)  # < k 2^40 < 2^63
    got = R.gemm(a, b, moduli=20)
    ref = np.array([[float(v) for v in row] for row in exact.tolist()])  # correctly rounded
    assert np.array_equal(got, ref)


# --------------------------------------------------------------------------- non-finite

def _ieee_matmul(a, b):
    """float64 semantics of a @ b term by term (no BLAS shortcuts around zeros)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (a[:, :, None] * b[None, :, :]).sum(axis=1)


def test_nan_inf_pattern_matches_float64(rng):
    a = random_matrix(10, 12, 1.0, rng)
    b = random_matrix(12, 9, 1.0, rng)
    a[1, 3] = np.nan
    a[2, 0] = np.inf
    a[3, 5] = -np.inf
    a[3, 6] = np.inf          # +inf and -inf in one row
    a[4, 7] = np.inf
    b[7, 2] = 0.0             # inf * 0 -> nan in (4, 2)
    b[0, 4] = -np.inf
    b[8, 8] = np.nan
    expect = _ieee_matmul(a, b)
    with np.errstate(invalid="ignore"):  # the NaNs are the point
        assert np.array_equal(np.isnan(expect), np.isnan(a @ b))
    for mode in MODES:
        got = R.gemm(a, b, moduli=12, mode=mode)
        assert np.array_equal(np.isnan(got), np.isnan(expect))
        assert np.array_equal(np.isposinf(got), np.isposinf(expect))
        assert np.array_equal(np.isneginf(got), np.isneginf(expect))
        fin = np.isfinite(expect)
        assert np.isfinite(got[fin]).all()
    assert np.isnan(expect).any() and np.isposinf(expect).any() and np.isneginf(expect).any()


def test_nan_in_c_only_read_when_beta_nonzero(rng):
    a, b = random_matrix(4, 5, 1, rng), random_matrix(5, 3, 1, rng)
    c = np.full((4, 3), np.nan)
    assert np.isfinite(R.gemm(a, b, c=c, beta=0.0)).all()
    assert np.isnan(R.gemm(a, b, c=c, beta=1.0)).all()
    assert np.array_equal(R.gemm(a, b, c=np.ones((4, 3)), alpha=0.0, beta=2.0), np.full((4, 3), 2.0))


# --------------------------------------------------------------------------- accuracy

@pytest.mark.parametrize("phi", [0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("n", [64, 128, 256])
def test_18_moduli_at_least_as_accurate_as_float64(rng, phi, n):
    a = random_matrix(n, n, phi, rng)
    b = random_matrix(n, n, phi, rng)
    hi, lo = exact_product(a, b) if n <= 128 else dd_product(a, b)
    native = normwise_error(a @ b, hi, lo)
    ours = normwise_error(R.gemm(a, b, moduli=18, mode="accurate"), hi, lo)
    assert ours <= native, (ours, native)


def _hostile(rng):
    a = random_matrix(24, 48, 4.0, rng)
    b = random_matrix(48, 20, 4.0, rng)
    a[0] *= 2.0**600
    a[1] *= 2.0**-600
    a[2] *= 2.0**300
    b[:, 0] *= 2.0**-1050    # subnormal columns
    b[:, 1] *= 2.0**-1065
    b[:, 2] *= 2.0**300
    return a, b


@pytest.mark.parametrize("mode", MODES)
def test_no_wraparound_on_hostile_inputs(rng, mode):
    """From 8 moduli on, every row and every column is accurate to 1e-3: a CRT wrap
    (an error of order P/2 in the integer product) would show as O(1) errors."""
    a, b = _hostile(rng)
    hi, lo = exact_product(a, b)
    normal_cols = [j for j in range(b.shape[1]) if j not in (0, 1)]
    for count in CONTRACT_MODULI:
        got = R.gemm(a, b, moduli=count, mode=mode)
        assert normwise_error(got, hi, lo) <= 1e-3
        for i in range(a.shape[0]):
            assert normwise_error(got[i, normal_cols], hi[i, normal_cols], lo[i, normal_cols]) <= 1e-3, (count, i)
        for j in range(b.shape[1]):
            assert normwise_error(got[2:, j], hi[2:, j], lo[2:, j]) <= 1e-3, (count, j)


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(a=np.ones(3), b=np.ones((3, 2))), ValueError, "a must be 2-D"),
        (dict(a=np.ones((2, 3)), b=np.ones((2, 2, 2, 2))), ValueError, "b must be 2-D"),
        (dict(a=np.ones((2, 3)), b=np.ones((4, 2))), ValueError, "inner dimensions"),
        (dict(a=np.ones((2, 3), dtype=np.int64), b=np.ones((3, 2))), TypeError, "a must be float64, got int64"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2), dtype=complex)), TypeError, "a must be complex128, got float64"),
        (dict(a=np.ones((2, 3), dtype=np.float32), b=np.ones((3, 2))), TypeError, "a must be float64, got float32"),
        (dict(a=np.ones((2, 3), dtype=np.float16), b=np.ones((3, 2))), TypeError, "a must be float64, got float16"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2), dtype=np.longdouble)), TypeError, "b must be float64"),
        (dict(a=np.ma.masked_array(np.ones((2, 3)), mask=np.eye(2, 3)), b=np.ones((3, 2))), TypeError,
         "a is a masked array"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), c=np.ones((2, 2), dtype=np.float32), beta=1.0), TypeError,
         "c must be float64"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), trans_a="yes"), ValueError, "trans_a must be one of 'N', 'T', 'C'"),
        (dict(a=np.ones((3, 2)), b=np.ones((3, 2)), trans_a=1), TypeError, "trans_a must be False, True, 'N', 'T' or 'C'"),
        (dict(a=np.ones((2, 3)), b=np.ones((2, 3)), trans_b=None), TypeError, "trans_b must be False, True, 'N', 'T' or 'C'"),
        (dict(a=[[1.0]], b=np.ones((1, 1))), TypeError, "a must be a numpy.ndarray"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), moduli=1), ValueError, "moduli=1"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), moduli=21), ValueError, "moduli=21"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), moduli=14.0), TypeError, "moduli must be an int"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), mode="exact"), ValueError, "mode must be one of"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), c=np.ones((3, 3)), beta=1.0), ValueError, "c must have shape"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), beta=1.0), ValueError, "beta != 0 needs c"),
        (dict(a=np.ones((2, 3)), b=np.ones((3, 2)), alpha="1"), TypeError, "alpha must be a real number"),
    ],
)
def test_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        R.gemm(**kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(a=np.ones((2, 3), dtype=np.float32), b=np.ones((3, 2))),
    dict(a=np.ma.masked_array(np.ones((2, 3)), mask=np.eye(2, 3)), b=np.ones((3, 2))),
    dict(a=np.ones((2, 3)), b=np.ones((3, 2)), trans_a="yes"),
    dict(a=np.ones((2, 3)), b=np.ones((2, 3)), trans_b=None),
    dict(a=np.ones((2, 3)), b=np.ones((3, 2)), mode="exact"),
])
def test_reference_and_gpu_api_refuse_alike(kwargs):
    """The reference and ozaki_cutlass.gemm take the same inputs: the same error, type and
    words, before any GPU work (the GPU path checks all of these before touching a GPU)."""
    import ozaki_cutlass

    with pytest.raises(Exception) as ref:
        R.gemm(**kwargs)
    with pytest.raises(Exception) as gpu:
        ozaki_cutlass.gemm(**kwargs, policy="emulate")
    assert type(ref.value) is type(gpu.value) and str(ref.value) == str(gpu.value)


def test_mode_none_is_accurate_with_moduli_and_fast_under_the_contract(rng):
    a, b = random_matrix(6, 9, 2.0, rng), random_matrix(9, 5, 2.0, rng)
    bits = lambda x: x.view(np.int64)  # noqa: E731
    assert np.array_equal(bits(R.gemm(a, b, moduli=15, mode=None)), bits(R.gemm(a, b, moduli=15, mode="accurate")))
    assert not np.array_equal(bits(R.gemm(a, b, moduli=15)), bits(R.gemm(a, b, moduli=15, mode="fast")))
    assert np.array_equal(bits(R.gemm(a, b)), bits(R.gemm(a, b, mode="fast")))
    assert R.contract(a, b).mode == "fast" and R.contract(a, b, mode="accurate").mode == "accurate"


def test_the_default_runs_the_count_the_contract_chooses():
    assert R.DEFAULT_MODULI in range(MIN_MODULI, MAX_MODULI + 1)
    rng = np.random.default_rng(3)
    a, b = random_matrix(16, 24, 0.5, rng), random_matrix(24, 8, 0.5, rng)
    bits = lambda x: x.view(np.int64)  # noqa: E731
    choice = R.contract(a, b)
    assert not choice.equilibrated and not choice.native  # well scaled: the shifts alone
    assert np.array_equal(bits(R.gemm(a, b)), bits(R.gemm(a, b, moduli=choice.moduli, mode="fast")))
    for other in (choice.moduli - 1, choice.moduli + 1):  # the default is one count, not any
        assert not np.array_equal(bits(R.gemm(a, b)), bits(R.gemm(a, b, moduli=other, mode="fast")))


def test_same_bits_compares_bit_patterns():
    from ozaki_cutlass.numerics.accuracy import same_bits

    x = np.array([[1.0, -0.0], [np.nan, np.inf]])
    assert same_bits(x, x.copy())
    assert same_bits(x, np.asfortranarray(x))  # layout does not matter, bits do
    assert not same_bits(x, np.array([[1.0, 0.0], [np.nan, np.inf]]))  # -0.0 is not 0.0
    assert not same_bits(x, x[:1])
    y = x.copy()
    y[0, 0] = np.nextafter(1.0, 2.0)
    assert not same_bits(x, y)
