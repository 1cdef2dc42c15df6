"""Complex GEMM on the NumPy reference (ozaki_cutlass.numerics.zgemm, reference.gemm on
complex128): against exact products, the flags, complex alpha and beta, NaN/Inf, bad
input. The GPU's bits against these: tests/gpu/test_zgemm_gpu.py."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics import zgemm as Z
from ozaki_cutlass.numerics.accuracy import exact_product, random_matrix


def crandom(m, n, phi, rng):
    return random_matrix(m, n, phi, rng) + 1j * random_matrix(m, n, phi, rng)


def op(x, flag):
    return {"N": x, "T": x.T, "C": x.conj().T}[flag]


def exact(a, b):
    """The exact complex a @ b as a complex double-double (hi, lo): the exact real product
    of the realified operands, which is it entry for entry."""
    hi, lo = exact_product(Z.realify_left(a), Z.realify_right(b))
    return hi.view(np.complex128), lo.view(np.complex128)


def test_realify_gives_the_complex_product_as_a_real_one():
    rng = np.random.default_rng(1)
    a, b = crandom(5, 7, 0.5, rng), crandom(7, 3, 0.5, rng)
    prod = (Z.realify_left(a) @ Z.realify_right(b)).view(np.complex128)
    np.testing.assert_allclose(prod, a @ b, rtol=1e-14, atol=1e-14)
    r = Z.realify_right(b)
    assert r[0, 0] == b[0, 0].real and r[0, 1] == b[0, 0].imag and r[1, 0] == -b[0, 0].imag and r[1, 1] == b[0, 0].real


@pytest.mark.parametrize("phi", [0.5, 4.0])
def test_default_is_within_its_certified_bound_and_not_worse_than_complex128(phi):
    rng = np.random.default_rng(int(phi * 10))
    a, b = crandom(24, 160, phi, rng), crandom(160, 16, phi, rng)
    choice = R.contract(a, b)
    ours, native = Z.sampled_error(R.gemm(a, b), a, b), Z.sampled_error(a @ b, a, b)
    assert not choice.native and ours <= choice.bound
    assert ours <= max(native, 2.0**-53)


@pytest.mark.parametrize("ta", ["N", "T", "C"])
@pytest.mark.parametrize("tb", ["N", "T", "C", False, True])
def test_flags_alpha_beta(ta, tb):
    rng = np.random.default_rng(3)
    a0, b0, c = crandom(9, 11, 0.5, rng), crandom(11, 6, 0.5, rng), crandom(9, 6, 0.5, rng)
    tbl = {False: "N", True: "T"}.get(tb, tb)
    a = {"N": a0, "T": a0.T.copy(), "C": a0.conj().T.copy()}[ta]
    b = {"N": b0, "T": b0.T.copy(), "C": b0.conj().T.copy()}[tbl]
    alpha, beta = 0.75 - 1.5j, -0.25 + 2j
    got = R.gemm(a, b, c=c, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, moduli=18)
    assert np.allclose(got, alpha * (op(a, ta) @ op(b, tbl)) + beta * c, rtol=1e-13, atol=1e-13)
    # the same bits as the steps spelled out
    t = R.gemm(Z.realify_left(a0), Z.realify_right(b0), moduli=18).view(np.complex128)
    want = Z.complex_axpby(t, alpha, beta, c)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_axpby_rounds_each_operation_in_its_order():
    t = np.array([[1 + 3j, -2.5 + 0.1j]])
    c = np.array([[0.3 - 0.7j, 1e-17 + 2j]])
    alpha, beta = 1.1 + 0.2j, -0.3 + 0.9j
    got = Z.complex_axpby(t, alpha, beta, c)
    for j in range(2):
        tr, ti, cr, ci = t[0, j].real, t[0, j].imag, c[0, j].real, c[0, j].imag
        re = (alpha.real * tr - alpha.imag * ti) + (beta.real * cr - beta.imag * ci)
        im = (alpha.real * ti + alpha.imag * tr) + (beta.real * ci + beta.imag * cr)
        assert got[0, j] == complex(re, im)


def test_alpha_one_beta_one_take_the_operand_as_it_is():
    t = np.array([[complex(np.inf, 1.0)]])
    c = np.array([[complex(2.0, np.inf)]])
    assert Z.complex_axpby(t, 1, 0, None)[0, 0] == complex(np.inf, 1.0)      # no 0 * Inf in Im
    got = Z.complex_axpby(t, 1, 1, c)[0, 0]
    assert got.real == np.inf and got.imag == np.inf
    nan_c = np.full((1, 1), complex(np.nan, np.nan))
    assert Z.complex_axpby(np.array([[1 + 1j]]), 2, 0, nan_c)[0, 0] == 2 + 2j  # beta 0: c not read


def test_alpha_zero_reads_neither_operand_and_beta_zero_not_c():
    nan = np.full((3, 3), complex(np.nan, np.nan))
    c = np.ones((3, 3), dtype=np.complex128)
    assert np.array_equal(R.gemm(nan, nan, c=c, alpha=0, beta=2j), 2j * c)
    ok = np.eye(3, dtype=np.complex128)
    assert np.array_equal(R.gemm(ok, ok, c=nan, beta=0.0), ok)
    assert R.gemm(np.zeros((2, 0), complex), np.zeros((0, 4), complex)).shape == (2, 4)


def test_nonfinite_entries_follow_complex128_matmul():
    rng = np.random.default_rng(5)
    a, b = crandom(6, 8, 0.5, rng), crandom(8, 5, 0.5, rng)
    a[1, 2] = complex(np.inf, 0.0)
    b[3, 4] = complex(1.0, np.nan)
    got = R.gemm(a, b)
    with np.errstate(invalid="ignore"):  # the non-finite entries are the point
        want = a @ b
    assert np.array_equal(np.isfinite(got), np.isfinite(want))
    fin = np.isfinite(want)
    assert np.allclose(got[fin], want[fin], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("call, kind, words", [
    (lambda a, b: R.gemm(a, b.real.copy()), TypeError, "b must be complex128, got float64"),
    (lambda a, b: R.gemm(a.astype(np.complex64), b), TypeError, "a must be complex128, got complex64"),
    (lambda a, b: R.gemm(a, b, trans_a="X"), ValueError, "trans_a must be one of 'N', 'T', 'C'"),
    (lambda a, b: R.gemm(a, b, trans_b=1), TypeError, "trans_b must be False, True, 'N', 'T' or 'C'"),
    (lambda a, b: R.gemm(a, b, alpha="2"), TypeError, "alpha must be a real or complex number"),
    (lambda a, b: R.gemm(a, b, beta=1j), ValueError, "beta != 0 needs c"),
    (lambda a, b: R.gemm(a, b, c=np.zeros((2, 2), complex), beta=1), ValueError, "c must have shape"),
    (lambda a, b: R.gemm(a, b.T), ValueError, "inner dimensions differ"),
    (lambda a, b: R.gemm(a[None, None], b), ValueError, "a must be 2-D"),
])
def test_bad_complex_input_is_refused_in_words(call, kind, words):
    a, b = np.ones((3, 4), complex), np.ones((4, 5), complex)
    with pytest.raises(kind, match=words.replace("(", r"\(").replace(")", r"\)")):
        call(a, b)


def test_gemm_refuses_bad_complex_input_with_the_references_words():
    a, b = np.ones((3, 4), complex), np.ones((4, 5), complex)
    for fn in (R.gemm, ozaki_cutlass.gemm):
        with pytest.raises(TypeError, match="b must be complex128, got float64"):
            fn(a, b.real.copy())
        with pytest.raises(ValueError, match="trans_a must be one of"):
            fn(a, b, trans_a="X")


def test_a_complex_contract_is_the_realified_ones():
    rng = np.random.default_rng(7)
    a, b = crandom(8, 30, 2.0, rng), crandom(30, 5, 2.0, rng)
    assert R.contract(a, b, trans_b="N") == R.contract(Z.realify_left(a), Z.realify_right(b))
    assert R.contract(a.conj().T.copy(), b, trans_a="C") == R.contract(Z.realify_left(a), Z.realify_right(b))


def test_real_operands_take_the_blas_letters_too():
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((7, 4))
    want = R.gemm(a, b, trans_a=True, moduli=14)
    for flag in ("T", "t", "C"):  # "C" is "T" for real operands
        assert np.array_equal(R.gemm(a, b, trans_a=flag, moduli=14).view(np.int64), want.view(np.int64))
    assert np.array_equal(R.gemm(a.T.copy(), b, trans_a="N", moduli=14).view(np.int64), want.view(np.int64))


def test_the_public_contract_of_complex_operands():
    rng = np.random.default_rng(11)
    a, b = crandom(6, 20, 1.0, rng), crandom(20, 4, 1.0, rng)
    assert ozaki_cutlass.contract(a, b) == R.contract(a, b)

    class Device:
        __cuda_array_interface__ = {"shape": (6, 20), "typestr": "<c16", "data": (1 << 30, False), "version": 3}

    with pytest.raises(ValueError, match="must both be GPU arrays"):
        ozaki_cutlass.contract(Device(), b)   # mixed: refused before any GPU work


def test_the_cpu_demo_line_on_complex_operands():
    import re

    from ozaki_cutlass.tools.demo import complex_line

    line = complex_line(48, 3)
    ours, native = (float(x) for x in re.findall(r"(?:default call|complex128 @) ([0-9.e+-]+)", line))
    assert "complex128" in line and 0 < ours < native


def test_alpha_zero_says_so_in_timings_and_needs_no_gpu():
    nan = np.full((3, 4), complex(np.nan, np.nan))
    c = np.ones((3, 2), dtype=np.complex128)
    timings = {}
    got = ozaki_cutlass.gemm(nan, np.ones((4, 2), complex), c=c, alpha=0, beta=1j, timings=timings)
    assert np.array_equal(got, 1j * c) and timings["path"] == "none"


def test_a_host_call_runs_its_real_product_on_the_stream_given(monkeypatch):
    """NumPy operands: the realified product is one real call on ``stream`` (it used to be
    dropped), which execute() turns into its stream as a real host call does."""
    from ozaki_cutlass import complex_gemm

    seen = []
    def execute(call):
        seen.append((call.stream, call.realified))
        return call.a @ call.b
    monkeypatch.setattr(complex_gemm, "execute", execute)
    a, b = np.ones((3, 4), complex), np.ones((4, 2), complex)
    got = ozaki_cutlass.gemm(a, b, stream=12345, policy="emulate")
    assert seen == [(12345, True)] and np.array_equal(got, a @ b)


def test_sampled_error_is_the_normwise_error_against_the_exact_product():
    """numerics.zgemm.sampled_error (the benches' complex error): the correctly rounded
    product scores below u, one entry off by d scores d over || |Ahat||Bhat| ||_F."""
    rng = np.random.default_rng(12)
    a, b = crandom(6, 40, 0.5, rng), crandom(40, 5, 0.5, rng)
    hi, lo = exact(a, b)
    rounded = hi + lo
    assert Z.sampled_error(rounded, a, b) <= 2.0**-53
    off = rounded.copy()
    off[2, 3] += 1e-6j
    scale = np.linalg.norm(np.abs(Z.realify_left(a)) @ np.abs(Z.realify_right(b)))
    assert Z.sampled_error(off, a, b) == pytest.approx(1e-6 / scale, rel=1e-6)
