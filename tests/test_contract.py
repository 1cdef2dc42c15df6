"""The accuracy contract on the NumPy reference: against exact products (Python integers),
per input family; its bound, its choice, its fallback, its parameter, and the fixed-order
sums the GPU mirrors."""

import math
import warnings

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics import contract as K
from ozaki_cutlass.numerics.accuracy import exact_product, random_matrix
from ozaki_cutlass.numerics.contract import U
from ozaki_cutlass.templates.constants import INNER_CHUNK, REDUCE_LANES


def family(name: str, m: int, k: int, n: int, p: float, seed: int = 1):
    """The input families of docs/accuracy.md."""
    rng = np.random.default_rng(seed)
    if name == "phi":
        return random_matrix(m, k, p, rng), random_matrix(k, n, p, rng)
    if name == "inner":  # (A D)(D^-1 B), D = diag(2^+s, 2^-s, ...)
        a, b = random_matrix(m, k, 0.5, rng), random_matrix(k, n, 0.5, rng)
        d = np.where(np.arange(k) % 2 == 0, int(p), -int(p))
        return np.ldexp(a, d[None, :]), np.ldexp(b, -d[:, None])
    if name == "uniform":  # nonnegative: the truncation errors all have one sign
        return rng.random((m, k)), rng.random((k, n))
    if name == "rows":  # rows of A scaled by 2^+-p, columns of B by 2^+-(p/2)
        a, b = random_matrix(m, k, 0.5, rng), random_matrix(k, n, 0.5, rng)
        return (np.ldexp(a, rng.integers(-int(p), int(p) + 1, m)[:, None]),
                np.ldexp(b, rng.integers(-int(p) // 2, int(p) // 2 + 1, n)[None, :]))
    raise ValueError(name)


def fro(x) -> float:
    """||x||_F without overflow (x finite)."""
    x = np.asarray(x, dtype=np.float64)
    top = float(np.max(np.abs(x))) if x.size else 0.0
    if top == 0.0:
        return 0.0
    e = math.frexp(top)[1]
    return math.ldexp(float(np.sqrt(np.sum(np.ldexp(x, -e) ** 2))), e)


def errors(c, a, b):
    """(||c - AB||_F, || |A||B| ||_F, ||AB||_F), AB exact (Python integers)."""
    hi, lo = exact_product(a, b)
    d = (c - hi) - lo
    absab = exact_product(np.abs(a), np.abs(b))[0]
    return fro(d), fro(absab), fro(hi)


CASES = [("phi", 0.5, 2048), ("phi", 2.0, 2048), ("phi", 4.0, 2048), ("phi", 8.0, 2048),
         ("inner", 10, 1024), ("inner", 20, 1024), ("inner", 30, 1024), ("inner", 40, 1024),
         ("rows", 600, 1024), ("uniform", 0, 16384)]


@pytest.mark.parametrize("name, p, k", CASES)
def test_default_is_never_less_accurate_than_float64(name, p, k):
    """The default call's error against the exact product is at most float64 ``@``'s (or the
    rounding floor u ||AB||_F where float64 is correctly rounded), and within the certified
    bound; today's fixed 15 moduli fail this on the wide families."""
    m, n = (4, 4) if k > 4096 else (12, 10)
    a, b = family(name, m, k, n, p)
    choice = R.contract(a, b)
    assert not choice.native and choice.bound <= U and choice.moduli in K.CONTRACT_MODULI
    ours, absab, exact = errors(R.gemm(a, b), a, b)
    ref, _, _ = errors(a @ b, a, b)
    assert ours <= max(ref, U * exact) * 1.01
    assert ours <= choice.bound * absab + U * exact  # the certificate holds


def test_inner_scales_need_the_equilibration():
    a, b = family("inner", 8, 512, 8, 30)
    choice = R.contract(a, b)
    assert choice.equilibrated and choice.moduli <= 17
    ours, absab, exact = errors(R.gemm(a, b), a, b)
    assert ours <= 2 * U * exact
    fixed, _, _ = errors(R.gemm(a, b, moduli=20), a, b)  # no equilibration without the contract
    assert fixed > 1e-6 * exact


def test_a_two_term_dot_product_with_offset_scales():
    a = np.array([[2.0**35, 2.0**-35]])
    b = np.array([[2.0**-35], [2.0**35]])
    assert R.gemm(a, b)[0, 0] == 2.0
    assert R.gemm(a, b, moduli=15)[0, 0] == 0.0  # what the fixed count returned before


def test_subnormal_inputs_and_their_bound():
    rng = np.random.default_rng(5)
    a = np.ldexp(random_matrix(6, 64, 1.0, rng), -1060)  # subnormal and tiny normal entries
    b = np.ldexp(random_matrix(64, 5, 1.0, rng), 1000)
    choice = R.contract(a, b)
    assert not choice.native and choice.bound <= U
    ours, absab, exact = errors(R.gemm(a, b), a, b)
    assert ours <= choice.bound * absab + U * exact


def test_scale_invariance():
    """Powers of two on A and B change nothing but the exponent of the result."""
    a, b = family("phi", 9, 300, 7, 2.0)
    base = R.gemm(a, b)
    for s, t in ((100, -40), (-900, 700), (3, 5)):
        assert R.contract(np.ldexp(a, s), np.ldexp(b, t)) == R.contract(a, b)
        assert np.array_equal(R.gemm(np.ldexp(a, s), np.ldexp(b, t)), np.ldexp(base, s + t))


def test_fallback_where_no_count_meets_the_target():
    # |A||B| = 0 with non-zero operands (disjoint supports): the lower bound of
    # || |A||B| || is 0, so no count certifies anything relative to it
    a = np.array([[1.0, 0.0], [2.0, 0.0]])
    b = np.array([[0.0, 0.0, 0.0], [3.0, 1.0, 5.0]])
    choice = R.contract(a, b)
    assert choice.native and choice.moduli is None and "native DGEMM" in choice.reason
    assert np.array_equal(R.gemm(a, b), a @ b)
    with pytest.warns(ozaki_cutlass.AccuracyWarning, match="20 moduli certify inf"):
        c = R.gemm(a, b, policy="emulate")
    assert np.array_equal(c, a @ b)  # exact all the same (the bound is only an upper bound)
    chosen = R.contract(a, b, policy="emulate")
    assert chosen.moduli == 20 and not chosen.native and chosen.reason


def test_a_target_beyond_20_moduli_runs_20_with_a_warning():
    a, b = family("phi", 8, 256, 8, 0.5)
    choice = R.contract(a, b, accuracy=2.0**-100)  # no fallback: native is no better
    assert choice.moduli == 20 and not choice.native and choice.bound > 2.0**-100
    with pytest.warns(ozaki_cutlass.AccuracyWarning, match="above the target") as caught:
        c = R.gemm(a, b, accuracy=2.0**-100)
    assert np.array_equal(c, R.gemm(a, b, moduli=20, mode="fast"))
    # the warning names the caller's line, through any entry point (here a batch and a complex call)
    with pytest.warns(ozaki_cutlass.AccuracyWarning) as batched:
        R.gemm(np.stack([a, a]), b, accuracy=2.0**-100)
    with pytest.warns(ozaki_cutlass.AccuracyWarning) as complex_call:
        R.gemm(a + 0j, b + 0j, accuracy=2.0**-100)
    assert {w.filename for w in [*caught, *batched, *complex_call]} == {__file__}


def test_accuracy_orders_the_count():
    a, b = family("phi", 8, 512, 8, 1.0)
    counts = [R.contract(a, b, accuracy=t).moduli for t in (1e-8, 1e-12, U, 1e-18, 1e-22)]
    assert counts == sorted(counts) and counts[0] < counts[2] < counts[-1]
    assert R.contract(a, b, accuracy="dgemm") == R.contract(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loose, absab, exact = errors(R.gemm(a, b, accuracy=1e-8), a, b)
    assert loose <= 1e-8 * absab + U * exact


@pytest.mark.parametrize("bad, kind, match", [
    (0.0, ValueError, "out of range"), (1.0, ValueError, "out of range"), (-1e-16, ValueError, "out of range"),
    (float("nan"), ValueError, "out of range"), (float("inf"), ValueError, "out of range"),
    (2.0**-101, ValueError, "out of range"), ("high", ValueError, '"dgemm" or a number'),
    (True, TypeError, "accuracy must be"), ([1e-16], TypeError, "accuracy must be")])
def test_bad_accuracy_is_refused(bad, kind, match):
    a, b = np.ones((2, 3)), np.ones((3, 2))
    with pytest.raises(kind, match=match):
        R.gemm(a, b, accuracy=bad)
    with pytest.raises(kind, match=match):
        R.contract(a, b, accuracy=bad)


def test_moduli_and_accuracy_are_exclusive():
    with pytest.raises(ValueError, match="not both"):
        R.gemm(np.ones((2, 3)), np.ones((3, 2)), moduli=15, accuracy=1e-20)


def test_explicit_moduli_skips_the_contract():
    a, b = family("inner", 6, 256, 5, 20)
    for count in (9, 15, 20):
        got = R.gemm(a, b, moduli=count, mode="fast")
        consts = R.crt_constants(count)
        sc = R.choose_scaling(a, b, consts, "fast")  # the shifts without any equilibration
        assert np.array_equal(got, R.unscale(R.crt_reconstruct(R.modular_products(
            R.residues(R.scale_to_integers(a, sc.mu, 1), consts.moduli),
            R.residues(R.scale_to_integers(b, sc.nu, 0).T, consts.moduli), consts.moduli), consts),
            sc.mu, sc.nu, 1.0, 0.0, None))


def test_native_policy_and_empty_products():
    a, b = family("phi", 3, 4, 5, 1.0)
    assert np.array_equal(R.gemm(a, b, policy="native"), a @ b)
    with pytest.raises(ValueError, match="policy must be"):
        R.gemm(a, b, policy="fastest")
    assert R.contract(np.ones((0, 3)), np.ones((3, 2))).bound == 0.0
    assert R.gemm(np.ones((2, 0)), np.ones((0, 2))).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_nonfinite_inputs_keep_their_pattern():
    a, b = family("phi", 5, 40, 4, 1.0)
    a[1, 3], b[7, 2] = np.inf, np.nan
    with np.errstate(invalid="ignore"):
        want = a @ b
    got = R.gemm(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))


# --------------------------------------------------------------------------- the mirrors

def test_fixed_order_sum_is_the_kernels_order():
    rng = np.random.default_rng(2)
    x = np.ldexp(rng.random(1000), rng.integers(-60, 60, 1000))
    lanes = [0.0] * REDUCE_LANES
    for i, v in enumerate(x):  # lane t adds t, t + LANES, ... in sequence
        lanes[i % REDUCE_LANES] += float(v)
    h = REDUCE_LANES // 2
    while h:
        lanes = [lanes[t] + lanes[t + h] for t in range(h)]
        h //= 2
    assert K.fixed_order_sum(x) == lanes[0]
    assert K.fixed_order_sum(np.zeros(0)) == 0.0


def test_inner_stats_is_the_kernels_order():
    rng = np.random.default_rng(4)
    v = np.ldexp(random_matrix(300, 7, 3.0, rng), 600)
    v[5, 2], v[:, 4] = np.inf, 0.0
    v[7, 6] = 2.0**-1070  # 2^-1669 of its column's largest: counts as 0 in the sum
    v[200, 5] = -(2.0**-1000)  # alone in its run: the run's own scale keeps it
    v[128:256, 5] = np.where(np.arange(128) == 72, v[200, 5], 0.0)
    exps, sums = K.inner_stats(v)
    flush = -960
    for l in range(7):
        finite = [float(x) for x in v[:, l] if math.isfinite(x) and x != 0]
        top = max(math.frexp(x)[1] for x in finite) if finite else K.NO_EXPONENT
        assert exps[l] == top
        total = 0.0
        for r0 in range(0, 300, INNER_CHUNK):  # one pass per run, relative to the largest so far
            rtop, s = K.NO_EXPONENT, 0.0
            for x in v[r0:r0 + INNER_CHUNK, l]:
                if not math.isfinite(x) or x == 0:
                    continue
                e = math.frexp(float(x))[1]
                if e > rtop:
                    if s > 0:
                        s = math.ldexp(s, rtop - e) if math.frexp(s)[1] + rtop - e > flush else 0.0
                    rtop = e
                if e - rtop > flush:
                    s += math.ldexp(abs(float(x)), -rtop)
            if s > 0 and math.frexp(s)[1] + rtop - top > flush:
                total += math.ldexp(s, rtop - top)
        assert sums[l] == total
    assert sums[5] > 0 and sums[4] == 0.0


def test_equilibration_rule():
    ea = np.array([10, 0, 5, K.NO_EXPONENT, -7])
    eb = np.array([0, 10, 5, 3, 0])
    assert K.equilibration(ea, eb).tolist() == [5, -5, 0, 0, -4]
    assert K.equilibration(np.array([1, 2]), np.array([0, 0])).tolist() == [0, 0]  # spread < 3


def test_a_target_below_dgemms_falls_back_only_when_20_moduli_do_not_reach_dgemms():
    """The rule the GPU shares: under "auto", native where 20 moduli certify neither the
    target nor 2^-53; a tighter target that 20 moduli miss but whose 2^-53 they reach runs
    20 moduli with a warning."""
    cert = K.Certificate((1.0, 1.0), (1.0, 1.0), 1.0, (1.0, 1.0), (1.0, 1.0), 1.0, 1e-30, 4, 4, 4, False, 0)
    assert cert.relative_bound(20) > U
    assert K.choose(cert, 1e-20, "fast", True).native
    assert not K.choose(cert, 1e-20, "fast", False).native
    a, b = family("phi", 6, 64, 6, 0.5)
    tight = R.contract(a, b, accuracy=2.0**-100)
    assert tight.moduli == 20 and not tight.native  # 20 moduli reach 2^-53: no fallback


def test_a_product_that_may_overflow_runs_native_or_warns():
    """An entry far below its row's and column's scales can be truncated to 0 (or the
    wrong sign) where its true value overflows (docs/accuracy.md): where k 2^(RA + RB) may
    pass 2^1023, "auto" runs native DGEMM (its Inf) and "emulate" warns. Just below, the
    contract runs as before."""
    p = lambda e: np.ldexp(1.0, e)  # noqa: E731
    a = np.array([[p(1000), p(500)], [p(500), p(1000)]])
    b = np.array([[p(500), p(1000)], [p(1000), p(500)]])
    choice = R.contract(a, b)
    assert choice.native and "beyond float64's range (k 2^2002 > 2^1023)" in choice.reason
    with np.errstate(over="ignore"):  # float64 @ overflows (NumPy says so): that is the result wanted
        want = a @ b
        assert np.array_equal(R.gemm(a, b), want) and np.isinf(want).all()
        with pytest.warns(K.AccuracyWarning, match="may lie beyond float64's range"):
            R.gemm(a, b, policy="emulate")
    assert not R.contract(a, b, policy="emulate").native
    # k 2^(RA + RB) = 2^1023 exactly: no entry can pass 2^1023, nothing said
    a, b = np.array([[p(510), p(510)]]), np.array([[p(510)], [p(510)]])  # |a|, |b| < 2^511, k = 2
    assert not R.contract(a, b).native and R.contract(a, b).reason == ""
    assert R.gemm(a, b)[0, 0] == p(1021)
    a[0, 0] = p(511)  # RA = 512: k 2^1024
    assert R.contract(a, b).native
    # the GPU's read: RA and RB after the 12 sums
    values = np.zeros(14)
    values[10], values[12], values[13] = 1.0, 600.0, 430.0
    read = K.Certificate.from_values(values, 2, 2, 2)
    assert read.top == 1030 and read.may_overflow
