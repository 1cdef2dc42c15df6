"""Each GPU stage kernel against the reference stage function it mirrors, in isolation,
so a mismatch in the end-to-end test can be traced to one stage."""

import numpy as np
import pytest

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.numerics.moduli import crt_constants, padded_k, padded_n, shift_work_words

pytestmark = pytest.mark.gpu


def _hostile(rng, m, k, n):
    a = random_matrix(m, k, 4.0, rng)
    b = random_matrix(k, n, 4.0, rng)
    a[0] *= 2.0**600
    a[1] *= 2.0**-1000
    a[2] = 0.0
    b[:, 0] *= 2.0**-1060
    b[:, 1] = 0.0
    return a, b


@pytest.mark.parametrize("row_major_b", [True, False])
def test_scan_coarse_residues(st, rng, row_major_b, dev):
    m, k, n = 37, 91, 29
    a, b = _hostile(rng, m, k, n)
    consts = crt_constants(17)
    pb = consts.bound_exponent
    d = dev
    pa = d.put(a)
    bb = b if row_major_b else np.asfortranarray(b)
    pbuf = d.put(bb.ravel(order="K"))
    b_rs, b_cs = (n, 1) if row_major_b else (1, k)
    kp, n_pad = 96, 32
    ea, mf, nfa = d.empty(4 * m), d.empty(4 * m), d.empty(4 * m)
    eb, nf, nfb = d.empty(4 * n), d.empty(4 * n), d.empty(4 * n)
    st.scan(pa, m, k, k, 1, pb, ea.ptr, mf.ptr, nfa.ptr, 0)
    st.scan(pbuf, n, k, b_cs, b_rs, pb, eb.ptr, nf.ptr, nfb.ptr, 0)
    want_ea, want_eb = R.exponents(a, 1), R.exponents(b, 0)
    assert np.array_equal(d.get(ea, np.int32, m), want_ea)
    assert np.array_equal(d.get(eb, np.int32, n), want_eb)
    want_mu = R.fast_shifts(a, 1, want_ea, pb)
    want_nu = R.fast_shifts(b, 0, want_eb, pb)
    assert np.array_equal(d.get(mf, np.int32, m), want_mu)
    assert np.array_equal(d.get(nf, np.int32, n), want_nu)
    assert not d.get(nfa, np.int32, m).any()
    # coarse magnitudes
    ca, cb = d.empty(m * kp), d.empty(n_pad * kp)
    st.coarse(pa, m, k, k, 1, ea.ptr, ca.ptr, m, kp, 0)
    st.coarse(pbuf, n, k, b_cs, b_rs, eb.ptr, cb.ptr, n_pad, kp, 0)
    got_ca = d.get(ca, np.int8, (m, kp))
    assert np.array_equal(got_ca[:, :k], R.coarse_magnitudes(a, 1, want_ea)) and not got_ca[:, k:].any()
    got_cb = d.get(cb, np.int8, (n_pad, kp))
    assert np.array_equal(got_cb[:n, :k], R.coarse_magnitudes(b, 0, want_eb).T)
    assert not got_cb[:, k:].any() and not got_cb[n:].any()
    # residues
    mods = d.put(np.array(consts.moduli, np.int32))
    ra, rb = d.empty(17 * m * kp), d.empty(17 * n_pad * kp)
    st.residues(pa, m, k, k, 1, mf.ptr, 17, mods, ra.ptr, m, kp, 0)
    st.residues(pbuf, n, k, b_cs, b_rs, nf.ptr, 17, mods, rb.ptr, n_pad, kp, 0)
    want_ra = R.residues(R.scale_to_integers(a, want_mu, 1), consts.moduli)
    want_rb = R.residues(R.scale_to_integers(b, want_nu, 0).T, consts.moduli)
    got_ra = d.get(ra, np.int8, (17, m, kp))
    got_rb = d.get(rb, np.int8, (17, n_pad, kp))
    assert np.array_equal(got_ra[:, :, :k], want_ra) and not got_ra[:, :, k:].any()
    assert np.array_equal(got_rb[:, :n, :k], want_rb) and not got_rb[:, n:].any()


def _scan_vectors(rng, nvec, k):
    x = random_matrix(nvec, k, 4.0, rng)
    x[0] *= 2.0**600
    x[1] *= 2.0**-1070                 # subnormals, some flushed to 0
    x[2] = 0.0
    x[3, ::7] = np.nan
    x[4, -1] = -np.inf                 # the last entry of the last thread's values
    x[5] = np.inf
    return x


@pytest.mark.parametrize("k", [1, 33, 512, 1025, 4097, 16384, 16385, 70000])
@pytest.mark.parametrize("layout", ["rows", "padded rows", "every second"])
@pytest.mark.parametrize("shifted", [False, True])
def test_scan_every_k(st, rng, dev, k, layout, shifted):
    """The scan of vectors along k against the reference: teams of 32 to 1024 threads per
    vector, one to 137 values per thread; with the contract's inner shifts (exponents and
    scales per entry) and without (max |x| and two multiplications); every output."""
    nvec = 70 if k <= 4097 else 7
    x = _scan_vectors(rng, nvec, k)
    vs, es = {"rows": (k, 1), "padded rows": (k + 3, 1), "every second": (2 * k, 2)}[layout]
    buf = np.zeros(nvec * vs)
    buf.reshape(nvec, vs)[:, : k * es : es] = x
    inner = rng.integers(-30, 30, k) if shifted else np.zeros(k, np.int64)
    pb = crt_constants(16).bound_exponent
    exps, shift, nf = dev.empty(4 * nvec), dev.empty(4 * nvec), dev.empty(4 * nvec)
    logq, s1 = dev.empty(4 * nvec), dev.empty(8 * nvec)
    st.scan(dev.put(buf), nvec, k, vs, es, pb, exps.ptr, shift.ptr, nf.ptr, 0,
            inner=dev.put(inner.astype(np.int32)) if shifted else 0, logq=logq.ptr, abs_sum=s1.ptr)
    finite = np.where(np.isfinite(x), x, 0.0)
    want_e = R.exponents(finite, 1, inner)
    want_logq, want_s1 = R.fast_terms(finite, 1, want_e, inner)
    assert np.array_equal(dev.get(exps, np.int32, nvec), want_e)
    assert np.array_equal(dev.get(nf, np.int32, nvec), (~np.isfinite(x)).sum(axis=1))
    assert np.array_equal(dev.get(logq, np.int32, nvec), want_logq)
    assert np.array_equal(dev.get(s1, np.int64, nvec), want_s1.astype(np.int64))
    assert np.array_equal(dev.get(shift, np.int32, nvec), R.shifts_from_log(want_e, want_logq, k, pb))


@pytest.mark.parametrize("k", [1, 33, 1025, 16385])
@pytest.mark.parametrize("layout", ["rows", "every second"])
@pytest.mark.parametrize("shifted", [False, True])
@pytest.mark.parametrize("extra_rows", [0, 5])
def test_scan_coarse(st, rng, dev, k, layout, shifted, extra_rows):
    """scan_coarse: the scan's outputs and the coarse magnitudes, padding included, the
    same as scan then coarse and as the reference; from the scan's second pass (rows, no
    inner shifts) or from the two kernels (strided vectors, inner shifts)."""
    nvec = 70 if k <= 1025 else 7
    x = _scan_vectors(rng, nvec, k)
    vs, es = {"rows": (k, 1), "every second": (2 * k, 2)}[layout]
    buf = np.zeros(nvec * vs)
    buf.reshape(nvec, vs)[:, : k * es : es] = x
    inner = rng.integers(-30, 30, k) if shifted else np.zeros(k, np.int64)
    pin = dev.put(inner.astype(np.int32)) if shifted else 0
    pb = crt_constants(15).bound_exponent
    rows_pad, k_pad = nvec + extra_rows, -(-k // 16) * 16 + 16
    px = dev.put(buf)
    outs = {}
    for how in ("fused", "two"):
        exps, shift, nf = dev.empty(4 * nvec), dev.empty(4 * nvec), dev.empty(4 * nvec)
        coarse = dev.empty(rows_pad * k_pad)  # poisoned: the padding must be written
        if how == "fused":
            st.scan_coarse(px, nvec, k, vs, es, pb, exps.ptr, shift.ptr, nf.ptr, coarse.ptr, rows_pad, k_pad, 0,
                           inner=pin)
        else:
            st.scan(px, nvec, k, vs, es, pb, exps.ptr, shift.ptr, nf.ptr, 0, inner=pin)
            st.coarse(px, nvec, k, vs, es, exps.ptr, coarse.ptr, rows_pad, k_pad, 0, inner=pin)
        outs[how] = (dev.get(exps, np.int32, nvec), dev.get(shift, np.int32, nvec), dev.get(nf, np.int32, nvec),
                     dev.get(coarse, np.int8, (rows_pad, k_pad)))
    for got, want in zip(outs["fused"], outs["two"]):
        assert np.array_equal(got, want)
    finite = np.where(np.isfinite(x), x, 0.0)
    want_e = R.exponents(finite, 1, inner)
    got_e, _, _, got_c = outs["fused"]
    assert np.array_equal(got_e, want_e)
    assert np.array_equal(got_c[:nvec, :k], R.coarse_magnitudes(finite, 1, want_e, inner))
    assert not got_c[:, k:].any() and not got_c[nvec:].any()


def test_scan_coarse_long_vectors(st, rng, dev):
    """Vectors past 16384 entries take one 1024-thread team per block, its second pass last
    batch first: more vectors than resident blocks (each block takes several in turn), a
    part batch, padding rows; the scan's outputs and the coarse bytes against the reference."""
    nvec, k = 300, 20003
    x = _scan_vectors(rng, nvec, k)
    rows_pad, k_pad = nvec + 3, padded_k(k)
    pb = crt_constants(15).bound_exponent
    exps, shift, nf = dev.empty(4 * nvec), dev.empty(4 * nvec), dev.empty(4 * nvec)
    coarse = dev.empty(rows_pad * k_pad)  # poisoned: the padding must be written
    st.scan_coarse(dev.put(x), nvec, k, k, 1, pb, exps.ptr, shift.ptr, nf.ptr, coarse.ptr, rows_pad, k_pad, 0)
    finite = np.where(np.isfinite(x), x, 0.0)
    zero = np.zeros(k, np.int64)
    want_e = R.exponents(finite, 1, zero)
    want_logq, _ = R.fast_terms(finite, 1, want_e, zero)
    got_c = dev.get(coarse, np.int8, (rows_pad, k_pad))
    assert np.array_equal(dev.get(exps, np.int32, nvec), want_e)
    assert np.array_equal(dev.get(nf, np.int32, nvec), (~np.isfinite(x)).sum(axis=1))
    assert np.array_equal(dev.get(shift, np.int32, nvec), R.shifts_from_log(want_e, want_logq, k, pb))
    assert np.array_equal(got_c[:nvec, :k], R.coarse_magnitudes(finite, 1, want_e, zero))
    assert not got_c[:, k:].any() and not got_c[nvec:].any()


def test_scan_coarse_no_vectors(st, dev):
    """No vectors: the coarse planes are all padding, written as 0."""
    coarse = dev.empty(4 * 32)
    st.scan_coarse(0, 0, 20, 20, 1, 40, 0, 0, 0, coarse.ptr, 4, 32, 0)
    assert not dev.get(coarse, np.int8, 4 * 32).any()


@pytest.mark.parametrize("m,k,n", [(23, 40, 31), (300, 50, 70), (3, 7, 2), (2000, 20, 33)])
@pytest.mark.parametrize("bound", ["int64", "int32"])
def test_accurate_shifts(st, rng, dev, m, k, n, bound):
    """Both bound matrices: the int64 sum over k chunks, and one chunk's int32 GEMM output
    read in place with a padded leading dimension."""
    _check_accurate_shifts(st, rng, dev, m, k, n, bound, n + 5)


@pytest.mark.parametrize("m,k,n", [(64, 24, 128), (130, 16, 260), (3, 5, 4), (2000, 9, 132), (4, 4, 16388)])
def test_accurate_shifts_vector_loads(st, rng, dev, m, k, n):
    """An int32 bound with n and its leading dimension multiples of 4: the kernels of 16-byte
    loads (four columns each), the same shifts."""
    _check_accurate_shifts(st, rng, dev, m, k, n, "int32", n + 4)


@pytest.mark.parametrize("m,k,n", [(37, 6, 1024), (300, 5, 1500), (5, 6, 2052), (20000, 3, 1024), (70, 6, 4096),
                                   (2000, 6, 4096), (3, 3, 4096), (20, 8, 8200), (9, 4, 16384),
                                   (41, 5, 1025), (30, 4, 1030), (600, 4, 4095), (12, 6, 4097), (7, 4, 16383)])
def test_accurate_shifts_one_read(st, rng, dev, m, k, n):
    """1024 <= n <= 16384 (16-byte rows): the kernel that reads the bound once, each variant
    of columns per thread and rows per group, ragged last groups, more row groups than
    blocks (m = 20000), n not a multiple of 4 (the padding in a row's last 16 bytes holds
    large positive values that must count as nothing); n <= 4096 with enough row groups
    (m = 300, 600, 2000, 20000) takes the one cooperative launch, fewer rows two launches;
    the same shifts as the reference."""
    _check_accurate_shifts(st, rng, dev, m, k, n, "int32", padded_n(n) + 4, pad=2**30 - 1)


@pytest.mark.parametrize("m,n", [(300, 1024), (77, 2048), (45, 4096), (1500, 4096), (20, 8192), (9, 16384),
                                 (33, 4095)])
def test_accurate_shifts_one_read_any_int32(st, rng, dev, m, n):
    """The one-read kernel on any int32 bound: entries <= 0 (INT32_MIN included) are absent
    (whole rows and columns of them too), entries up to INT32_MAX present, against the
    reference's g > 0 rule; the exponents and fast shifts spread over a few hundred."""
    ld = padded_n(n)
    g = rng.integers(-(2**31), 2**31, (m, ld), dtype=np.int64)
    g[rng.random((m, ld)) < 0.3] = 0
    g[rng.random((m, ld)) < 0.05] = 2**31 - 1
    g[rng.random((m, ld)) < 0.05] = -(2**31)
    g[rng.random((m, ld)) < 0.1] = 1
    g[: m // 5] = -1  # absent rows
    g[:, ::7] = 0  # absent columns
    g = g.astype(np.int32)
    pb = crt_constants(15).bound_exponent
    ea, eb = rng.integers(-300, 300, m).astype(np.int32), rng.integers(-300, 300, n).astype(np.int32)
    muf, nuf = rng.integers(-200, 200, m).astype(np.int32), rng.integers(-200, 200, n).astype(np.int32)
    want_mu, want_nu = R.accurate_shifts(g[:, :n].astype(np.int64), ea.astype(np.int64), eb.astype(np.int64),
                                         muf.astype(np.int64), nuf.astype(np.int64), pb)
    d = dev
    mu, nu, work = d.empty(4 * m), d.empty(4 * n), d.empty(4 * shift_work_words(m, n))
    st.accurate_shifts_i32(d.put(g), ld, m, n, d.put(ea), d.put(eb), d.put(muf), d.put(nuf), pb, mu.ptr, nu.ptr,
                           work.ptr, 0)
    assert np.array_equal(d.get(mu, np.int32, m), want_mu)
    assert np.array_equal(d.get(nu, np.int32, n), want_nu)


def _check_accurate_shifts(st, rng, dev, m, k, n, bound, ld, pad=-7):
    a, b = _hostile(rng, m, k, n)
    consts = crt_constants(13)
    pb = consts.bound_exponent
    ea, eb = R.exponents(a, 1), R.exponents(b, 0)
    muf, nuf = R.fast_shifts(a, 1, ea, pb), R.fast_shifts(b, 0, eb, pb)
    g = R.coarse_bound(R.coarse_magnitudes(a, 1, ea), R.coarse_magnitudes(b, 0, eb))
    want_mu, want_nu = R.accurate_shifts(g, ea, eb, muf, nuf, pb)
    d = dev
    words = shift_work_words(m, n)
    mu, nu, work = d.empty(4 * m), d.empty(4 * n), d.empty(4 * (words + 64))  # 64 words past it: poison
    args = (d.put(ea.astype(np.int32)), d.put(eb.astype(np.int32)), d.put(muf.astype(np.int32)),
            d.put(nuf.astype(np.int32)), pb, mu.ptr, nu.ptr, work.ptr, 0)
    if bound == "int64":
        st.accurate_shifts(d.put(g.astype(np.int64)), m, n, *args)
    else:
        assert g.max() < 2**31
        padded = np.full((m, ld), pad, np.int32)  # the padding must not count
        padded[:, :n] = g
        st.accurate_shifts_i32(d.put(padded), ld, m, n, *args)
    assert np.array_equal(d.get(mu, np.int32, m), want_mu)
    assert np.array_equal(d.get(nu, np.int32, n), want_nu)
    assert (d.get(work, np.uint8, 4 * (words + 64))[4 * words:] == 0x5A).all()  # nothing written past it


@pytest.mark.parametrize("shape", [(1, 1), (1, 40), (37, 1), (33, 65), (200, 130)])
@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_pack(st, rng, dev, shape, order):
    """pack copies a vector set (vectors = columns here, as for op(B)) to contiguous rows."""
    k, nvec = shape
    x = rng.standard_normal((k, nvec))
    if order == "F":
        buf, rs, cs = np.asfortranarray(x), 1, k
    elif order == "C":
        buf, rs, cs = x, nvec, 1
    else:  # every second element of a wider row-major array
        wide = np.zeros((k, 2 * nvec + 1))
        wide[:, 1::2][:, :nvec] = x
        buf, rs, cs = wide, 2 * nvec + 1, 2
    d = dev
    src = d.put(buf.ravel(order="K"))
    src += 8 if order == "strided" else 0
    out = d.empty(8 * nvec * k)
    st.pack(src, nvec, k, cs, rs, out.ptr, 0)  # vector j = column j: vs = cs, es = rs
    assert np.array_equal(d.get(out, np.float64, (nvec, k)), x.T)


@pytest.mark.parametrize("count", [2, 5, 6, 11, 16, 20])
def test_crt_unscale(st, rng, count, dev):
    consts = crt_constants(count)
    m, n, ldc, nchunks = 19, 13, 16, 2
    lim = 2**consts.bound_exponent
    x = [[int.from_bytes(rng.bytes(24), "little") % (2 * lim + 1) - lim for _ in range(n)] for _ in range(m)]
    x[0][0], x[0][1] = 0, lim
    # split each residue over two "chunks" as raw int32 values with the same class
    c = np.zeros((nchunks, count, m, ldc), np.int32)
    r = np.zeros((count, m, n), np.int32)
    for g, mod in enumerate(consts.moduli):
        for i in range(m):
            for j in range(n):
                r[g, i, j] = x[i][j] % mod
                part = int(rng.integers(-2**30, 2**30))
                c[0, g, i, j] = part
                c[1, g, i, j] = (x[i][j] - part) % mod - mod * int(rng.integers(0, 1000))
    mu = rng.integers(-1100, 1100, m).astype(np.int32)
    nu = rng.integers(-100, 100, n).astype(np.int32)
    cin = random_matrix(m, n, 1.0, rng)
    want = R.unscale(R.crt_reconstruct(r, consts), mu.astype(np.int64), nu.astype(np.int64), -1.5, 0.25, cin)
    d = dev
    out = d.empty(8 * m * n)
    st.crt_unscale(d.put(c), count, m, n, ldc, m * ldc, nchunks, count * m * ldc, consts,
                   d.put(mu), d.put(nu), -1.5, 0.25, d.put(cin), n, 1, out.ptr, n, 1, 0, 0)
    got = d.get(out, np.float64, (m, n))
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
