"""GPU checks of the stage kernels added for the fused pipeline: residues in a strided
(concatenated) layout, and the combine kernel that finishes the CRT from group partials.
Exact equality throughout (integer results, and the same double sequence as crt_unscale)."""

import dataclasses
import math

import numpy as np
import pytest

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.kernels.library import UnsupportedProblem
from ozaki_cutlass.numerics.moduli import crt_constants, partial_bytes
from ozaki_cutlass.kernels.stages import CNonfiniteSource, Stages
from moduli_groups import random_group_sizes

pytestmark = pytest.mark.gpu


def _inputs(rng, m, k):
    """Rows with every residue path: |A'| < 2^53, 2^53..2^180 (the shared-memory 2^e table),
    beyond it (e >= 128), subnormals, zeros, NaN/Inf (-> 0)."""
    a = random_matrix(m, k, 4.0, rng)
    a[0] *= 2.0**600
    a[1] *= 2.0**-1000
    a[2] = 0.0
    a[3, ::7] = np.nan
    a[4, ::5] = -np.inf
    return a


def _shifts(rng, a, pb):
    e = R.exponents(np.where(np.isfinite(a), a, 0.0), 1)
    mu = R.fast_shifts(np.where(np.isfinite(a), a, 0.0), 1, e, pb)
    mu = mu + rng.integers(0, 60, mu.shape)      # larger integers: e > 0 paths
    mu[5] += 200                                 # e >= 128 for row 5 (slow path)
    return mu.astype(np.int32)


def _want_residues(a, mu, moduli):
    fin = np.where(np.isfinite(a), a, 0.0)
    xi = np.trunc(np.ldexp(fin, mu.astype(np.int64)[:, None]))
    out = np.empty((len(moduli),) + a.shape, np.int8)
    for g, mod in enumerate(moduli):       # Python integers: exact also beyond 2^(53+...)
        for i in range(a.shape[0]):
            for l in range(a.shape[1]):
                r = int(xi[i, l]) % mod
                out[g, i, l] = r - mod if r >= (mod + 1) // 2 else r
    return out


def _run_strided(st, dev, a, mu, moduli, lanes, layout, nbytes, inner=None):
    """P_residues_strided of ``a`` (its vectors' entries along the lanes: "k", or along the
    vectors) into a fresh, poisoned buffer of ``nbytes``, ``layout`` = (rows_pad, k_pad,
    row_stride, plane_stride): the planes read back as (count, rows_pad, k_pad), and the byte
    of each."""
    m, k = a.shape
    rows_pad, k_pad, row_stride, plane_stride = layout
    if lanes == "k":
        px, vs, es = dev.put(a), k, 1
    else:
        px, vs, es = dev.put(np.asfortranarray(a).ravel(order="K")), 1, m
    out = dev.empty(nbytes)
    st.residues_strided(px, m, k, vs, es, dev.put(mu), len(moduli), dev.put(np.array(moduli, np.int32)), out.ptr,
                        rows_pad, k_pad, row_stride, plane_stride, 0,
                        inner=dev.put(inner) if inner is not None else 0)
    idx = (np.arange(len(moduli))[:, None, None] * plane_stride + np.arange(rows_pad)[None, :, None] * row_stride
           + np.arange(k_pad)[None, None, :])
    return dev.get(out, np.int8, nbytes)[idx], idx


@pytest.mark.parametrize("count", [3, 15, 20])
@pytest.mark.parametrize("layout", ["planes", "concatenated"])
@pytest.mark.parametrize("lanes", ["k", "vectors"])
def test_residues_strided(st, rng, count, layout, lanes, dev):
    m, k = 45, 83  # odd sizes: tails in k, padding rows
    consts = crt_constants(count)
    a = _inputs(rng, m, k)
    mu = _shifts(rng, a, consts.bound_exponent)
    if count == 15 and layout == "planes":  # cross-check the helper against the reference
        fin = np.where(np.isfinite(a), a, 0.0)
        small = np.abs(mu.astype(np.int64)) < 400
        ref = R.residues(R.scale_to_integers(fin[small], mu[small].astype(np.int64), 1), consts.moduli)
        assert np.array_equal(ref, _want_residues(a[small], mu[small], consts.moduli))
    want = _want_residues(a, mu, consts.moduli)
    rows_pad, k_pad = 48, 96
    if layout == "planes":
        row_stride, plane_stride = k_pad, rows_pad * k_pad
    else:
        row_stride, plane_stride = count * k_pad, k_pad
    nbytes = rows_pad * row_stride if layout == "concatenated" else count * plane_stride
    planes, idx = _run_strided(st, dev, a, mu, consts.moduli, lanes, (rows_pad, k_pad, row_stride, plane_stride),
                               nbytes)
    assert np.array_equal(planes[:, :m, :k], want)
    assert not planes[:, :, k:].any() and not planes[:, m:, :].any()
    if layout == "concatenated":  # the layout covers the buffer exactly
        assert idx.size == nbytes and np.unique(idx).size == idx.size


def test_residues_plain_matches_strided(st, rng, dev):
    """P_residues is P_residues_strided with the (modulus, row, k) strides."""
    m, k, count = 37, 91, 17
    consts = crt_constants(count)
    a = _inputs(rng, m, k)
    mu = _shifts(rng, a, consts.bound_exponent)
    d = dev
    px, pmu, pmod = d.put(a), d.put(mu), d.put(np.array(consts.moduli, np.int32))
    o1, o2 = d.empty(count * m * 96), d.empty(count * m * 96, poison=0x33)
    st.residues(px, m, k, k, 1, pmu, count, pmod, o1.ptr, m, 96, 0)
    st.residues_strided(px, m, k, k, 1, pmu, count, pmod, o2.ptr, m, 96, 96, m * 96, 0)
    g1 = d.get(o1, np.int8, (count, m, 96))
    assert np.array_equal(g1, d.get(o2, np.int8, (count, m, 96)))
    assert np.array_equal(g1[:, :, :k], _want_residues(a, mu, consts.moduli))


def test_residues_wide_routes(st, rng, dev):
    """Each route by the warp's largest e, at its edges: rows whose scaled integers reach
    exactly 2^(53 + e) - 2^e for e = 0 .. 17 in runs of four rows (e == 0; four wide
    pieces, e <= 4; five, e <= 16; the 2^e table above), both signs."""
    count, k = 15, 600
    es = np.repeat(np.arange(18), 4)
    m = es.size
    consts = crt_constants(count)
    a = rng.uniform(-1.0, 1.0, (m, k))
    a[:, 0] = 1.0 - 2.0**-53              # mantissa 2^53 - 1: V = (2^53 - 1) 2^e
    a[1::2, 7] = -(1.0 - 2.0**-53)
    mu = (53 + es).astype(np.int32)
    d = dev
    out = d.empty(count * m * 608)
    st.residues(d.put(a), m, k, k, 1, d.put(mu), count, d.put(np.array(consts.moduli, np.int32)),
                out.ptr, m, 608, 0)
    got = d.get(out, np.int8, (count, m, 608))
    assert np.array_equal(got[:, :, :k], _want_residues(a, mu, consts.moduli))


# Chunk slots (rows_pad x k_pad / 16) of a grid the look-ahead residue kernel takes on an
# H200: launch_residues runs it from 4 passes of its resident lanes, 132 SMs x 3 blocks x
# 128 lanes x 4 = 202752 slots; 2051 x 2047 (2056 x 2048 padded) makes 263168.
LOOK_AHEAD_SIZE = (2051, 2047)


@pytest.mark.parametrize("layout,lanes,shifted", [("planes", "k", False), ("planes", "k", True),
                                                  ("concatenated", "vectors", False)])
def test_residues_of_a_large_grid(st, rng, dev, layout, lanes, shifted):
    """The look-ahead kernel (each warp's next chunk read before this one's arithmetic): the
    reference's residues at a size of many passes per warp, every route among the rows
    (_inputs, _shifts: the table, e >= 128, subnormals, zeros, NaN/Inf), a tail in k,
    padding rows, strided vectors, and the contract's inner shifts."""
    (m, k), count = LOOK_AHEAD_SIZE, 15
    consts = crt_constants(count)
    a = _inputs(rng, m, k)
    if shifted:  # the contract's calls: no rows 2^600 or 2^-1000 apart (the exact reference takes no inner shifts)
        a[:2] = random_matrix(2, k, 4.0, rng)
    mu = _shifts(rng, a, consts.bound_exponent)
    inner = rng.integers(-30, 30, k).astype(np.int32) if shifted else np.zeros(k, np.int32)
    fin = np.where(np.isfinite(a), a, 0.0)
    near = np.abs(mu.astype(np.int64)) < 400  # the vectorised reference there, the exact one elsewhere
    want = np.empty((count, m, k), np.int8)
    want[:, near] = R.residues(R.scale_to_integers(fin[near], mu[near].astype(np.int64), 1,
                                                   inner.astype(np.int64) if shifted else None), consts.moduli)
    if shifted:
        assert near.all()
    else:
        want[:, ~near] = _want_residues(a[~near], mu[~near], consts.moduli)
    rows_pad, k_pad = 2056, 2048
    row_stride, plane_stride = (k_pad, rows_pad * k_pad) if layout == "planes" else (count * k_pad, k_pad)
    assert rows_pad * k_pad // 16 >= 1.25 * 202752
    planes, _ = _run_strided(st, dev, a, mu, consts.moduli, lanes, (rows_pad, k_pad, row_stride, plane_stride),
                             count * rows_pad * k_pad, inner if shifted else None)
    assert np.array_equal(planes[:, :m, :k], want)
    assert not planes[:, :, k:].any() and not planes[:, m:, :].any()


@pytest.mark.parametrize("rows_pad,k_pad,row_stride,plane_stride", [
    (8, 32, 32, 8 * 32 - 1),     # planes overlap the last row
    (8, 32, 16, 8 * 32),         # row_stride < k_pad
    (8, 32, 3 * 32 - 1, 32),     # concatenated rows overlap
    (8, 30, 30, 240),            # k_pad not a multiple of 16
])
def test_residues_strided_rejects(st, rows_pad, k_pad, row_stride, plane_stride):
    with pytest.raises(UnsupportedProblem):
        st.residues_strided(16, 4, 16, 16, 1, 16, 3, 16, 16, rows_pad, k_pad, row_stride, plane_stride, 0)


def stored_partials(parts, sizes):
    """The group planes as the fused kernels store them, one after the other: uint32, or
    one byte for a group of one modulus (ozaki_cutlass.numerics.moduli.partial_bytes)."""
    return np.frombuffer(b"".join(p.astype(np.uint8 if partial_bytes(size) == 1 else np.uint32).tobytes()
                                  for p, size in zip(parts, sizes)), np.uint8)


@pytest.mark.parametrize("ones", [False, True], ids=["groups", "one-per-modulus"])
@pytest.mark.parametrize("count", [2, 5, 6, 11, 15, 16, 17, 20])
def test_combine_unscale(st, rng, count, ones, dev):
    """Random group sizes, or one modulus per group: the residue-bytes kernel, with its tail
    MMA for the moduli past 16."""
    consts = crt_constants(count)
    m, n, ldx = 19, 13, 16
    lim = 2**consts.bound_exponent
    x = [[int.from_bytes(rng.bytes(24), "little") % (2 * lim + 1) - lim for _ in range(n)] for _ in range(m)]
    x[0][0], x[0][1], x[1][0] = 0, lim, -lim
    sizes = [1] * count if ones else random_group_sizes(count, rng)
    r = np.zeros((count, m, n), np.int32)
    parts = np.zeros((len(sizes), m, ldx), np.uint32)
    for i in range(m):
        for j in range(n):
            g = 0
            for gr, size in enumerate(sizes):
                parts[gr, i, j] = x[i][j] % math.prod(consts.moduli[g:g + size])
                g += size
            for g, mod in enumerate(consts.moduli):
                r[g, i, j] = x[i][j] % mod
    mu = rng.integers(-1100, 1100, m).astype(np.int32)
    nu = rng.integers(-100, 100, n).astype(np.int32)
    cin = random_matrix(m, n, 1.0, rng)
    # operands whose product has NaN, +Inf and -Inf entries: the kernels find the pattern
    # from them and their non-finite counts (a column-major B, to use both strides)
    k = 5
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    a[2, 0], a[4, 1], a[6, 3], b[1, 5], b[4, 7] = np.nan, 0.0, -np.inf, np.inf, -np.inf
    pattern = R.split_nonfinite(a, b)[2]
    assert np.isnan(pattern).any() and (pattern == np.inf).any() and (pattern == -np.inf).any()
    assert (pattern == 0).any()
    xr = R.crt_reconstruct(r, consts)
    d = dev
    source = CNonfiniteSource(d.put(a), k, 1, d.put(np.asfortranarray(b).T.copy()), 1, k, k,
                              d.put((~np.isfinite(a)).sum(1).astype(np.int32)),
                              d.put((~np.isfinite(b)).sum(0).astype(np.int32)))
    for beta, pat in ((0.25, None), (0.0, source)):
        want = R.unscale(np.where(pattern == 0, xr, pattern) if pat is not None else xr,
                         mu.astype(np.int64), nu.astype(np.int64), -1.5, beta, cin if beta else None)
        out = d.empty(8 * m * n)
        st.combine_unscale(d.put(stored_partials(parts, sizes)), sizes, m, n, ldx, m * ldx, consts, d.put(mu),
                           d.put(nu), -1.5, beta,
                           d.put(cin) if beta else 0, n, 1, out.ptr, n, 1, pat, 0)
        got = d.get(out, np.float64, (m, n))
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
        # the same entries through crt_unscale (one chunk, residues as the raw int32 input)
        out2 = d.empty(8 * m * n, poison=0x11)
        c = np.zeros((count, m, ldx), np.int32)
        mods = np.array(consts.moduli, np.int64)[:, None, None]
        c[:, :, :n] = r + mods * rng.integers(-2**22, 2**22, r.shape)  # raw values, same class
        st.crt_unscale(d.put(c), count, m, n, ldx, m * ldx, 1, 0, consts, d.put(mu), d.put(nu), -1.5, beta,
                       d.put(cin) if beta else 0, n, 1, out2.ptr, n, 1, pat, 0)
        assert np.array_equal(d.get(out2, np.float64, (m, n)).view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("count", [15, 16, 17, 18, 20])
@pytest.mark.parametrize("m,n,ldx", [(5, 300, 304), (3, 133, 133), (2, 128, 128)],
                         ids=["items-and-a-tail", "byte-loads", "one-item"])
def test_combine_residue_bytes_on_tensor_cores(st, rng, count, m, n, ldx, dev):
    """The combine of one-byte residues (the tensor-core kernel: 128 entries of a row per
    warp, 16 moduli per MMA, the 17th-20th in a tail MMA of one modulus per lane) against
    the reference's bits: several items per row and a tail, rows whose stride rules out
    16-byte loads, a single item; the largest residue
    of every modulus in row 0 (the largest byte sums); with and without beta (the plain
    store path and the general one), and with a non-finite source that flags one row and
    two columns (plain launches send those entries to the general path, the rest stay), or
    only column n - 1 through column flags that rule out 16-byte loads, or only row m - 1,
    or nothing at all (finite operands: the flags of the block's columns and of its warps'
    rows, read up front, let every item skip its own)."""
    consts = crt_constants(count)
    mods = np.array(consts.moduli, np.int64)[:, None, None]
    r = (rng.integers(0, 2**62, (count, m, n)) % mods).astype(np.int32)
    r[:, 0, :] = (mods[:, 0, :] - 1).astype(np.int32)
    parts = np.zeros((count, m, ldx), np.uint32)
    parts[:, :, :n] = r
    mu = rng.integers(-1100, 1100, m).astype(np.int32)
    nu = rng.integers(-100, 100, n).astype(np.int32)
    cin = random_matrix(m, n, 1.0, rng)
    xr = R.crt_reconstruct(r, consts)
    k = 3  # a NaN in row m - 1 of a, an Inf and a -Inf in columns 7 and n - 2 of b
    a, b = random_matrix(m, k, 1.0, rng), random_matrix(k, n, 1.0, rng)
    a[m - 1, 1], b[0, 7], b[2, n - 2] = np.nan, np.inf, -np.inf
    pattern = R.split_nonfinite(a, b)[2]
    assert (pattern != 0).any() and (pattern == 0).any()
    source = CNonfiniteSource(dev.put(a), k, 1, dev.put(b.T.copy()), 1, k, k,
                              dev.put((~np.isfinite(a)).sum(1).astype(np.int32)),
                              dev.put((~np.isfinite(b)).sum(0).astype(np.int32)))
    a_finite, b_last = np.nan_to_num(a), np.array(b)
    b_last[[0, 2], [7, n - 2]] = 1.0
    b_last[1, n - 1] = np.inf
    last_pattern = R.split_nonfinite(a_finite, b_last)[2]
    assert (last_pattern[:, n - 1] != 0).all() and (last_pattern[:, :n - 1] == 0).all()
    col_flags = np.zeros(n + 1, np.int32)  # flags from the second word: 4-byte aligned only
    col_flags[1:] = (~np.isfinite(b_last)).sum(0)
    last_only = CNonfiniteSource(dev.put(a_finite), k, 1, dev.put(b_last.T.copy()), 1, k, k,
                                 dev.put(np.zeros(m, np.int32)), dev.put(col_flags) + 4)
    b_finite = np.nan_to_num(b)
    row_pattern = R.split_nonfinite(a, b_finite)[2]
    assert (row_pattern[m - 1] != 0).all() and (row_pattern[:m - 1] == 0).all()
    row_only = CNonfiniteSource(dev.put(a), k, 1, dev.put(b_finite.T.copy()), 1, k, k,
                                dev.put((~np.isfinite(a)).sum(1).astype(np.int32)), dev.put(np.zeros(n, np.int32)))
    finite = CNonfiniteSource(dev.put(a_finite), k, 1, dev.put(b_finite.T.copy()), 1, k, k,
                              dev.put(np.zeros(m, np.int32)), dev.put(np.zeros(n, np.int32)))
    for beta, nf, pat in ((0.0, None, None), (-0.75, None, None), (0.0, source, pattern),
                          (-0.75, source, pattern), (0.0, last_only, last_pattern), (0.0, row_only, row_pattern),
                          (0.0, finite, None)):
        x = xr if pat is None else np.where(pat == 0, xr, pat)
        want = R.unscale(x, mu.astype(np.int64), nu.astype(np.int64), 1.25, beta, cin if beta else None)
        out = dev.empty(8 * m * n)
        st.combine_unscale(dev.put(stored_partials(parts, [1] * count)), [1] * count, m, n, ldx, m * ldx,
                           consts, dev.put(mu), dev.put(nu), 1.25, beta, dev.put(cin) if beta else 0, n, 1,
                           out.ptr, n, 1, nf, 0)
        got = dev.get(out, np.float64, (m, n))
        assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_combine_unscale_column_major_out(st, rng, dev):
    """Scalar loads/stores: odd ldx, column-major output, one group per modulus."""
    count = 7
    consts = crt_constants(count)
    m, n, ldx = 5, 9, 11
    x = rng.integers(-2**40, 2**40, (m, n))
    parts = np.zeros((count, m, ldx), np.uint32)
    r = np.zeros((count, m, n), np.int32)
    for g, mod in enumerate(consts.moduli):
        parts[g, :, :n] = x % mod
        r[g] = x % mod
    mu = np.zeros(m, np.int32)
    nu = np.zeros(n, np.int32)
    want = R.unscale(R.crt_reconstruct(r, consts), mu.astype(np.int64), nu.astype(np.int64), 1.0, 0.0, None)
    assert np.array_equal(want, x.astype(np.float64))
    d = dev
    out = d.empty(8 * m * n)
    st.combine_unscale(d.put(stored_partials(parts, [1] * count)), [1] * count, m, n, ldx, m * ldx, consts,
                       d.put(mu), d.put(nu), 1.0, 0.0,
                       0, 0, 0, out.ptr, 1, m, 0, 0)
    got = d.get(out, np.float64, (n, m)).T
    assert np.array_equal(got, want)


@pytest.mark.parametrize("count,sizes", [(2, [1]), (3, [2, 2]), (5, [5]), (2, [0, 2])])
def test_combine_unscale_rejects(st, count, sizes):
    with pytest.raises(UnsupportedProblem):  # sum != count, product >= 2^32, an empty group
        st.combine_unscale(16, sizes, 4, 4, 4, 16, crt_constants(count), 16, 16, 1.0, 0.0, 0, 0, 0,
                           16, 4, 1, 0, 0)


def test_combine_unscale_rejects_misaligned_word_plane(st):
    # a byte plane of 17 entries puts the next group's uint32 plane at byte 17
    with pytest.raises(UnsupportedProblem, match="not 4-byte aligned"):
        st.combine_unscale(16, [1, 2], 4, 4, 4, 17, crt_constants(3), 16, 16, 1.0, 0.0, 0, 0, 0,
                           16, 4, 1, 0, 0)
    st.combine_unscale(16, [1, 2], 0, 4, 4, 17, crt_constants(3), 16, 16, 1.0, 0.0, 0, 0, 0,
                       16, 4, 1, 0, 0)  # nothing to read: m = 0 launches nothing


@pytest.mark.parametrize("c,ldc,batch_stride,nchunks,chunk_stride,why", [
    (18, 4, 16, 1, 0, "not 4-byte aligned"),
    (16, 3, 16, 1, 0, "ldc=3 must be"),              # rows overlap
    (16, 4, 0, 1, 0, "batch_stride_c=0 must be"),    # both moduli read one plane
    (16, 4, 16, 2, 0, "chunk_stride=0 must be"),     # both chunks read one plane
])
def test_crt_unscale_rejects(st, c, ldc, batch_stride, nchunks, chunk_stride, why):
    with pytest.raises(UnsupportedProblem, match=why):
        st.crt_unscale(c, 2, 4, 4, ldc, batch_stride, nchunks, chunk_stride, crt_constants(2), 16, 16,
                       1.0, 0.0, 0, 0, 0, 16, 4, 1, 0, 0)


def test_crt_rejects_constants_whose_last_limb_scale_is_not_one(st, dev):
    """crt_finish_limbs leaves the last limb's scale out (it is 1), so the CRT entries refuse
    constants with another (real buffers: without the check they would run). A Stages of its
    own: each keeps one struct per moduli count, and the bad one must not stay in the shared
    library's."""
    consts = crt_constants(15)  # three limbs
    bad = dataclasses.replace(consts, limb_scales=consts.limb_scales[:-1] + (2.0,))
    own = Stages(st.artifact)
    planes, mu, nu, out = dev.empty(15 * 16 * 4), dev.empty(16), dev.empty(16), dev.empty(16 * 8)
    why = r"limb_scales\[%d\]=2, not 1 \(the last limb's scale\)" % (consts.limbs - 1)
    with pytest.raises(UnsupportedProblem, match=why):
        own.crt_unscale(planes.ptr, 15, 4, 4, 4, 16, 1, 0, bad, mu.ptr, nu.ptr, 1.0, 0.0, 0, 0, 0, out.ptr, 4, 1,
                        0, 0)
    with pytest.raises(UnsupportedProblem, match=why):
        own.combine_unscale(planes.ptr, [1] * 15, 4, 4, 4, 16, bad, mu.ptr, nu.ptr, 1.0, 0.0, 0, 0, 0, out.ptr, 4,
                            1, 0, 0)


def test_crt_rejects_a_nonfinite_source_without_flags(st):
    bad = CNonfiniteSource(16, 4, 1, 16, 4, 1, 4, 0, 16)  # no row flags
    with pytest.raises(UnsupportedProblem, match="row_flags and col_flags"):
        st.crt_unscale(16, 2, 4, 4, 4, 16, 1, 0, crt_constants(2), 16, 16, 1.0, 0.0, 0, 0, 0, 16, 4, 1, bad, 0)
    bad = CNonfiniteSource(0, 4, 1, 16, 4, 1, 4, 16, 16)  # k > 0 without a
    with pytest.raises(UnsupportedProblem, match="k >= 0 and, for k > 0, a and b"):
        st.combine_unscale(16, [2], 4, 4, 4, 16, crt_constants(2), 16, 16, 1.0, 0.0, 0, 0, 0, 16, 4, 1, bad, 0)
