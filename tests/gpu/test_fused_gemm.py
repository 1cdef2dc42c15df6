"""Fused modulus-group INT8 GEMMs (partial-CRT epilogue; sm_90a, and sm_80 through its
compute_80 PTX) on the GPU, through the runtime's binding (kernels.GroupGemm): bit for
bit against the exact integer formula, for one group and for several groups per call
(one batched launch for one-modulus groups on sm_90a), across the arches, and the INT8
rate next to the plain kernel.

For a group's moduli m_0..m_{G-1} with residues concatenated along k (row i of A holds
modulus 0's k_pad values, then modulus 1's, ...; B likewise):
    X[i, j] = (sum_g c_g (A_g[i] . B_g[j] mod m_g)) mod prod m_g,
c_g = (M/m_g) ((M/m_g)^-1 mod m_g) mod M. Inputs are fresh random residues in each
modulus' symmetric range (never zeros); X is poisoned before every launch.
"""

import statistics

import numpy as np
import pytest
from fused_support import reference, symmetric_residues

from ozaki_cutlass.device import driver
from ozaki_cutlass.generator import Arch, Epilogue, GemmVariant, build, catalog
from ozaki_cutlass.kernels.gemm import GroupGemm
from ozaki_cutlass.kernels.library import UnsupportedProblem
from ozaki_cutlass.numerics.moduli import MODULI_TABLE

pytestmark = pytest.mark.gpu

OUT = None  # the default artifact directory (build/ in a checkout)
VARIANTS = [v for arch in (Arch.SM90A, Arch.SM80) for v in catalog(arch, epilogue=Epilogue.PARTIAL_CRT)]
SM80 = [v for v in VARIANTS if v.arch is Arch.SM80]
POISON = 0x5A
MODULI = {
    4: [(256, 255, 253, 251), (199, 197, 193, 191)],
    3: [(256, 255, 253), (239, 233, 229)],
    2: [(247, 241), (256, 255)],
    1: [(256,), (251,)],
}
PLAIN = "i8_sm90a_128x256x128_c1x1_coop_s0_int32_g1"


@pytest.fixture(scope="module")
def ctx():
    driver.ensure_context()


_libs = {}


def load(variant):
    if variant not in _libs:
        (artifact,) = build([variant], OUT, progress=False).artifacts
        _libs[variant] = GroupGemm(artifact)
    return _libs[variant]


def make_operands(rng, rows, moduli, k_pad, gap=0):
    """rows x (G*k_pad + gap) int8, modulus g's residues in columns [g*k_pad, (g+1)*k_pad)."""
    g = len(moduli)
    out = np.zeros((rows, g * k_pad + gap), np.int8)
    for i, m in enumerate(moduli):
        out[:, i * k_pad:(i + 1) * k_pad] = symmetric_residues(rng, (rows, k_pad), m)
    return out


def x_dtype(group_size):
    """The stored partial: one byte for a group of one modulus, else uint32."""
    return np.uint8 if group_size == 1 else np.uint32


def run_fused(lib, a, b, moduli, k_pad, n, ldx=None, groups=1, gap_x=0):
    """X of each of ``groups`` consecutive groups (``moduli``: groups * G values; A's and B's
    rows hold every modulus's k_pad residues in turn), group q's partials at q * stride_x,
    stride_x = m * ldx + gap_x. Returns [X_0, ...] (or X_0 alone for one group)."""
    m = a.shape[0]
    ldx = ldx or n
    dtype = x_dtype(lib.group_size)
    stride_x = m * ldx + gap_x
    da, db = driver.DeviceBuffer(a.nbytes), driver.DeviceBuffer(b.nbytes)
    dx = driver.DeviceBuffer(np.dtype(dtype).itemsize * stride_x * groups)
    da.upload(np.ascontiguousarray(a))
    db.upload(np.ascontiguousarray(b))
    dx.fill_bytes(POISON)
    ws_bytes = lib.workspace_size(m, n, k_pad, groups)
    ws = driver.DeviceBuffer(ws_bytes) if ws_bytes else None
    lib(m, n, k_pad, list(moduli), da.ptr, a.shape[1], db.ptr, b.shape[1], dx.ptr, ldx, stride_x,
        ws.ptr if ws else 0, ws_bytes, 0)
    driver.synchronize()
    flat = dx.download(np.empty(stride_x * groups, dtype))
    xs = [flat[q * stride_x:q * stride_x + m * ldx].reshape(m, ldx)[:, :n] for q in range(groups)]
    if gap_x:  # nothing written between the planes
        assert all((flat[q * stride_x + m * ldx:(q + 1) * stride_x].view(np.uint8) == POISON).all()
                   for q in range(groups))
    return xs[0] if groups == 1 else xs


def n_align(v):
    """Output rows are stored by TMA in 16-byte units: 4 uint32 or 16 byte partials."""
    return 16 // np.dtype(x_dtype(v.group_size)).itemsize


def sizes(v):
    """(m, n, k_pad): 1, odd m, tile +- alignment, k_pad = tile_k and 3 tile_k."""
    al = n_align(v)
    return [
        (1, al, v.tile_k),
        (v.tile_m + 1, v.tile_n + al, v.tile_k),
        (v.tile_m - 1, v.tile_n - al, 3 * v.tile_k),
        (3 * v.tile_m + 7, 2 * v.tile_n + 3 * al, 3 * v.tile_k),
        (77, 128 + al, 2 * v.tile_k),
    ]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_bit_exact_against_the_integer_formula(ctx, rng, variant):
    lib = load(variant)
    for moduli in MODULI[variant.group_size]:
        for m, n, k_pad in sizes(variant):
            for gap in (0, 48):  # lda/ldb beyond G*k_pad (multiples of 16)
                a = make_operands(rng, m, moduli, k_pad, gap)
                b = make_operands(rng, n, moduli, k_pad, gap)
                got = run_fused(lib, a, b, moduli, k_pad, n, ldx=n + (2 * n_align(variant) if gap else 0))
                want = reference(a, b, moduli, k_pad)
                assert np.array_equal(got, want), (variant.name, moduli, m, n, k_pad, gap)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_extreme_accumulators(ctx, variant):
    """Every product +-2^14 over a long k_pad: negative and large int32 accumulators."""
    lib = load(variant)
    moduli = MODULI[variant.group_size][0]
    k_pad = 16 * variant.tile_k
    m, n = 8, max(8, n_align(variant))
    a = np.full((m, len(moduli) * k_pad), -128, np.int8)
    b = np.full((n, len(moduli) * k_pad), -128, np.int8)
    b[1::2] = 127  # odd rows: negative sums
    got = run_fused(lib, a, b, moduli, k_pad, n)
    assert np.array_equal(got, reference(a, b, moduli, k_pad))


def group_moduli(g, groups):
    """``groups`` groups of g moduli from the moduli table, each pairwise coprime."""
    return list(MODULI_TABLE[:g * groups])


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_several_groups_in_one_call(ctx, rng, variant):
    """As many groups as the table's 20 moduli allow (one batched launch for one-modulus
    groups on sm_90a, else a launch per group), partial planes apart by more than a plane:
    each group's partials equal the formula on its own moduli's columns, nothing is written
    between the planes."""
    g = variant.group_size
    groups = 20 // g
    moduli = group_moduli(g, groups)
    m, n, k_pad = variant.tile_m + 3, variant.tile_n + n_align(variant), 2 * variant.tile_k
    a = make_operands(rng, m, moduli, k_pad, gap=16)
    b = make_operands(rng, n, moduli, k_pad, gap=16)
    xs = run_fused(load(variant), a, b, moduli, k_pad, n, groups=groups, gap_x=4 * n_align(variant))
    for q in range(groups):
        cols = slice(q * g * k_pad, (q + 1) * g * k_pad)
        want = reference(a[:, cols], b[:, cols], moduli[q * g:(q + 1) * g], k_pad)
        assert np.array_equal(xs[q], want), (variant.name, q)


def _refusal(lib, m, n, k_pad, moduli, lda, ldb, ldx, stride_x=0):
    with pytest.raises(UnsupportedProblem) as info:
        lib(m, n, k_pad, moduli, 1 << 20, lda, 1 << 20, ldb, 1 << 20, ldx, stride_x)
    return str(info.value)


@pytest.mark.parametrize("variant", VARIANTS[:1] + SM80[:1], ids=lambda v: v.name)
def test_bad_moduli_are_refused(ctx, variant):
    g, k = variant.group_size, variant.tile_k
    al = n_align(variant)
    text = _refusal(load(variant), 4, al, k, [1] * g, g * k, g * k, al)  # 1: below the range
    assert "moduli[0]=1" in text
    if g > 1:
        text = _refusal(load(variant), 4, al, k, [256] * g, g * k, g * k, al)
        assert "coprime" in text  # the second group's moduli are checked too, and named by their position in the call
        text = _refusal(load(variant), 4, al, k, group_moduli(g, 1) + [256] * g, 2 * g * k, 2 * g * k, al,
                        4 * al)
        assert "coprime" in text and f"moduli[{g + 1}]=256" in text


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.group_size in (1, 4)], ids=lambda v: v.name)
def test_group_counts_and_strides_are_checked(ctx, variant):
    """More than 20 moduli per call, rows too short for every group's residues, and
    partial planes that would overlap are refused before any launch."""
    lib = load(variant)
    g, k = variant.group_size, variant.tile_k
    al = n_align(variant)
    moduli = group_moduli(g, 20 // g)
    groups = len(moduli) // g
    text = _refusal(lib, 4, al, k, moduli + moduli[:g], (groups + 1) * g * k, (groups + 1) * g * k, al,
                    4 * al)
    assert "groups=" in text and "20 moduli" in text
    text = _refusal(lib, 4, al, k, moduli, groups * g * k - 16, groups * g * k, al, 4 * al)
    assert "lda" in text
    text = _refusal(lib, 4, al, k, moduli, groups * g * k, groups * g * k, al, 3 * al)  # (m-1)*ldx+n = 4 al
    assert "stride_x" in text
    if g > 1:
        with pytest.raises(UnsupportedProblem, match="whole groups"):
            lib(4, al, k, moduli[:g + 1], 1 << 20, 2 * g * k, 1 << 20, 2 * g * k, 1 << 20, al, 4 * al)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.group_size == 1], ids=lambda v: v.name)
def test_byte_partials_need_rows_of_16(ctx, variant):
    k = variant.tile_k
    text = _refusal(load(variant), 4, 8, k, [251], k, k, 8)
    assert "multiple of 16" in text


def _time(fn, repeats=5):
    timer = driver.EventTimer()
    fn()
    fn()
    times = []
    for _ in range(repeats):
        timer.start()
        fn()
        times.append(timer.stop())
    return statistics.median(times) / 1e3


@pytest.mark.parametrize("variant", SM80, ids=lambda v: v.name)
def test_sm80_partials_equal_the_sm90a_ones(ctx, rng, variant):
    """The same inputs through an sm_80 fused kernel and the first sm_90a one of its group
    size: the same bits, on a shape of several tiles with partial edge tiles."""
    other = next(v for v in VARIANTS if v.arch is Arch.SM90A and v.group_size == variant.group_size)
    al = n_align(variant)
    m, n, k_pad = 2 * variant.tile_m + 5, 3 * variant.tile_n - al, 2 * other.tile_k
    assert k_pad % variant.tile_k == 0
    for moduli in MODULI[variant.group_size]:
        a = make_operands(rng, m, moduli, k_pad)
        b = make_operands(rng, n, moduli, k_pad)
        got = run_fused(load(variant), a, b, moduli, k_pad, n)
        assert np.array_equal(got, run_fused(load(other), a, b, moduli, k_pad, n)), (variant.name, moduli)
        assert np.array_equal(got, reference(a, b, moduli, k_pad)), (variant.name, moduli)


@pytest.mark.parametrize("variant", SM80[:1], ids=lambda v: v.name)
def test_sm80_needs_no_workspace_and_checks_its_strides(ctx, variant):
    lib = load(variant)
    g, k = variant.group_size, variant.tile_k
    assert lib.workspace_size(300, 256, 4 * k, 2) == 0
    text = _refusal(lib, 4, 4, k, list(MODULI[g][0]), g * k + 8, g * k, 4)
    assert "lda" in text and "multiple of 16" in text
    text = _refusal(lib, 4, 4, k + 16, list(MODULI[g][0]), g * (k + 16), g * (k + 16), 4)
    assert f"multiple of tile_k={k}" in text


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.group_size in (1, 4) and v.arch is Arch.SM90A],
                         ids=lambda v: v.name)
def test_rate_next_to_the_plain_kernel(ctx, rng, variant, capsys):
    """The fused kernel against the plain one doing the same INT8 work at n = 8192: one
    group of 4 moduli, or 15 one-modulus groups in one call (the staged path's count);
    printed, with a spot check of the big run's partials."""
    from ozaki_cutlass.kernels.gemm import load_int8_gemm

    m = n = k_pad = 8192
    g = variant.group_size
    count = 15 if g == 1 else g
    moduli = list(MODULI_TABLE[:count])
    lib = load(variant)
    a = rng.integers(-128, 128, (m, count * k_pad), dtype=np.int8)
    b = rng.integers(-128, 128, (n, count * k_pad), dtype=np.int8)
    da, db = driver.DeviceBuffer(a.nbytes), driver.DeviceBuffer(b.nbytes)
    da.upload(a)
    db.upload(b)
    dtype = x_dtype(g)
    dx = driver.DeviceBuffer(np.dtype(dtype).itemsize * count // g * m * n)
    ws_bytes = lib.workspace_size(m, n, k_pad, count // g)
    ws = driver.DeviceBuffer(ws_bytes) if ws_bytes else None

    def fused():
        lib(m, n, k_pad, moduli, da.ptr, count * k_pad, db.ptr, count * k_pad, dx.ptr, n, m * n,
            ws.ptr if ws else 0, ws_bytes, 0)

    t_fused = _time(fused)
    # A spot check of the big run: a few rows of the first and the last group.
    x = dx.download(np.empty((count // g, m, n), dtype))
    rows = [0, 4097, m - 1]
    for q in (0, count // g - 1):
        cols = slice(q * g * k_pad, (q + 1) * g * k_pad)
        assert np.array_equal(x[q][rows], reference(a[rows][:, cols], b[:, cols], moduli[q * g:(q + 1) * g], k_pad))

    # The same work on the plain kernel: a batch of `count` GEMMs reading the same operands.
    plain = load_int8_gemm(GemmVariant.from_dict(dict(
        arch="sm_90a", tile_m=128, tile_n=256, tile_k=128, cluster_m=1, cluster_n=1,
        schedule="cooperative", stages=0)), OUT)
    assert plain.name == PLAIN
    dc = driver.DeviceBuffer(4 * count * m * n)
    pws = plain.workspace_size(m, n, k_pad, count)
    pw = driver.DeviceBuffer(pws) if pws else None

    def batched():
        plain(m, n, k_pad, count, da.ptr, count * k_pad, k_pad, db.ptr, count * k_pad, k_pad, dc.ptr, n, m * n,
              pw.ptr if pw else 0, pws, 0)

    t_plain = _time(batched)
    ops = 2 * m * n * k_pad * count
    with capsys.disabled():
        print(f"\n  {variant.name}, {count} moduli: {ops / t_fused / 1e12:.0f} TOP/s ({t_fused * 1e3:.2f} ms); "
              f"{PLAIN} batch {count}: {ops / t_plain / 1e12:.0f} TOP/s ({t_plain * 1e3:.2f} ms); "
              f"ratio {t_plain / t_fused:.2f}")
