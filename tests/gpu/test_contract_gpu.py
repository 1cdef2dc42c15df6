"""The accuracy contract on the GPU makes the reference's choices and gives its bits: the
stage kernels against their NumPy mirrors, whole calls on every path, layout and mode,
the fallback and the warning."""

import warnings

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.numerics import contract as K
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits
from ozaki_cutlass.templates.constants import INNER_CHUNK, INNER_COMBINE_LANES_FROM, NO_EXPONENT

pytestmark = pytest.mark.gpu


def family(rng, name, m, k, n, p):
    if name == "phi":
        return random_matrix(m, k, p, rng), random_matrix(k, n, p, rng)
    if name == "inner":
        a, b = random_matrix(m, k, 0.5, rng), random_matrix(k, n, 0.5, rng)
        d = np.where(np.arange(k) % 2 == 0, int(p), -int(p))
        return np.ldexp(a, d[None, :]), np.ldexp(b, -d[:, None])
    if name == "uniform":
        return rng.random((m, k)), rng.random((k, n))
    if name == "tiny":  # subnormal and huge entries
        return np.ldexp(random_matrix(m, k, 1.0, rng), -1060), np.ldexp(random_matrix(k, n, 1.0, rng), 1000)
    raise ValueError(name)


CASES = [("phi", 0.5), ("phi", 4.0), ("phi", 8.0), ("inner", 20), ("inner", 40), ("uniform", 0), ("tiny", 0)]


def _inner_stats_input(rng, nvec, k, vs_es):
    v = np.ldexp(random_matrix(nvec, k, 4.0, rng), rng.integers(-900, 900, (1, k)))
    if k > 8:
        v[3, 5], v[9, 6], v[:, 7] = np.nan, -np.inf, 0.0
        v[200, 8] = 2.0**-1074
        # a new largest exponent at every entry (each sum so far scaled down, flushed after
        # about 60); subnormals alone; subnormals before and among normal entries
        v[:, 1] = np.ldexp(1.0 + rng.random(nvec), np.minimum(-1000 + 16 * np.arange(nvec), 1000))
        v[:, 2] = np.ldexp(rng.standard_normal(nvec), -1060)
        v[:, 4] = np.where(np.arange(nvec) % 3 == 0, np.ldexp(rng.standard_normal(nvec), -1030),
                           np.ldexp(rng.standard_normal(nvec), rng.integers(-1021, -900, nvec)))
    v[10, :], v[11, :], v[12, :k // 2] = 0.0, np.nan, np.inf  # no finite non-zero entry; a partial one
    x = v if vs_es[0] == 1 else np.asfortranarray(v)
    vs, es = (k, 1) if vs_es[0] == 1 else (1, nvec)
    return v, x, vs, es


@pytest.mark.parametrize("vs_es", [(1, None), (None, 1)])  # k contiguous, or strided
@pytest.mark.parametrize("k", [70, 64, 1])
def test_inner_stats_kernel_is_the_mirror(st, rng, dev, vs_es, k):
    """The inner statistics, and from the same read each vector's exponent and non-finite
    count (the scan's first pass without shifts; kNoExponent where no entry is finite and
    non-zero)."""
    nvec = 3 * INNER_CHUNK + 5
    v, x, vs, es = _inner_stats_input(rng, nvec, k, vs_es)
    px = dev.put(x.ravel(order="K"))
    runs = -(-nvec // INNER_CHUNK)
    part, pexp = dev.empty(8 * runs * k), dev.empty(4 * runs * k)
    exps, sums = dev.empty(4 * k), dev.empty(8 * k)
    vexp, vnf = dev.empty(4 * nvec), dev.empty(4 * nvec)
    st.inner_stats(px, nvec, k, vs, es, part.ptr, pexp.ptr, exps.ptr, sums.ptr, 0, vec_exps=vexp.ptr,
                   vec_nonfinite=vnf.ptr)
    want_e, want_s = K.inner_stats(v)
    assert np.array_equal(dev.get(exps, np.int32, (k,)), want_e)
    assert same_bits(dev.get(sums, np.float64, (k,)), want_s)
    finite = np.where(np.isfinite(v), v, 0.0)
    want_v = np.where((finite != 0).any(axis=1), reference.exponents(finite, 1), NO_EXPONENT)
    assert np.array_equal(dev.get(vexp, np.int32, (nvec,)), want_v)
    assert np.array_equal(dev.get(vnf, np.int32, (nvec,)), (~np.isfinite(v)).sum(axis=1))
    # without the vector outputs (the kernel's other instance): the same statistics
    exps2, sums2 = dev.empty(4 * k), dev.empty(8 * k)
    st.inner_stats(px, nvec, k, vs, es, part.ptr, pexp.ptr, exps2.ptr, sums2.ptr, 0)
    assert np.array_equal(dev.get(exps2, np.int32, (k,)), want_e)
    assert same_bits(dev.get(sums2, np.float64, (k,)), want_s)


@pytest.mark.parametrize("vs_es", [(1, None), (None, 1)])
@pytest.mark.parametrize("applied", [0, 1])
def test_scan_given_the_first_pass_is_the_scan(st, rng, dev, vs_es, applied):
    """The contract's scan: where the equilibration flag reads 0 it takes inner_stats'
    vector outputs for its first pass (and the shifts as 0); where it reads 1 it runs both
    passes with the shifts. Either way the plain scan's results."""
    nvec, k = 2 * INNER_CHUNK + 3, 300
    v, x, vs, es = _inner_stats_input(rng, nvec, k, vs_es)
    px = dev.put(x.ravel(order="K"))
    shifts = rng.integers(-40, 40, k).astype(np.int32) if applied else np.zeros(k, np.int32)
    inner, flag = dev.put(shifts), dev.put(np.array([applied], np.int32))
    runs = -(-nvec // INNER_CHUNK)
    outs = []
    for given in (True, False):
        exps, nf = dev.empty(4 * nvec), dev.empty(4 * nvec)
        logq, s1 = dev.empty(4 * nvec), dev.empty(8 * nvec)
        if given:
            st.inner_stats(px, nvec, k, vs, es, dev.empty(8 * runs * k).ptr, dev.empty(4 * runs * k).ptr,
                           dev.empty(4 * k).ptr, dev.empty(8 * k).ptr, 0, vec_exps=exps.ptr, vec_nonfinite=nf.ptr)
        st.scan(px, nvec, k, vs, es, 0, exps.ptr, 0, nf.ptr, 0, inner=inner, logq=logq.ptr, abs_sum=s1.ptr,
                given=flag if given else 0)
        outs.append([dev.get(b, t, (nvec,)) for b, t in ((exps, np.int32), (nf, np.int32), (logq, np.int32),
                                                           (s1, np.int64))])
    for got, want in zip(*outs):
        assert np.array_equal(got, want)
    finite = np.where(np.isfinite(v), v, 0.0)
    assert np.array_equal(outs[0][0], reference.exponents(finite, 1, shifts.astype(np.int64)))


@pytest.mark.parametrize("name, p", CASES)
def test_certificate_and_choice_are_the_references(rng, name, p):
    cp = pytest.importorskip("cupy")
    a, b = family(rng, name, 70, 300, 45, p)
    got = ozaki_cutlass.contract(cp.asarray(a), cp.asarray(b))
    assert got == reference.contract(a, b)
    assert ozaki_cutlass.contract(a, b) == got  # NumPy inputs: the reference's
    for kw in (dict(accuracy=1e-25), dict(accuracy=1e-9, mode="accurate"), dict(policy="emulate")):
        assert ozaki_cutlass.contract(cp.asarray(a), cp.asarray(b), **kw) == reference.contract(a, b, **kw)


@pytest.mark.parametrize("nvec, k", [(65 * INNER_CHUNK + 3, 40), (4 * INNER_CHUNK + 3, INNER_COMBINE_LANES_FROM + 33)])
def test_inner_stats_over_many_runs(st, rng, dev, nvec, k):
    """More runs than the block combine takes at once (kCombineRuns, 64): 66 runs of one l
    chunk, the last partial; the runs' sums combined in run order across chunks. Long k:
    the combine's one thread per l (INNER_COMBINE_LANES_FROM), the same bits."""
    v = np.ldexp(random_matrix(nvec, k, 4.0, rng), rng.integers(-900, 900, (1, k)))
    v[::97, 3] = np.ldexp(1.5, 700)  # a top in every chunk
    px = dev.put(v.ravel())
    runs = -(-nvec // INNER_CHUNK)
    exps, sums = dev.empty(4 * k), dev.empty(8 * k)
    st.inner_stats(px, nvec, k, k, 1, dev.empty(8 * runs * k).ptr, dev.empty(4 * runs * k).ptr, exps.ptr, sums.ptr, 0)
    want_e, want_s = K.inner_stats(v)
    assert np.array_equal(dev.get(exps, np.int32, (k,)), want_e)
    assert same_bits(dev.get(sums, np.float64, (k,)), want_s)


@pytest.mark.parametrize("m, k, n", [(40, 20000, 30), (9000, 16, 20), (20, 16, 9001)])
@pytest.mark.parametrize("name, p", [("phi", 4.0), ("inner", 40)])
def test_certificate_past_one_batch_of_loads(rng, m, k, n, name, p):
    """The equilibration and the certificate, one block each, read kLatencyBatch entries
    per lane at once: k, m or n past one batch of the block's 1024 lanes (8192), the
    reference's choice."""
    cp = pytest.importorskip("cupy")
    a, b = family(rng, name, m, k, n, p)
    assert ozaki_cutlass.contract(cp.asarray(a), cp.asarray(b)) == reference.contract(a, b)


@pytest.mark.parametrize("path", ["staged", "fused"])
@pytest.mark.parametrize("name, p", CASES)
def test_default_calls_are_bit_identical_to_the_reference(rng, path, name, p):
    for i, (m, n, k) in enumerate([(1, 1, 1), (5, 1, 33), (33, 65, 127), (129, 63, 300), (40, 30, 2000)]):
        ta, tb = bool(i % 2), bool(i % 3 == 0)
        a, b = family(rng, name, m, k, n, p)
        a_in = np.ascontiguousarray(a.T) if ta else a
        b_in = np.ascontiguousarray(b.T) if tb else b
        for mode in (None, "accurate"):
            want = reference.gemm(a_in, b_in, trans_a=ta, trans_b=tb, mode=mode, policy="emulate")
            t = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ozaki_cutlass.AccuracyWarning)
                got = ozaki_cutlass.gemm(a_in, b_in, trans_a=ta, trans_b=tb, mode=mode, path=path, timings=t)
            assert same_bits(got, want), (name, m, n, k, ta, tb, mode, t)
            choice = reference.contract(a_in, b_in, trans_a=ta, trans_b=tb, mode=mode, policy="emulate")
            assert t["contract"] == choice.as_dict() and t["moduli"] == choice.moduli


def test_device_arrays_layouts_and_streams(rng):
    cp = pytest.importorskip("cupy")
    a, b = family(rng, "inner", 96, 256, 80, 30)
    want = reference.gemm(a, b)
    for da, db in ((cp.asarray(a), cp.asarray(b)), (cp.asfortranarray(cp.asarray(a)), cp.asarray(b)),
                   (cp.asarray(a), cp.asfortranarray(cp.asarray(b)))):
        assert same_bits(cp.asnumpy(ozaki_cutlass.gemm(da, db, policy="emulate")), want)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), policy="emulate")
    s.synchronize()
    assert same_bits(cp.asnumpy(got), want)


def test_fallback_to_native_and_the_warning(rng):
    cp = pytest.importorskip("cupy")
    n = 8192  # a size the auto policy emulates (the shipped table): the contract decides
    a, b = cp.zeros((n, n)), cp.zeros((n, n))
    a[:, :n // 2] = 1.0  # disjoint supports: |A||B| = 0, so no count certifies anything
    b[n // 2:, :] = 1.0
    t = {}
    got = ozaki_cutlass.gemm(a, b, timings=t)
    assert t["path"] == "native" and "accuracy contract" in t["policy"] and t["contract"]["native"]
    assert float(cp.abs(got).max()) == 0.0
    small_a, small_b = cp.asnumpy(a[:64, n // 2 - 32:n // 2 + 32]), cp.asnumpy(b[n // 2 - 32:n // 2 + 32, :64])
    small_a[:, 32:], small_b[:32, :] = 0.0, 0.0
    with pytest.warns(ozaki_cutlass.AccuracyWarning, match="20 moduli certify"):
        got = ozaki_cutlass.gemm(small_a, small_b, policy="emulate")
    assert same_bits(got, reference.gemm(small_a, small_b, policy="emulate"))


def test_explicit_moduli_reads_nothing_back(rng, monkeypatch):
    from ozaki_cutlass.device import driver

    a, b = family(rng, "phi", 50, 60, 40, 1.0)
    reads = []
    real = driver.PinnedRead.start
    monkeypatch.setattr(driver.PinnedRead, "start", lambda *args: reads.append(args) or real(*args))
    ozaki_cutlass.gemm(a, b, moduli=15)
    assert reads == []
    ozaki_cutlass.gemm(a, b, policy="emulate")
    assert len(reads) == 1


@pytest.mark.parametrize("path", ["staged", "fused"])
def test_speculation_gives_each_calls_own_bits(rng, path, monkeypatch):
    """Calls of one shape whose choices change: each gives the reference's bits, whether
    the guess it ran was right (hit), wrong (miss: the wrong run's result is overwritten)
    or not made."""
    from ozaki_cutlass.paths import contract as PC

    cp = pytest.importorskip("cupy")
    monkeypatch.setattr(PC.GUESSES, "_last", {})
    m, n, k = 129, 63, 300
    plain, wide = family(rng, "phi", m, k, n, 0.5), family(rng, "inner", m, k, n, 20)
    c_plain, c_wide = reference.contract(*plain, policy="emulate"), reference.contract(*wide, policy="emulate")
    assert not PC.Guesses.same(c_plain, c_wide)
    specs = []
    for a, b in [plain] * 3 + [wide] + [plain] * 3 + [wide] * 3:
        t = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ozaki_cutlass.AccuracyWarning)
            got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), policy="emulate", path=path, timings=t)
            want = reference.gemm(a, b, policy="emulate")
        assert same_bits(cp.asnumpy(got), want)
        specs.append(t.get("speculation"))
    assert specs == [None, None, "hit", "miss", None, None, "hit", "miss", None, "hit"]


def test_a_product_that_may_overflow_is_the_references_choice():
    """The certificate kernel reads back RA and RB (stage ABI 13): a product whose entries
    may pass float64's range runs native DGEMM under "auto" on the GPU too (its Inf, where
    the emulation could truncate an entry to 0), and the choice is the reference's.
    Added 2026-12-05, not yet run on a GPU then."""
    cp = pytest.importorskip("cupy")
    p = lambda e: np.ldexp(1.0, e)  # noqa: E731
    a = np.array([[p(1000), p(500)], [p(500), p(1000)]])
    b = np.array([[p(500), p(1000)], [p(1000), p(500)]])
    got = ozaki_cutlass.contract(cp.asarray(a), cp.asarray(b))
    assert got == reference.contract(a, b) and got.native
    out = cp.asnumpy(ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b)))
    assert np.isinf(out).all() and (out > 0).all()
    near = np.array([[p(510), p(510)]]), np.array([[p(510)], [p(510)]])  # k 2^(RA + RB) = 2^1023: emulated
    got = ozaki_cutlass.contract(*(cp.asarray(x) for x in near))
    assert got == reference.contract(*near) and not got.native
