"""Complex GEMM on the GPU: the same bits as the NumPy reference (tests/test_zgemm.py) for
every flag, complex alpha and beta, strided operands, each path, NumPy / CuPy / PyTorch /
CUDA-array-interface inputs, NaN/Inf; the realify and axpby stage kernels against their
NumPy twins."""

import numpy as np
import pytest

import ozaki_cutlass
from ozaki_cutlass import reference
from ozaki_cutlass.device.arrays import DeviceArray
from ozaki_cutlass.numerics import zgemm as Z
from ozaki_cutlass.numerics.accuracy import random_matrix, same_bits
from ozaki_cutlass.paths import karatsuba as K
from variants_support import ALL_VARIANTS

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")


def crandom(m, n, phi, rng):
    return random_matrix(m, n, phi, rng) + 1j * random_matrix(m, n, phi, rng)


class Producer:
    """A foreign array: only the CUDA array interface."""

    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("conj", [False, True])
@pytest.mark.parametrize("order", ["C", "F"])
def test_realify_kernel_is_its_numpy_twin(st, rng, right, conj, order):
    x = cp.asarray(np.asarray(crandom(37, 53, 1.0, rng), order=order))
    x[0, 0] = complex(0.0, -0.0)
    rows, cols = x.shape
    rs, cs = (s // 16 for s in x.strides)
    out = cp.full((2 * rows if right else rows, 2 * cols), np.nan)
    st.realify(x.data.ptr, rows, cols, rs, cs, conj, right, out.data.ptr, 0)
    host = x.get().conj() if conj else x.get()
    want = Z.realify_right(host) if right else Z.realify_left(host)
    assert same_bits(out.get(), want)


def test_axpby_kernel_is_its_numpy_twin(st, rng):
    m, n = 45, 31
    t = cp.asarray(crandom(m, n, 2.0, rng))
    c = cp.asarray(np.asfortranarray(crandom(m, n, 2.0, rng)))
    t[0, 0], c[1, 1] = complex(np.inf, 1.0), complex(np.nan, 2.0)
    for alpha, beta in [(1.0, 0.0), (1.5 - 0.5j, 0.0), (0.0, 2j), (1.0, 1.0), (-0.3 + 0.7j, 0.25 - 1j), (0.0, 0.0)]:
        out = cp.full((m, n), complex(np.nan, np.nan))
        st.complex_axpby(t.data.ptr if alpha != 0 else 0, m, n, n, complex(alpha), complex(beta),
                         c.data.ptr if beta != 0 else 0, 1, m, out.data.ptr, n, 1, 0)
        want = Z.complex_axpby(t.get(), complex(alpha), complex(beta), c.get() if beta != 0 else None)
        assert same_bits(out.get(), want), (alpha, beta)


# (60000, 29, 15): 36 padded rows of 7500 chunks on either side, 270000 slots: the
# look-ahead kernel on an H200 (from 202752: test_stages_extra.LOOK_AHEAD_SIZE).
@pytest.mark.parametrize("kc, nc, count", [(40, 29, 17), (7, 3, 2), (48, 64, 20), (60000, 29, 15)])
def test_residues_karatsuba_are_the_parts_of_the_realified_residues(st, rng, kc, nc, count):
    """P_residues_karatsuba on Ahat's rows and on Bhat's odd columns (read in place, every
    other vector, shifts every other one) against the reference's realified residues:
    Re, Im and Re + Im (mods m_g, symmetric) per complex entry, zero padding past k and
    past the last row; wide exponents, zeros, NaN and Inf among the entries."""
    from ozaki_cutlass import reference as R
    from ozaki_cutlass.numerics.moduli import crt_constants

    m = 33
    a, b = crandom(m, kc, 6.0, rng), crandom(kc, nc, 6.0, rng)
    a[0] *= 2.0**300
    a[1, 0] = complex(np.nan, 1.0)
    b[0, 0] = complex(2.0, np.inf)
    b[:, -1] = 0.0
    consts = crt_constants(count)
    ah, bh = Z.realify_left(a), Z.realify_right(b)           # m x 2kc, 2kc x 2nc
    finite_ah, finite_bh = np.where(np.isfinite(ah), ah, 0.0), np.where(np.isfinite(bh), bh, 0.0)
    s = reference.choose_scaling(finite_ah, finite_bh, consts, "fast")
    assert np.array_equal(s.nu[0::2], s.nu[1::2])
    ra = R.residues(R.scale_to_integers(finite_ah, s.mu, 1), consts.moduli)     # (N, m, 2kc)
    rb = R.residues(R.scale_to_integers(finite_bh, s.nu, 0).T, consts.moduli)   # (N, 2nc, 2kc)
    p = np.array(consts.moduli)[:, None, None]

    def parts(re, im):
        total = np.mod(re.astype(np.int64) + im, p)
        return np.stack([re, im, np.where(total > (p - 1) // 2, total - p, total)]).astype(np.int8)

    kq, nq = -(-kc // 16) * 16, -(-nc // 4) * 4 + 4
    mods = cp.asarray(np.array(consts.moduli, np.int32))
    bt = cp.asarray(bh.T.copy())                                # Bhat's columns as rows, packed
    for x, nvec, rows_pad, shifts, want in (
            (cp.asarray(ah), m, m + 3, s.mu, parts(ra[:, :, 0::2], ra[:, :, 1::2])),
            (bt[1:], nc, nq, s.nu[1:], parts(rb[:, 1::2, 1::2], rb[:, 1::2, 0::2]))):
        vs = 2 * 2 * kc if nvec == nc else 2 * kc
        out = cp.full(3 * count * rows_pad * kq, 77, dtype=cp.int8)
        st.residues_karatsuba(x.data.ptr, nvec, 2 * kc, vs, 1, cp.asarray(shifts.astype(np.int32)).data.ptr,
                              2 if nvec == nc else 1, count, mods.data.ptr, out.data.ptr, rows_pad, kq, nvec == nc,
                              rows_pad * kq, count * rows_pad * kq, 0)
        got = out.get().reshape(3, count, rows_pad, kq)
        assert np.array_equal(got[:, :, :nvec, :kc], want)
        assert not got[:, :, nvec:].any() and not got[:, :, :, kc:].any()


@pytest.mark.parametrize("ta, tb", [("N", "N"), ("T", "C"), ("C", "N"), ("N", "T"), (True, "C")])
@pytest.mark.parametrize("settings", [dict(), dict(moduli=15, mode="accurate"), dict(moduli=12, mode="fast"),
                                      dict(moduli=16, path="staged"), dict(moduli=16, path="fused")])
def test_the_references_bits_on_cupy(rng, ta, tb, settings):
    m, k, n = 96, 200, 72
    a0, b0, c = crandom(m, k, 1.0, rng), crandom(k, n, 1.0, rng), crandom(m, n, 1.0, rng)
    flag = {True: "T", False: "N"}.get(ta, ta)
    a = {"N": a0, "T": a0.T.copy(), "C": a0.conj().T.copy()}[flag]
    b = {"N": b0, "T": b0.T.copy(), "C": b0.conj().T.copy()}[tb]
    alpha, beta = 0.5 + 1.25j, -1.0 + 0.5j
    want = reference.gemm(a, b, c=c, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, policy="emulate",
                          **{k_: v for k_, v in settings.items() if k_ != "path"})
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), c=cp.asarray(c), alpha=alpha, beta=beta, trans_a=ta,
                             trans_b=tb, policy="emulate", **settings)
    assert isinstance(got, cp.ndarray) and got.dtype == np.complex128
    assert same_bits(got.get(), want)


def test_strided_operands_out_and_c_in_place(rng):
    m, k, n = 64, 80, 48
    a = cp.asarray(np.asfortranarray(crandom(m, k, 0.5, rng)))
    big = cp.asarray(crandom(k, 2 * n, 0.5, rng))
    b = big[:, ::2]                                       # a column stride of two elements
    c = cp.asarray(np.asfortranarray(crandom(m, n, 0.5, rng)))
    want = reference.gemm(a.get(), b.get(), c=c.get(), alpha=2.0, beta=1j, moduli=14)
    got = ozaki_cutlass.gemm(a, b, c=c, out=c, alpha=2.0, beta=1j, moduli=14)
    assert got is c and same_bits(c.get(), want)


@pytest.mark.parametrize("path", ["staged", "fused"])
def test_ahat_in_place_and_t_straight_into_out(rng, path):
    """alpha 1, no C: op(A) of unit column stride (not conjugated) is read as Ahat in its
    own memory, and the real call writes T into an out of unit column stride; the
    reference's bits whichever layout takes which step, and A is left as it was."""
    m, k, n = 72, 96, 40
    a0, b = crandom(m, k, 1.0, rng), cp.asarray(crandom(k, n, 1.0, rng))
    wide = cp.asarray(crandom(m, k + 8, 1.0, rng))
    wide[:, :k] = cp.asarray(a0)
    cases = [(cp.asarray(a0), "N"), (wide[:, :k], "N"), (cp.asarray(a0.T.copy()), "T"),
             (cp.asarray(np.asfortranarray(a0.T)), "T"),
             (cp.asarray(np.asfortranarray(a0)), "N"), (cp.asarray(a0.conj().T.copy()), "C")]
    want = reference.gemm(a0, b.get(), moduli=16)
    for a, flag in cases:
        before = a.copy()
        for out in (None, cp.zeros((m, n + 4), complex)[:, :n], cp.asarray(np.zeros((m, n), complex, order="F"))):
            got = ozaki_cutlass.gemm(a, b, trans_a=flag, moduli=16, path=path, out=out)
            assert same_bits(got.get(), want), (flag, a.strides, None if out is None else out.strides)
        assert same_bits(a.get(), before.get())


@pytest.fixture
def karatsuba_every_size(monkeypatch):
    monkeypatch.setenv("OZAKI_KARATSUBA_MIN", "0")   # small shapes run it too (default: 8192 and up)


@pytest.mark.parametrize("shape, flags", [((64, 96, 40), ("N", "N")), ((37, 29, 23), ("T", "C")),
                                          ((5, 1, 3), ("C", "N"))])
def test_karatsuba_gives_the_realified_products_bits(rng, shape, flags, karatsuba_every_size):
    """Fast mode without an inner equilibration: the staged path runs three products per
    modulus (paths.karatsuba); accurate mode the realified product. The reference's bits
    either way, with NaN/Inf, alpha, beta and c."""
    m, k, n = shape
    a0, b0, c = crandom(m, k, 1.0, rng), crandom(k, n, 1.0, rng), crandom(m, n, 1.0, rng)
    a0[m // 2, k // 2] = complex(np.inf, 1.0)
    a = {"N": a0, "T": a0.T.copy(), "C": a0.conj().T.copy()}[flags[0]]
    b = {"N": b0, "T": b0.T.copy(), "C": b0.conj().T.copy()}[flags[1]]
    for settings, karatsuba in ((dict(moduli=16, mode="fast"), True), (dict(moduli=13, mode="fast"), True),
                                (dict(moduli=16, mode="accurate"), False), (dict(policy="emulate"), True)):
        timings = {}
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), c=cp.asarray(c), alpha=0.5 - 1j, beta=2.0,
                                 trans_a=flags[0], trans_b=flags[1], path="staged", timings=timings, **settings)
        want = reference.gemm(a, b, c=c, alpha=0.5 - 1j, beta=2.0, trans_a=flags[0], trans_b=flags[1],
                              **{key: v for key, v in settings.items() if key != "policy"},
                              policy=settings.get("policy", "auto"))
        assert same_bits(got.get(), want), settings
        if "contract" in timings:   # the contract's call: Karatsuba unless it equilibrated
            karatsuba = not timings["contract"]["equilibrated"]
        assert (timings.get("products") == "karatsuba: 3 per modulus") is karatsuba, (settings, timings)


def test_karatsuba_stands_aside_for_an_equilibrated_call_and_takes_long_k(rng, karatsuba_every_size):
    a, b = crandom(24, 160, 1.0, rng), crandom(160, 16, 1.0, rng)
    a[:, :40] *= 2.0**40            # offset inner scales: the contract equilibrates
    b[:40, :] *= 2.0**-40
    timings = {}
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), path="staged", timings=timings)
    assert timings["contract"]["equilibrated"] and "products" not in timings
    assert same_bits(got.get(), reference.gemm(a, b))
    # one k chunk too long for the CRT's int32 differences (43690 terms), and past one chunk
    for k in (50_000, 140_000):
        a, b = crandom(8, k, 0.5, rng), crandom(k, 6, 0.5, rng)
        timings = {}
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), moduli=14, mode="fast", path="staged",
                                 timings=timings)
        assert timings["products"] == "karatsuba: 3 per modulus"
        assert same_bits(got.get(), reference.gemm(a, b, moduli=14, mode="fast")), k


def test_karatsuba_in_panels_gives_the_same_bits(rng, monkeypatch, karatsuba_every_size):
    """Products past PANEL_BYTES run per panel of complex columns: the reference's bits,
    NaN/Inf in a late panel's column and an early one's row included."""
    m, k, n = 40, 50, 600
    monkeypatch.setattr(K, "PANEL_BYTES", 4 * 3 * 14 * m * 200)   # panels of 256, 256, 88 columns
    a, b = crandom(m, k, 1.0, rng), crandom(k, n, 1.0, rng)
    b[7, 530] = complex(1.0, np.nan)
    a[3, 9] = complex(-np.inf, 0.0)
    timings = {}
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), moduli=14, mode="fast", path="staged", timings=timings)
    assert timings["products"] == "karatsuba: 3 per modulus"
    assert same_bits(got.get(), reference.gemm(a, b, moduli=14, mode="fast"))


@pytest.mark.parametrize("variant", ALL_VARIANTS, ids=lambda v: v.name)
def test_every_kernel_gives_the_references_complex_bits(rng, variant, karatsuba_every_size):
    """Each catalogued kernel on a complex product: the staged ones in fast mode run
    Karatsuba, in accurate mode the realified product, as the fused ones always do."""
    a, b = crandom(48, 56, 1.0, rng), crandom(40, 56, 1.0, rng)
    for mode in ("fast", "accurate"):
        timings = {}
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), trans_b="C", moduli=15, mode=mode,
                                 kernel=variant.name, timings=timings)
        assert same_bits(got.get(), reference.gemm(a, b, trans_b="C", moduli=15, mode=mode)), mode
        assert ("products" in timings) is (mode == "fast" and timings["path"] == "staged")


def test_karatsuba_runs_from_its_size_threshold(rng, monkeypatch):
    a, b = crandom(48, 40, 1.0, rng), crandom(40, 24, 1.0, rng)
    for setting, runs in (("", False), ("24", True), ("25", False)):   # unset: 8192; min(m, n, k) = 24
        monkeypatch.setenv("OZAKI_KARATSUBA_MIN", setting)
        timings = {}
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), moduli=15, mode="fast", path="staged",
                                 timings=timings)
        assert ("products" in timings) is runs and same_bits(got.get(), reference.gemm(a, b, moduli=15, mode="fast"))


def test_numpy_torch_and_foreign_inputs(rng):
    torch = pytest.importorskip("torch")
    a, b = crandom(40, 50, 1.0, rng), crandom(50, 30, 1.0, rng)
    want = reference.gemm(a, b, policy="emulate")
    assert same_bits(ozaki_cutlass.gemm(a, b, policy="emulate"), want)
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    got = ozaki_cutlass.gemm(ta, tb, policy="emulate")
    assert got.dtype == torch.complex128 and same_bits(got.cpu().numpy(), want)
    got = ozaki_cutlass.gemm(Producer(cp.asarray(a)), Producer(cp.asarray(b)), policy="emulate")
    assert isinstance(got, DeviceArray) and got.dtype == np.complex128 and same_bits(got.get(), want)
    assert same_bits(cp.from_dlpack(got).get(), want)


def test_the_contract_choice_and_timings(rng):
    a, b = crandom(128, 256, 3.0, rng), crandom(256, 64, 3.0, rng)
    timings = {}
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), policy="emulate", timings=timings)
    choice = reference.contract(a, b, policy="emulate")
    assert timings["contract"]["moduli"] == choice.moduli and timings["path"] in ("staged", "fused")
    assert same_bits(got.get(), reference.gemm(a, b, policy="emulate"))


@pytest.mark.parametrize("flags", [("N", "N"), ("T", "C"), ("C", "N")])
def test_the_contract_of_gpu_operands_is_the_references(rng, flags):
    a, b = crandom(96, 200, 4.0, rng), crandom(200, 48, 4.0, rng)
    a[:, :20] *= 2.0**30   # offset inner scales: the equilibration has work to do
    xa = a.T.copy() if flags[0] == "T" else a.conj().T.copy() if flags[0] == "C" else a
    xb = b.T.copy() if flags[1] == "T" else b.conj().T.copy() if flags[1] == "C" else b
    for accuracy in (None, 2.0**-60):
        got = ozaki_cutlass.contract(cp.asarray(xa), cp.asarray(xb), trans_a=flags[0], trans_b=flags[1],
                                     accuracy=accuracy, policy="emulate")
        assert got == reference.contract(xa, xb, trans_a=flags[0], trans_b=flags[1], accuracy=accuracy,
                                         policy="emulate")
    timings = {}
    ozaki_cutlass.gemm(cp.asarray(xa), cp.asarray(xb), trans_a=flags[0], trans_b=flags[1], policy="emulate",
                       timings=timings)
    assert timings["contract"] == ozaki_cutlass.contract(cp.asarray(xa), cp.asarray(xb), trans_a=flags[0],
                                                         trans_b=flags[1], policy="emulate").as_dict()
    empty = ozaki_cutlass.contract(cp.zeros((0, 5), complex), cp.zeros((5, 3), complex))
    assert empty.moduli is not None and empty.bound == 0.0


def test_nonfinite_and_alpha_zero(rng):
    a, b, c = crandom(20, 30, 1.0, rng), crandom(30, 10, 1.0, rng), crandom(20, 10, 1.0, rng)
    a[3, 4] = complex(np.inf, 0.0)
    b[7, 2] = complex(0.0, np.nan)
    want = reference.gemm(a, b, policy="emulate")
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), policy="emulate").get()
    assert same_bits(got, want) and np.array_equal(np.isfinite(got), np.isfinite(a @ b))
    nan = cp.full((20, 30), complex(np.nan, np.nan))
    got = ozaki_cutlass.gemm(nan, cp.asarray(b), c=cp.asarray(c), alpha=0, beta=1 - 1j)
    assert same_bits(got.get(), reference.gemm(a, b, c=c, alpha=0, beta=1 - 1j))


def test_mixed_and_bad_device_input_is_refused(rng):
    a = cp.asarray(crandom(4, 5, 1.0, rng))
    with pytest.raises(TypeError, match="b must be complex128, got float64"):
        ozaki_cutlass.gemm(a, cp.ones((5, 3)))
    with pytest.raises(TypeError, match="a must be complex128, got complex64"):
        ozaki_cutlass.gemm(a.astype(cp.complex64), cp.ones((5, 3), dtype=complex))
    with pytest.raises(ValueError, match="out overlaps a"):
        ozaki_cutlass.gemm(a, cp.ones((5, 5), dtype=complex), out=a)


@pytest.mark.parametrize("ta, tb", [("N", "N"), ("T", "C"), ("C", "T"), ("C", "C")])
@pytest.mark.parametrize("order", ["C", "F"])
def test_native_runs_cublas_zgemm_where_the_layout_allows(rng, ta, tb, order):
    m, k, n = 48, 64, 40
    a0, b0 = crandom(m, k, 1.0, rng), crandom(k, n, 1.0, rng)
    a = {"N": a0, "T": a0.T, "C": a0.conj().T}[ta]
    b = {"N": b0, "T": b0.T, "C": b0.conj().T}[tb]
    da, db = cp.asarray(np.asarray(a, order=order)), cp.asarray(np.asarray(b, order=order))
    c0 = crandom(m, n, 1.0, rng)
    c = cp.asarray(c0)
    timings = {}
    got = ozaki_cutlass.gemm(da, db, c=c, out=c, alpha=2 - 1j, beta=0.5j, trans_a=ta, trans_b=tb, policy="native",
                             timings=timings)
    assert got is c and np.allclose(c.get(), (2 - 1j) * (a0 @ b0) + 0.5j * c0, rtol=1e-13, atol=1e-12)
    # out is row-major: a conjugated operand stored column-major would be read untransposed,
    # which cuBLAS cannot conjugate; that call runs native DGEMM on the realified operands
    conj_untransposed = "C" in (ta, tb) and order == "F"
    assert timings["kernel"] == ("cublasDgemm_v2" if conj_untransposed else "cublasZgemm_v2"), timings


def test_native_zgemm_values_and_auto_at_a_native_shape(rng):
    m, k, n = 256, 192, 128
    a, b, c = crandom(m, k, 1.0, rng), crandom(k, n, 1.0, rng), crandom(m, n, 1.0, rng)
    got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), c=cp.asarray(c), alpha=1.5j, beta=-1 + 0.5j,
                             policy="native").get()
    assert np.allclose(got, 1.5j * (a @ b) + (-1 + 0.5j) * c, rtol=1e-13, atol=1e-12)
    timings = {}
    ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), timings=timings)   # small: auto decides native
    assert timings["path"] == "native" and timings["kernel"] == "cublasZgemm_v2", timings
