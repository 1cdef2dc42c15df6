"""plan_dgemm and plan_copy (ozaki_cutlass.device.layouts), executed on the CPU.

"Device memory" is one flat NumPy buffer and a Matrix's ptr a byte offset into it. A plan
is run by a NumPy model of column-major cublasDgemm_v2 (reading and writing only what
cuBLAS would: the column-major views its ld and trans flags name) or of cuMemcpy2D, and
the whole buffer afterwards must equal the expected one: O = alpha A @ B + beta O on the
original matrices, everything else untouched. Values are small integers, so every
product and sum is exact and the comparisons are exact. Mutated plans and a planner that
honours strides along size-1 dimensions must be caught by the same sweep.
"""

import dataclasses
import itertools

import numpy as np
import pytest

from ozaki_cutlass.device import cublas, layouts
from ozaki_cutlass.device.layouts import INT_MAX, CopyPlan, DgemmPlan, plan_copy, plan_dgemm
from ozaki_cutlass.device.arrays import Matrix


def _strides(a: np.ndarray) -> tuple[int, int]:
    return a.strides[0] // 8, a.strides[1] // 8


# Layouts of an r x c matrix, as NumPy makes them (element strides of the view)
KINDS = {
    "C": lambda r, c: _strides(np.empty((r, c))),
    "F": lambda r, c: _strides(np.empty((r, c), order="F")),
    "T": lambda r, c: _strides(np.empty((c, r)).T),                       # transposed view
    "C_ld": lambda r, c: _strides(np.empty((r, c + 3))[:, :c]),           # a[:, :c] of a wider array
    "F_ld": lambda r, c: _strides(np.empty((r + 2, c), order="F")[:r]),
    "T_ld": lambda r, c: _strides(np.empty((c, r + 5)).T[:r]),
}
ROW_MAJOR, COL_MAJOR = {"C", "C_ld"}, {"F", "T", "F_ld", "T_ld"}
ODD_STRIDES = (0, -3, 7, 2**40)   # put along size-1 dimensions, where a stride is never used


def layout(kind: str, r: int, c: int, odd: int | None) -> tuple[int, int]:
    rs, cs = KINDS[kind](r, c)
    if odd is not None:
        rs = ODD_STRIDES[odd % 4] if r == 1 else rs
        cs = ODD_STRIDES[(odd + 1) % 4] if c == 1 else cs
    return rs, cs


class Heap:
    """Places matrices in one flat buffer, gaps between them; ptr = 8 * element offset."""

    def __init__(self):
        self.top = 5

    def place(self, rows: int, cols: int, rs: int, cs: int) -> Matrix:
        used = [(n, s) for n, s in ((rows, rs), (cols, cs)) if n > 1]
        lo = sum(min(0, s * (n - 1)) for n, s in used)
        hi = sum(max(0, s * (n - 1)) for n, s in used)
        base = self.top - lo
        self.top = base + hi + 1 + 4
        return Matrix(8 * base, rows, cols, rs, cs, "cai", None, None)

    def memory(self, rng) -> np.ndarray:
        return rng.integers(-4, 5, size=self.top + 5).astype(np.float64)


def index(x) -> np.ndarray:
    """Flat indices of a Matrix's elements (a stride along a size-1 dimension is not used)."""
    return x.ptr // 8 + np.add.outer(np.arange(x.rows) * x.rs, np.arange(x.cols) * x.cs)


def column_major(ptr: int, rows: int, cols: int, ld: int, size: int) -> np.ndarray:
    assert ptr % 8 == 0
    idx = ptr // 8 + np.add.outer(np.arange(rows), np.arange(cols) * ld)
    assert idx.size == 0 or (idx.min() >= 0 and idx.max() < size), "reads or writes outside the buffer"
    return idx


def run_dgemm(mem: np.ndarray, plan: DgemmPlan, alpha: float, beta: float) -> None:
    """cublasDgemm_v2 on a flat buffer: C = alpha op(A) op(B) + beta C, column-major, with
    cuBLAS's rules (ld >= max(1, rows of the stored matrix); beta == 0: C not read)."""
    assert plan.lda >= max(1, plan.k if plan.transa else plan.m)
    assert plan.ldb >= max(1, plan.n if plan.transb else plan.k)
    assert plan.ldc >= max(1, plan.m)
    if plan.m == 0 or plan.n == 0:
        return
    ra, ca = (plan.k, plan.m) if plan.transa else (plan.m, plan.k)
    rb, cb = (plan.n, plan.k) if plan.transb else (plan.k, plan.n)
    a = mem[column_major(plan.a_ptr, ra, ca, plan.lda, mem.size)]
    b = mem[column_major(plan.b_ptr, rb, cb, plan.ldb, mem.size)]
    ic = column_major(plan.c_ptr, plan.m, plan.n, plan.ldc, mem.size)
    product = (a.T if plan.transa else a) @ (b.T if plan.transb else b)
    mem[ic] = alpha * product + (beta * mem[ic] if beta != 0 else 0.0)


SHAPES = [(3, 4, 5), (4, 4, 4), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 5), (1, 4, 1), (3, 1, 1),
          (1, 1, 1), (0, 4, 5), (3, 0, 5), (3, 4, 0), (0, 0, 0)]
SCALARS = [(1.5, -0.5), (1.0, 0.0), (-2.0, 1.0)]


def check_case(planner, rng, m, n, k, kinds, odd, alpha, beta) -> str | None:
    """Plan and run one problem; None when the buffer ends as expected, else what went wrong."""
    heap = Heap()
    mats = [heap.place(r, c, *layout(kind, r, c, None if odd is None else odd + i))
            for i, (kind, (r, c)) in enumerate(zip(kinds, ((m, k), (k, n), (m, n))))]
    A, B, O = mats
    mem = heap.memory(rng)
    io = index(O)
    if beta == 0:
        mem[io] = np.nan                      # beta == 0: O must not be read
    want = mem.copy()
    product = mem[index(A)] @ mem[index(B)]
    want[io] = alpha * product + (beta * mem[io] if beta != 0 else 0.0)
    try:
        plan = planner(A, B, O)
        if plan is None:
            return "no plan for a valid layout"
        run_dgemm(mem, plan, alpha, beta)
    except (AssertionError, ValueError, IndexError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if not np.array_equal(mem, want, equal_nan=True):
        return f"wrong result with {plan}"
    return None


def sweep(planner, rng, shapes=SHAPES, odd_choices=(None, 0, 1, 2, 3), scalars=SCALARS) -> list[str]:
    failures = []
    cases = itertools.product(shapes, itertools.product(KINDS, repeat=3), odd_choices)
    for i, ((m, n, k), kinds, odd) in enumerate(cases):
        alpha, beta = scalars[i % len(scalars)]
        why = check_case(planner, rng, m, n, k, kinds, odd, alpha, beta)
        if why is not None:
            failures.append(f"m={m} n={n} k={k} layouts={kinds} odd={odd}: {why}")
    return failures


# --------------------------------------------------------------------------- plan_dgemm

@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_layout_computes_a_times_b(rng, shape):
    failures = sweep(plan_dgemm, rng, shapes=[shape])
    assert not failures, f"{len(failures)} failures, first: {failures[:3]}"


def test_canonical_plans():
    m, n, k = 3, 4, 5
    heap = Heap()
    A, B, O = heap.place(m, k, k, 1), heap.place(k, n, n, 1), heap.place(m, n, n, 1)
    # all row-major: O^T = B^T A^T, B^T and A^T column-major as they lie
    assert plan_dgemm(A, B, O) == DgemmPlan(transa=False, transb=False, m=n, n=m, k=k, a_ptr=B.ptr, lda=n,
                                            b_ptr=A.ptr, ldb=k, c_ptr=O.ptr, ldc=n, transposed=True)
    Af, Bf, Of = heap.place(m, k, 1, m + 1), heap.place(k, n, 1, k), heap.place(m, n, 1, m + 2)
    assert plan_dgemm(Af, Bf, Of) == DgemmPlan(transa=False, transb=False, m=m, n=n, k=k, a_ptr=Af.ptr,
                                               lda=m + 1, b_ptr=Bf.ptr, ldb=k, c_ptr=Of.ptr, ldc=m + 2,
                                               transposed=False)
    # row-major output, A a transposed view (column-major), B row-major with a padded ld
    At, Bp = heap.place(m, k, 1, m), heap.place(k, n, n + 3, 1)
    assert plan_dgemm(At, Bp, O) == DgemmPlan(transa=False, transb=True, m=n, n=m, k=k, a_ptr=Bp.ptr,
                                              lda=n + 3, b_ptr=At.ptr, ldb=m, c_ptr=O.ptr, ldc=n, transposed=True)
    # column-major output, row-major operands: both transposed
    assert plan_dgemm(A, B, Of) == DgemmPlan(transa=True, transb=True, m=m, n=n, k=k, a_ptr=A.ptr, lda=k,
                                             b_ptr=B.ptr, ldb=n, c_ptr=Of.ptr, ldc=m + 2, transposed=False)


def _m(rows, cols, rs, cs, ptr=0):
    return Matrix(ptr, rows, cols, rs, cs, "cai", None, None)


BIG = 2**31
REJECTED = {
    "A no unit stride": (_m(3, 5, 10, 2), _m(5, 4, 4, 1), _m(3, 4, 4, 1)),
    "B no unit stride": (_m(3, 5, 5, 1), _m(5, 4, 2, 11), _m(3, 4, 4, 1)),
    "O no unit stride": (_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 4, 8, 2)),
    "A row-major ld too small": (_m(3, 5, 4, 1), _m(5, 4, 4, 1), _m(3, 4, 4, 1)),
    "A column-major ld too small": (_m(3, 5, 1, 2), _m(5, 4, 4, 1), _m(3, 4, 4, 1)),
    "O ld too small": (_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 4, 3, 1)),
    "O column-major ld too small": (_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 4, 1, 2)),
    "A broadcast rows (zero stride)": (_m(3, 5, 0, 1), _m(5, 4, 4, 1), _m(3, 4, 4, 1)),
    "B broadcast columns (zero stride)": (_m(3, 5, 5, 1), _m(5, 4, 1, 0), _m(3, 4, 4, 1)),
    "O zero stride": (_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 4, 0, 1)),
    "A rows reversed": (_m(3, 5, -5, 1, ptr=80), _m(5, 4, 4, 1), _m(3, 4, 4, 1)),
    "B columns reversed": (_m(3, 5, 5, 1), _m(5, 4, 1, -5, ptr=120), _m(3, 4, 4, 1)),
    "O negative ld": (_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 4, 1, -3, ptr=72)),
    "m above int32": (_m(BIG, 5, 5, 1), _m(5, 4, 4, 1), _m(BIG, 4, 4, 1)),
    "n above int32": (_m(3, 5, 5, 1), _m(5, BIG, BIG, 1), _m(3, BIG, 1, 3)),
    "k above int32": (_m(3, BIG, 1, 3), _m(BIG, 4, 4, 1), _m(3, 4, 4, 1)),
    "lda above int32": (_m(3, 5, BIG, 1), _m(5, 4, 4, 1), _m(3, 4, 4, 1)),
    "ldc above int32": (_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 4, 1, BIG)),
}


@pytest.mark.parametrize("case", REJECTED)
def test_rejected_layouts(case):
    assert plan_dgemm(*REJECTED[case]) is None


def test_largest_sizes_accepted():
    top = INT_MAX
    assert plan_dgemm(_m(1, 1, 1, 1), _m(1, top, top, 1), _m(1, top, top, 1)) is not None
    assert plan_dgemm(_m(3, 5, top, 1), _m(5, 4, 4, 1), _m(3, 4, 4, 1)).ldb == top


def test_shapes_must_chain():
    with pytest.raises(ValueError, match="do not chain"):
        plan_dgemm(_m(3, 5, 5, 1), _m(4, 4, 4, 1), _m(3, 4, 4, 1))
    with pytest.raises(ValueError, match="do not chain"):
        plan_dgemm(_m(3, 5, 5, 1), _m(5, 4, 4, 1), _m(3, 5, 5, 1))


def test_plan_refuses_illegal_leading_dimensions():
    good = dict(transa=False, transb=True, m=3, n=4, k=5, a_ptr=0, lda=3, b_ptr=0, ldb=4, c_ptr=0, ldc=3,
                transposed=False)
    DgemmPlan(**good)
    for change in ({"lda": 2}, {"ldb": 3}, {"ldc": 0}, {"transa": True}, {"m": BIG}, {"ldc": BIG}):
        with pytest.raises(ValueError):
            DgemmPlan(**{**good, **change})


# --------------------------------------------------------------------------- the tests can fail

MUTANTS = {
    "transa flipped": lambda p: dataclasses.replace(p, transa=not p.transa),
    "transb flipped": lambda p: dataclasses.replace(p, transb=not p.transb),
    "operands swapped": lambda p: dataclasses.replace(p, a_ptr=p.b_ptr, b_ptr=p.a_ptr, lda=p.ldb, ldb=p.lda,
                                                      transa=p.transb, transb=p.transa),
    "output not transposed": lambda p: dataclasses.replace(p, m=p.n, n=p.m, ldc=max(p.ldc, p.n), transposed=False),
    "lda + 1": lambda p: dataclasses.replace(p, lda=p.lda + 1),
    "ldc + 1": lambda p: dataclasses.replace(p, ldc=p.ldc + 1),
}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_wrong_plans_are_caught(rng, mutant):
    def planner(A, B, O):
        return MUTANTS[mutant](plan_dgemm(A, B, O))

    failures = sweep(planner, rng, shapes=[(4, 4, 4), (3, 4, 5)], odd_choices=(None,))
    assert failures, f"a plan with {mutant} went unnoticed"


def test_wrong_transa_is_caught_on_one_square_problem(rng):
    heap = Heap()
    A, B, O = heap.place(4, 4, 4, 1), heap.place(4, 4, 1, 4), heap.place(4, 4, 4, 1)
    mem = heap.memory(rng)
    plan = plan_dgemm(A, B, O)
    right, wrong = mem.copy(), mem.copy()
    run_dgemm(right, plan, 1.0, 0.0)
    run_dgemm(wrong, dataclasses.replace(plan, transa=not plan.transa), 1.0, 0.0)
    assert np.array_equal(right[index(O)], mem[index(A)] @ mem[index(B)])
    assert not np.array_equal(wrong[index(O)], right[index(O)])


def test_planner_that_uses_size1_strides_is_caught(rng, monkeypatch):
    """A column_major_ld that honours strides along size-1 dimensions fails the odd-stride
    part of the sweep (so the sweep does test them), and passes the rest."""
    def naive(rows, cols, rs, cs):
        if rows == 0 or cols == 0:
            return max(1, rows)
        return cs if rs == 1 and cs >= max(1, rows) else None

    monkeypatch.setattr(layouts, "column_major_ld", naive)
    shapes = [(1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)]
    assert sweep(plan_dgemm, rng, shapes=shapes, odd_choices=(0, 1, 2, 3))
    assert not sweep(plan_dgemm, rng, shapes=[(3, 4, 5)], odd_choices=(None,))


# --------------------------------------------------------------------------- plan_copy

def run_copy(mem: np.ndarray, plan: CopyPlan) -> None:
    """cuMemcpy2D on a flat buffer (pitches and width in bytes)."""
    assert plan.width <= min(plan.src_pitch, plan.dst_pitch) <= INT_MAX or plan.height <= 1
    assert plan.width % 8 == plan.src_pitch % 8 == plan.dst_pitch % 8 == 0
    w = plan.width // 8
    for h in range(plan.height):
        s = plan.src_ptr // 8 + h * plan.src_pitch // 8
        d = plan.dst_ptr // 8 + h * plan.dst_pitch // 8
        assert 0 <= min(s, d) and max(s, d) + w <= mem.size
        mem[d:d + w] = mem[s:s + w].copy()


COPY_SHAPES = [(3, 4), (4, 3), (1, 4), (3, 1), (1, 1), (0, 3), (3, 0)]


@pytest.mark.parametrize("shape", COPY_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_copy_every_layout(rng, shape):
    r, c = shape
    for src_kind, dst_kind, odd in itertools.product(KINDS, KINDS, (None, 0, 1, 2, 3)):
        heap = Heap()
        src = heap.place(r, c, *layout(src_kind, r, c, odd))
        dst = heap.place(r, c, *layout(dst_kind, r, c, None if odd is None else odd + 1))
        mem = heap.memory(rng)
        plan = plan_copy(src, dst, r, c)
        same_order = {src_kind, dst_kind} <= ROW_MAJOR or {src_kind, dst_kind} <= COL_MAJOR
        case = (r, c, src_kind, dst_kind, odd)
        if r > 1 and c > 1 and not same_order:
            assert plan is None, case
            continue
        assert plan is not None, case
        want = mem.copy()
        want[index(dst)] = mem[index(src)]
        run_copy(mem, plan)
        assert np.array_equal(mem, want), (case, plan)


def test_copy_plans():
    row = plan_copy(_m(3, 4, 6, 1, ptr=800), _m(3, 4, 4, 1, ptr=80), 3, 4)
    assert row == CopyPlan(src_ptr=800, src_pitch=48, dst_ptr=80, dst_pitch=32, width=32, height=3)
    col = plan_copy(_m(3, 4, 1, 3, ptr=800), _m(3, 4, 1, 5, ptr=80), 3, 4)
    assert col == CopyPlan(src_ptr=800, src_pitch=24, dst_ptr=80, dst_pitch=40, width=24, height=4)
    assert plan_copy(_m(0, 4, 7, 9), _m(0, 4, -1, 0), 0, 4).height == 0


@pytest.mark.parametrize("src,dst", [
    (_m(3, 4, 4, 1), _m(3, 4, 1, 3)),       # row-major into column-major
    (_m(3, 4, 8, 2), _m(3, 4, 8, 2)),       # no unit stride
    (_m(3, 4, 3, 1), _m(3, 4, 4, 1)),       # overlapping rows
    (_m(3, 4, 2**28, 1), _m(3, 4, 4, 1)),   # pitch of 2**31 bytes
    (_m(3, 4, -4, 1, ptr=64), _m(3, 4, 4, 1)),
])
def test_copy_refused(src, dst):
    assert plan_copy(src, dst, 3, 4) is None


# --------------------------------------------------------------------------- no GPU needed for these

def test_copies_refuse_and_empty_ones_run_without_touching_the_driver(monkeypatch):
    def no_driver():
        raise AssertionError("the driver was called")

    monkeypatch.setattr(cublas.driver, "bindings", no_driver)
    assert plan_copy(_m(3, 4, 4, 1), _m(3, 4, 1, 3), 3, 4) is None
    cublas.run_copy(plan_copy(_m(0, 4, 4, 1), _m(0, 4, 1, 3), 0, 4), 0)


def test_empty_output_launches_nothing(monkeypatch):
    def no_library():
        raise AssertionError("cuBLAS was called")

    monkeypatch.setattr(cublas, "library", no_library)
    for m, n in ((0, 4), (3, 0)):
        plan = plan_dgemm(_m(m, 5, 5, 1), _m(5, n, max(n, 1), 1), _m(m, n, max(n, 1), 1))
        cublas.dgemm(plan, 1.0, 0.0, 0)


def test_status_names():
    err = cublas.CublasError("cublasDgemm_v2", 7)
    assert err.status == 7 and "CUBLAS_STATUS_INVALID_VALUE" in str(err) and "cublasDgemm_v2" in str(err)
    assert "unknown cublasStatus_t 99" in str(cublas.CublasError("x", 99))
    assert "CUBLAS_STATUS_NOT_INITIALIZED" in str(cublas.CublasError("cublasCreate_v2", 1))


def test_missing_cublas_is_reported_and_searched_once(monkeypatch):
    calls = []

    class NotFound:
        """nvmath's binding of a library cuda.pathfinder cannot find: its first call raises."""

        def get_property(self, which):
            calls.append(which)
            raise RuntimeError("Failure finding libcublas.so")

        get_version = get_property

    monkeypatch.setattr(cublas, "_bindings", lambda: (NotFound(), NotFound()))
    monkeypatch.setattr(cublas, "_LIB", None)
    monkeypatch.setattr(cublas, "_LOAD_ERROR", None)
    for _ in range(2):
        with pytest.raises(cublas.NativeUnavailable) as info:
            cublas.dgemm(plan_dgemm(_m(1, 1, 1, 1), _m(1, 1, 1, 1), _m(1, 1, 1, 1)), 1.0, 0.0, 0)
        text = str(info.value)
        assert "libcublas" in text and "Failure finding libcublas.so" in text
        assert "CUDA toolkit" in text and "nvidia-cublas" in text
    assert not cublas.available()
    assert len(calls) == 1


def test_missing_nvmath_is_reported(monkeypatch):
    def no_nvmath():
        raise ImportError("No module named 'nvmath'")

    monkeypatch.setattr(cublas, "_bindings", no_nvmath)
    monkeypatch.setattr(cublas, "_LIB", None)
    monkeypatch.setattr(cublas, "_LOAD_ERROR", None)
    with pytest.raises(cublas.NativeUnavailable, match="nvmath-python"):
        cublas.library()


def test_a_plan_made_once_for_a_layout_runs_with_any_pointers(rng):
    """The native fast lane plans once per shapes and strides (pointers 0) and passes each
    call's pointers through call_pointers: that must compute A @ B in every layout."""
    from ozaki_cutlass.device.layouts import call_pointers

    def plan_once_then_point(A, B, O):
        layout = plan_dgemm(*(Matrix(0, X.rows, X.cols, X.rs, X.cs, X.kind, X.device, X.owner) for X in (A, B, O)))
        if layout is None:
            return None
        a, b, c = call_pointers(layout, (A.ptr, B.ptr, O.ptr))
        return dataclasses.replace(layout, a_ptr=a, b_ptr=b, c_ptr=c)

    assert not sweep(plan_once_then_point, rng, shapes=SHAPES[:6], odd_choices=(None, 1))
    # and a mistake in the swap is caught
    plan = plan_dgemm(_m(3, 5, 5, 1, 0), _m(5, 4, 4, 1, 8 * 15), _m(3, 4, 4, 1, 8 * 35))
    assert plan.transposed and call_pointers(plan, (1, 2, 3)) == (2, 1, 3) and call_pointers(plan) == (
        plan.a_ptr, plan.b_ptr, plan.c_ptr)


# --------------------------------------------------------------------------- complex_ops (ZGEMM)

def run_zgemm(mem: np.ndarray, plan: DgemmPlan, ops, alpha: complex, beta: complex) -> None:
    """cublasZgemm_v2 on a flat complex buffer (pointers: 16 bytes per element), ops N/T/C."""
    if plan.m == 0 or plan.n == 0:
        return
    def operand(ptr, op, rows, cols, ld):
        stored = (cols, rows) if op != "N" else (rows, cols)
        x = mem[ptr // 16 + np.add.outer(np.arange(stored[0]), np.arange(stored[1]) * ld)]
        return {"N": x, "T": x.T, "C": x.conj().T}[op]
    a = operand(plan.a_ptr, ops[0], plan.m, plan.k, plan.lda)
    b = operand(plan.b_ptr, ops[1], plan.k, plan.n, plan.ldb)
    ic = plan.c_ptr // 16 + np.add.outer(np.arange(plan.m), np.arange(plan.n) * plan.ldc)
    mem[ic] = alpha * (a @ b) + (beta * mem[ic] if beta != 0 else 0)


@pytest.mark.parametrize("shape", [(3, 4, 5), (1, 4, 5), (3, 4, 1), (4, 4, 4)], ids=lambda s: "x".join(map(str, s)))
def test_complex_ops_compute_the_conjugated_product_or_refuse(rng, shape):
    """Every layout of op(A), op(B) and O and every conjugation: a plan and ops that compute
    conj?(A) conj?(B), or None exactly where a conjugated operand would be read untransposed."""
    from ozaki_cutlass.device.layouts import complex_ops

    m, n, k = shape
    ran = refused = 0
    for kinds in itertools.product(KINDS, repeat=3):
        for conj_a, conj_b in itertools.product((False, True), repeat=2):
            heap = Heap()
            A, B, O = (heap.place(r, c, *layout(kind, r, c, None))
                       for kind, (r, c) in zip(kinds, ((m, k), (k, n), (m, n))))
            A, B, O = (Matrix(2 * x.ptr, x.rows, x.cols, x.rs, x.cs, "cai", None, None, None, 16) for x in (A, B, O))
            mem = heap.memory(rng) + 1j * heap.memory(rng)
            a, b = mem[A.ptr // 16 + index_of(A)], mem[B.ptr // 16 + index_of(B)]
            a, b = (a.conj() if conj_a else a), (b.conj() if conj_b else b)
            plan = plan_dgemm(A, B, O)
            ops = complex_ops(plan, conj_a, conj_b)
            trans_of = {True: plan.transb, False: plan.transa} if plan.transposed else \
                {True: plan.transa, False: plan.transb}
            if ops is None:
                assert (conj_a and not trans_of[True]) or (conj_b and not trans_of[False])
                refused += 1
                continue
            want = mem.copy()
            io = O.ptr // 16 + index_of(O)
            want[io] = (0.5 - 2j) * (a @ b) + 1j * mem[io]
            run_zgemm(mem, plan, ops, 0.5 - 2j, 1j)
            assert np.allclose(mem, want, rtol=1e-13, atol=1e-13), (kinds, conj_a, conj_b, plan, ops)
            ran += 1
    assert ran and refused


def index_of(x) -> np.ndarray:
    return np.add.outer(np.arange(x.rows) * x.rs, np.arange(x.cols) * x.cs)
