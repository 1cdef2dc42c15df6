"""Device-matrix layouts as cuBLAS calls: which column-major DGEMM or 2-D copy a set of
strided views maps onto. Pure functions of shapes, strides and pointers (no library is
loaded), so every layout rule is testable on the CPU; ``ozaki_cutlass.device.cublas`` runs
the plans.

A device matrix is a :class:`~ozaki_cutlass.device.arrays.Matrix` (element (i, j) at
``ptr + 8 (i rs + j cs)``). :func:`plan_dgemm` maps any mix of row-major, column-major,
transposed and leading-dimension views onto ONE column-major DGEMM, or answers None (the
caller then emulates). :func:`plan_copy` does the same for a ``cuMemcpy2DAsync``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INT_MAX", "DgemmPlan", "CopyPlan", "column_major_ld", "plan_dgemm", "call_pointers", "plan_copy",
           "complex_ops"]

INT_MAX = 2**31 - 1  # cuBLAS's int arguments (m, n, k, ld); also the 2-D copy's largest pitch


def column_major_ld(rows: int, cols: int, rs: int, cs: int) -> int | None:
    """The leading dimension under which a rows x cols matrix with element strides (rs, cs)
    reads as column-major (element (i, j) at i + j ld), or None. A stride along a dimension
    of size 1 is never used, so any value is fine there; an empty matrix fits any ld. The
    answer is always >= max(1, rows), as cuBLAS requires."""
    need = max(1, rows)
    if rows == 0 or cols == 0:
        return need
    if rows > 1 and rs != 1:
        return None
    ld = cs if cols > 1 else need
    return ld if ld >= need else None


def _as_op(rows: int, cols: int, rs: int, cs: int) -> tuple[bool, int] | None:
    """(trans, ld) such that the matrix is op(M) for a column-major M of leading dimension ld
    (trans: M is cols x rows, the matrix its transpose), or None."""
    ld = column_major_ld(rows, cols, rs, cs)
    if ld is not None:
        return False, ld
    ld = column_major_ld(cols, rows, cs, rs)
    if ld is not None:
        return True, ld
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class DgemmPlan:
    """One column-major ``cublasDgemm_v2`` call: C = alpha op(A) op(B) + beta C with C m x n
    at ``c_ptr`` (leading dimension ldc), op(A) m x k, op(B) k x n. ``transposed`` says the
    call computes the caller's O^T = op(B)^T op(A)^T (O row-major), so ``a_ptr`` is the
    caller's B and ``b_ptr`` the caller's A. Pointers in bytes, leading dimensions in elements."""

    transa: bool
    transb: bool
    m: int
    n: int
    k: int
    a_ptr: int
    lda: int
    b_ptr: int
    ldb: int
    c_ptr: int
    ldc: int
    transposed: bool

    def __post_init__(self):
        if min(self.m, self.n, self.k) < 0 or max(self.m, self.n, self.k) > INT_MAX:
            raise ValueError(f"DGEMM sizes m={self.m} n={self.n} k={self.k} outside 0..{INT_MAX}")
        rows_a = self.k if self.transa else self.m
        rows_b = self.n if self.transb else self.k
        for name, ld, rows in (("lda", self.lda, rows_a), ("ldb", self.ldb, rows_b), ("ldc", self.ldc, self.m)):
            if not max(1, rows) <= ld <= INT_MAX:
                raise ValueError(f"{name}={ld} outside max(1, {rows})..{INT_MAX}")


def plan_dgemm(A, B, O) -> DgemmPlan | None:
    """The cuBLAS call computing O = alpha A B + beta O for A m x k, B k x n, O m x n (A and B
    already op(A) and op(B): any transpose is in their strides), or None when cuBLAS cannot
    take the layout: an operand with no unit stride (along a dimension longer than 1), a
    leading dimension too small (overlapping) or zero/negative, or a size or leading
    dimension above 2**31 - 1. Pure: reads only rows, cols, rs, cs and ptr."""
    m, k, n = A.rows, A.cols, B.cols
    if B.rows != k or O.rows != m or O.cols != n:
        raise ValueError(f"shapes do not chain: A {A.rows}x{A.cols}, B {B.rows}x{B.cols}, O {O.rows}x{O.cols}")
    if max(m, n, k) > INT_MAX:
        return None
    ldc = column_major_ld(n, m, O.cs, O.rs)     # O^T column-major: O row-major
    if ldc is not None:
        transposed, cm, cn = True, n, m
        first, second = (B.ptr, n, k, B.cs, B.rs), (A.ptr, k, m, A.cs, A.rs)   # op(B)^T, op(A)^T
    else:
        ldc = column_major_ld(m, n, O.rs, O.cs)  # O column-major
        if ldc is None:
            return None
        transposed, cm, cn = False, m, n
        first, second = (A.ptr, m, k, A.rs, A.cs), (B.ptr, k, n, B.rs, B.cs)
    op_a, op_b = _as_op(*first[1:]), _as_op(*second[1:])
    if op_a is None or op_b is None or max(op_a[1], op_b[1], ldc) > INT_MAX:
        return None
    return DgemmPlan(transa=op_a[0], transb=op_b[0], m=cm, n=cn, k=k,
                     a_ptr=int(first[0]), lda=op_a[1], b_ptr=int(second[0]), ldb=op_b[1],
                     c_ptr=int(O.ptr), ldc=ldc, transposed=transposed)


def complex_ops(plan: DgemmPlan, conj_a: bool, conj_b: bool) -> tuple[str, str] | None:
    """The cuBLAS operations ("N", "T", "C") of ``plan`` run as a complex GEMM (ZGEMM) on
    complex views A and B whose true operands are conj(A) where ``conj_a`` (and conj(B)
    where ``conj_b``), or None where cuBLAS has no operation for that: conjugation without
    a transpose (a conjugated operand stored in the layout the call reads untransposed).
    The plan's layouts and leading dimensions hold for complex elements as for real ones."""
    conj = (conj_b, conj_a) if plan.transposed else (conj_a, conj_b)   # the plan's a, b
    ops = []
    for trans, conjugated in zip((plan.transa, plan.transb), conj):
        if conjugated and not trans:
            return None
        ops.append("C" if conjugated else "T" if trans else "N")
    return ops[0], ops[1]


def call_pointers(plan: DgemmPlan, pointers: tuple[int, int, int] | None = None) -> tuple[int, int, int]:
    """The (a, b, c) pointers of ``plan``'s cuBLAS call: its own, or those of the caller's
    (A, B, O) ``pointers`` placed as the plan's layout needs (swapped when transposed)."""
    if pointers is None:
        return plan.a_ptr, plan.b_ptr, plan.c_ptr
    a, b, c = pointers
    return (b, a, c) if plan.transposed else (a, b, c)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyPlan:
    """One ``cuMemcpy2DAsync``: ``height`` runs of ``width`` bytes, ``src_pitch`` and
    ``dst_pitch`` bytes apart."""

    src_ptr: int
    src_pitch: int
    dst_ptr: int
    dst_pitch: int
    width: int
    height: int


def plan_copy(src, dst, rows: int, cols: int) -> CopyPlan | None:
    """The 2-D copy of a rows x cols float64 matrix ``src`` into ``dst`` (same shape), or
    None when the two do not share a unit-stride dimension (or a pitch exceeds 2**31 - 1):
    rows of ``cols`` elements when both are row-major, columns of ``rows`` elements when
    both are column-major. Pure; an empty matrix gives a plan of height 0."""
    for along_rows in (True, False):
        if along_rows:   # each row contiguous: the transpose is column-major
            s = column_major_ld(cols, rows, src.cs, src.rs)
            d = column_major_ld(cols, rows, dst.cs, dst.rs)
            width, height = cols, rows
        else:
            s = column_major_ld(rows, cols, src.rs, src.cs)
            d = column_major_ld(rows, cols, dst.rs, dst.cs)
            width, height = rows, cols
        if s is not None and d is not None and 8 * max(s, d) <= INT_MAX:
            if width == 0 or height == 0:
                width = height = 0
            return CopyPlan(src_ptr=int(src.ptr), src_pitch=8 * s, dst_ptr=int(dst.ptr), dst_pitch=8 * d,
                            width=8 * width, height=height)
    return None
