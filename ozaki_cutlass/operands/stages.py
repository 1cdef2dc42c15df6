"""One operand's own stages, shared by every emulated call and by ``prepare``: pack (where
its k stride is not 1), scan (exponents, fast shifts, NaN/Inf counts) and, in accurate
mode, the coarse magnitudes.

An operand is seen as ``nvec`` vectors of length k: the rows of op(A) (vector stride
``vs`` = its row stride, element stride ``es`` = its column stride) or the columns of
op(B) (vs = column stride, es = row stride). The later stages read a *vector set*
``(ptr, nvec, k, vs, es)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..device.arrays import Matrix
from ..numerics.moduli import padded_k

__all__ = ["OperandBuffers", "VectorSet", "needs_pack", "round_up", "run_operand_stages", "vectors_of"]

#: (ptr, nvec, k, vs, es): what the scan, coarse and residue kernels read.
VectorSet = tuple[int, int, int, int, int]


def round_up(x: int, a: int) -> int:
    return -(-x // a) * a


def needs_pack(nvec: int, k: int, es: int) -> bool:
    """Whether the vectors are copied contiguous first (their k stride is not 1)."""
    return es != 1 and k > 1 and nvec > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class OperandBuffers:
    """One operand seen as vectors along k, and the device buffers its stages write
    (int32 per vector unless said; 0 where a buffer is not needed)."""

    X: Matrix
    nvec: int
    vs: int
    es: int
    rows_pad: int       # the padded vector count of the residue and coarse planes
    packed: int         # float64 nvec x k, when needs_pack
    exps: int
    fast: int           # the fast shifts
    nonfinite: int      # NaN/Inf count per vector
    coarse: int         # accurate mode: int8 coarse magnitudes, rows_pad x padded_k(k)


def vectors_of(st, ob: OperandBuffers, k: int, stream: int) -> VectorSet:
    """The vector set the stages read: the operand itself when its k stride is 1, else its
    contiguous copy (``pack``, a tiled transpose), so that scan, coarse and residues take
    their fast path (lanes along k). The copy is exact."""
    if not ob.packed:
        return ob.X.ptr, ob.nvec, k, ob.vs, ob.es
    st.pack(ob.X.ptr, ob.nvec, k, ob.vs, ob.es, ob.packed, stream)
    return ob.packed, ob.nvec, k, k, 1


def run_operand_stages(st, ob: OperandBuffers, k: int, pb: int, accurate: bool, stream: int) -> VectorSet:
    """Pack where k is strided, scan (exponents, fast shifts, non-finite counts) and in
    accurate mode the coarse magnitudes (from the same kernel), on ``stream`` with the stage library ``st``.
    Returns the vector set the later stages read. k >= 1."""
    v = vectors_of(st, ob, k, stream)
    if accurate:  # the coarse magnitudes from the scan's second read
        st.scan_coarse(*v, pb, ob.exps, ob.fast, ob.nonfinite, ob.coarse, ob.rows_pad, padded_k(k), stream)
    else:
        st.scan(*v, pb, ob.exps, ob.fast, ob.nonfinite, stream)
    return v
