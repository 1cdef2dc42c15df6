"""Native DGEMM and the 2-D copy (ozaki_cutlass.device.cublas) on the GPU, against CuPy.

cuBLAS here and CuPy's matmul may sum in different orders, so results are compared
within 1e-13 of alpha |A| |B| + |beta C| elementwise, not bit for bit. Two identical calls
on one stream must give identical bits (cuBLAS's reproducibility guarantee). Outputs and
the padding around views are poisoned with NaN: a stray read or write shows.
"""

import threading

import numpy as np
import pytest

from ozaki_cutlass.device import cublas, driver
from ozaki_cutlass.device.cublas import dgemm
from ozaki_cutlass.device.layouts import plan_copy, plan_dgemm
from ozaki_cutlass.device.arrays import Matrix

pytestmark = pytest.mark.gpu

RTOL = 1e-13


@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy")
    driver.ensure_context()
    return cupy


def mat(x) -> Matrix:
    rs, cs = (s // 8 for s in x.strides)
    return Matrix(int(x.data.ptr), x.shape[0], x.shape[1], rs, cs, "cupy", x.device.id, x)


def place(cp, host: np.ndarray, kind: str):
    """(view, base): ``host`` on the GPU in layout ``kind``; base is the whole allocation,
    NaN wherever the view does not reach."""
    r, c = host.shape
    if kind == "C":
        base = cp.asarray(host)
        return base, base
    if kind == "F":
        base = cp.asfortranarray(cp.asarray(host))
        return base, base
    if kind == "T":                       # transposed view of a row-major array
        base = cp.ascontiguousarray(cp.asarray(host.T))
        return base.T, base
    if kind == "C_ld":                    # a[:, :c] of a wider array
        base = cp.full((r, c + 3), cp.nan)
        base[:, :c] = cp.asarray(host)
        return base[:, :c], base
    if kind == "F_ld":                    # a[:r] of a taller Fortran-order array
        base = cp.full((r + 2, c), cp.nan, order="F")
        base[:r] = cp.asarray(host)
        return base[:r], base
    if kind == "off":                     # a[1:, 1:c+1] of a larger array: not 256-byte aligned
        base = cp.full((r + 1, c + 2), cp.nan)
        base[1:, 1:c + 1] = cp.asarray(host)
        return base[1:, 1:c + 1], base
    raise ValueError(kind)


def poisoned(cp, r: int, c: int, kind: str):
    return place(cp, np.full((r, c), np.nan), kind)


def reference(cp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return cp.asnumpy(cp.asarray(a) @ cp.asarray(b))


def assert_close(got, want, scale, what=""):
    assert got.shape == want.shape, what
    assert np.all(np.isfinite(got)), f"non-finite values {what}"
    err = np.abs(got - want)
    assert np.all(err <= RTOL * scale), f"max error {np.max(err / np.maximum(scale, 1e-300))} {what}"


def assert_padding_untouched(base, view):
    """Everything in the contiguous allocation ``base`` outside ``view`` is still NaN."""
    flat = base.get().ravel(order="C" if base.flags.c_contiguous else "F")   # memory order
    inside = np.zeros(flat.size, dtype=bool)
    if view.size:
        offset = (int(view.data.ptr) - int(base.data.ptr)) // 8
        inside[offset + np.add.outer(np.arange(view.shape[0]) * (view.strides[0] // 8),
                                     np.arange(view.shape[1]) * (view.strides[1] // 8)).ravel()] = True
    assert np.all(np.isnan(flat[~inside])), "written outside the view"


def run(plan, alpha, beta, stream=0):
    assert plan is not None
    dgemm(plan, alpha, beta, stream)


KINDS = ["C", "F", "T", "C_ld", "F_ld", "off"]
SHAPES = [(1, 1, 1), (7, 5, 3), (1, 300, 17), (255, 1, 64), (64, 48, 80), (129, 63, 200), (512, 384, 256)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_layouts_match_cupy(cp, rng, shape):
    m, n, k = shape
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    want, scale = reference(cp, a, b), np.abs(a) @ np.abs(b)
    for ka in KINDS:
        da, _ = place(cp, a, ka)
        for kb in KINDS:
            db, _ = place(cp, b, kb)
            for ko in ("C", "F", "C_ld", "off"):
                do, base = poisoned(cp, m, n, ko)
                run(plan_dgemm(mat(da), mat(db), mat(do)), 1.0, 0.0)
                assert_close(cp.asnumpy(do), want, scale, (ka, kb, ko))
                assert_padding_untouched(base, do)


@pytest.mark.parametrize("order", ["C", "F", "C_ld"])
def test_alpha_beta_existing_output(cp, rng, order):
    m, n, k = 70, 45, 150
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    product, scale = reference(cp, a, b), np.abs(a) @ np.abs(b)
    da, db = cp.asarray(a), cp.asarray(b)          # alive until the GEMM has run: a plan holds pointers only
    for alpha, beta in [(1.0, 1.0), (-1.5, 0.75), (2.0, -1.0), (0.5, 0.0)]:
        do, base = place(cp, c, order)
        run(plan_dgemm(mat(da), mat(db), mat(do)), alpha, beta)
        assert_close(cp.asnumpy(do), alpha * product + beta * c, abs(alpha) * scale + abs(beta) * np.abs(c),
                     (alpha, beta))
        assert_padding_untouched(base, do)


@pytest.mark.parametrize("order", ["C", "F"])
def test_k_zero_and_alpha_zero_scale_c(cp, rng, order):
    m, n = 33, 20
    c = rng.standard_normal((m, n))
    empty_a, empty_b = cp.zeros((m, 0)), cp.zeros((0, n))
    do, _ = place(cp, c, order)
    run(plan_dgemm(mat(empty_a), mat(empty_b), mat(do)), 1.0, 0.5)
    assert np.array_equal(cp.asnumpy(do), 0.5 * c)
    do, _ = poisoned(cp, m, n, order)
    run(plan_dgemm(mat(empty_a), mat(empty_b), mat(do)), 1.0, 0.0)
    assert np.array_equal(cp.asnumpy(do), np.zeros((m, n)))
    # alpha == 0: C = beta C
    a, b = cp.asarray(rng.standard_normal((m, 40))), cp.asarray(rng.standard_normal((40, n)))
    do, _ = place(cp, c, order)
    run(plan_dgemm(mat(a), mat(b), mat(do)), 0.0, 0.5)
    assert np.array_equal(cp.asnumpy(do), 0.5 * c)



def test_alpha_zero_reads_neither_operand_through_gemm(cp, rng):
    """The README and the reference say it for every policy: alpha == 0 reads neither A nor
    B, so their NaN and Inf do not reach C (BLAS's convention). Added 2026-12-05 with the
    reference's fix; on the GPU (2026-12-06, H100) cuBLAS's call read them: alpha == 0 now
    calls cuBLAS with k = 0 (C = beta C)."""
    import ozaki_cutlass
    from ozaki_cutlass import reference

    m, n, k = 33, 20, 40
    a, b = np.full((m, k), np.nan), np.full((k, n), -np.inf)
    a[0, 0] = np.inf
    c = rng.standard_normal((m, n))
    for policy in ("native", "emulate", "auto"):
        want = reference.gemm(a, b, c=c, alpha=0.0, beta=0.5, policy=policy)
        assert np.array_equal(want, 0.5 * c), policy
        got = ozaki_cutlass.gemm(cp.asarray(a), cp.asarray(b), c=cp.asarray(c), alpha=0.0, beta=0.5, policy=policy)
        assert np.array_equal(cp.asnumpy(got), want), policy
    # without c (the native fast lane's calls, from the second on), and batches (one
    # strided-batched cuBLAS call, real and complex)
    da, db = cp.asarray(a), cp.asarray(b)
    for policy in ("native", "auto", "auto"):
        assert np.array_equal(cp.asnumpy(ozaki_cutlass.gemm(da, db, alpha=0.0, policy=policy)), np.zeros((m, n)))
    for dtype in (np.float64, np.complex128):
        a3, b3 = cp.stack([da, da]).astype(dtype), cp.stack([db, db]).astype(dtype)
        got = ozaki_cutlass.gemm(a3, b3, alpha=0.0, policy="native")
        assert got.shape == (2, m, n) and np.array_equal(cp.asnumpy(got), np.zeros((2, m, n))), dtype


def test_empty_output_is_a_no_op(cp):
    for m, n in ((0, 5), (5, 0)):
        plan = plan_dgemm(mat(cp.ones((m, 3))), mat(cp.ones((3, n))), mat(cp.ones((m, n))))
        run(plan, 1.0, 0.0)
    cp.cuda.Device().synchronize()


@pytest.mark.parametrize("shape", [(129, 63, 200), (512, 512, 512)], ids=lambda s: "x".join(map(str, s)))
def test_two_identical_calls_same_bits(cp, rng, shape):
    m, n, k = shape
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    da, db = cp.asarray(a), cp.asarray(b)
    outs = []
    for _ in range(2):
        do = cp.asarray(c)
        run(plan_dgemm(mat(da), mat(db), mat(do)), -1.25, 0.5)
        outs.append(cp.asnumpy(do))
    assert np.array_equal(outs[0].view(np.int64), outs[1].view(np.int64))


def test_same_bits_on_concurrent_streams(cp, rng):
    """No workspace, one algorithm per layout and alignment: calls running at once on
    several streams give the bits of a lone call."""
    m, n, k = 640, 384, 1536
    da, db = cp.asarray(rng.standard_normal((m, k))), cp.asarray(rng.standard_normal((k, n)))
    alone = cp.full((m, n), cp.nan)
    run(plan_dgemm(mat(da), mat(db), mat(alone)), 1.0, 0.0)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(4)]
    outs = [cp.full((m, n), cp.nan) for _ in streams]
    cp.cuda.Device().synchronize()
    for _ in range(3):
        for stream, out in zip(streams, outs):
            run(plan_dgemm(mat(da), mat(db), mat(out)), 1.0, 0.0, stream)
    cp.cuda.Device().synchronize()
    for out in outs:
        assert cp.array_equal(out.view(cp.int64), alone.view(cp.int64))


def test_non_default_stream(cp, rng):
    a, b = rng.standard_normal((100, 90)), rng.standard_normal((90, 80))
    da, db, do = cp.asarray(a), cp.asarray(b), cp.full((100, 80), cp.nan)
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    run(plan_dgemm(mat(da), mat(db), mat(do)), 1.0, 0.0, stream)      # a CuPy Stream object
    stream.synchronize()
    assert_close(cp.asnumpy(do), reference(cp, a, b), np.abs(a) @ np.abs(b))
    do.fill(cp.nan)
    cp.cuda.Device().synchronize()
    run(plan_dgemm(mat(da), mat(db), mat(do)), 1.0, 0.0, stream.ptr)  # a raw handle
    stream.synchronize()
    assert_close(cp.asnumpy(do), reference(cp, a, b), np.abs(a) @ np.abs(b))


def test_other_thread_gets_its_own_handle(cp, rng):
    a, b = rng.standard_normal((64, 32)), rng.standard_normal((32, 48))
    da, db = cp.asarray(a), cp.asarray(b)
    mine = cp.full((64, 48), cp.nan)
    run(plan_dgemm(mat(da), mat(db), mat(mine)), 1.0, 0.0)                # this thread's handle
    outs = {name: cp.full((64, 48), cp.nan) for name in ("bare", "ready")}
    cp.cuda.Device().synchronize()
    errors = {}

    def work(name):
        try:
            if name == "ready":
                driver.ensure_context()
            run(plan_dgemm(mat(da), mat(db), mat(outs[name])), 1.0, 0.0)
            driver.synchronize(0)
        except Exception as exc:  # noqa: BLE001 - examined below
            errors[name] = exc

    for name in outs:
        t = threading.Thread(target=work, args=(name,))
        t.start()
        t.join()
    # a thread with no current context is told so, before cuBLAS is called
    assert isinstance(errors.get("bare"), driver.CudaError), errors.get("bare")
    assert "no CUDA context is current" in str(errors["bare"])
    assert np.all(np.isnan(cp.asnumpy(outs["bare"])))
    assert "ready" not in errors, errors["ready"]
    assert_close(cp.asnumpy(outs["ready"]), reference(cp, a, b), np.abs(a) @ np.abs(b))
    assert np.array_equal(cp.asnumpy(outs["ready"]), cp.asnumpy(mine))
    assert len({key[1] for key in cublas._HANDLES}) >= 2     # this thread's handle and the other's


def test_library_facts(cp):
    assert cublas.available()
    major, minor, patch = cublas.version()
    assert major >= 11 and minor >= 0 and patch >= 0


def copy_matrix(src, dst, rows: int, cols: int, stream) -> bool:
    """The native path's copy of c into out (paths.native): plan_copy, then cublas.run_copy;
    False, with nothing done, where the layouts allow no 2-D copy."""
    plan = plan_copy(src, dst, rows, cols)
    if plan is not None:
        cublas.run_copy(plan, stream)
    return plan is not None


@pytest.mark.parametrize("shape", [(37, 53), (1, 40), (40, 1)], ids=lambda s: "x".join(map(str, s)))
def test_copy_matrix(cp, rng, shape):
    r, c = shape
    x = rng.standard_normal(shape)
    for src_kind, dst_kind in [("C_ld", "C_ld"), ("C", "C_ld"), ("F_ld", "F"), ("T", "F_ld"), ("F", "F_ld")]:
        src, _ = place(cp, x, src_kind)
        dst, base = poisoned(cp, r, c, dst_kind)
        assert copy_matrix(mat(src), mat(dst), r, c, 0), (src_kind, dst_kind)
        assert np.array_equal(cp.asnumpy(dst), x), (src_kind, dst_kind)
        assert_padding_untouched(base, dst)
    # row-major into column-major: refused unless one dimension is 1, then it is one run
    src, _ = place(cp, x, "C")
    dst, _ = poisoned(cp, r, c, "F")
    done = copy_matrix(mat(src), mat(dst), r, c, 0)
    if r > 1 and c > 1:
        assert not done
        assert np.all(np.isnan(cp.asnumpy(dst)))
    else:
        assert done and np.array_equal(cp.asnumpy(dst), x)


def test_copy_matrix_on_a_stream(cp, rng):
    x = rng.standard_normal((200, 300))
    src = cp.asarray(x)
    dst, _ = poisoned(cp, 200, 300, "C_ld")
    cp.cuda.Device().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    assert copy_matrix(mat(src), mat(dst), 200, 300, stream)
    stream.synchronize()
    assert np.array_equal(cp.asnumpy(dst), x)
