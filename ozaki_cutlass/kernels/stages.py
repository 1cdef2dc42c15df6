"""The stage kernels library (templates/stages.cu.j2): ctypes bindings and its loader.

Each method launches one stage on a stream and raises on a non-zero status, with the
library's message. ABI and semantics: the comment block of
``templates/include/ozaki/stages.cuh``; each stage mirrors a function of
``ozaki_cutlass.reference``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from ..generator import Arch, StagesVariant
from ..generator.artifact import Artifact
from ..numerics.moduli import MAX_MODULI, CRTConstants
from .library import KernelError, load_library, open_library, raise_for_status

__all__ = ["Stages", "CCrtConstants", "CNonfiniteSource", "load_stages"]

_i64, _int, _ptr, _dbl = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_double
MAX_LIMBS = 4
# stages.cuh's kAbiVersion: 2 since the CRT functions take a NonfiniteSource
STAGES_ABI_VERSION = 2


class CCrtConstants(ctypes.Structure):
    """Mirror of ``ozaki::CrtConstants`` (824 bytes; checked against the library)."""

    _fields_ = [
        ("count", ctypes.c_int32),
        ("limbs", ctypes.c_int32),
        ("moduli", ctypes.c_int32 * MAX_MODULI),
        ("weight_limbs", (ctypes.c_double * MAX_LIMBS) * MAX_MODULI),
        ("product_limbs", ctypes.c_double * MAX_LIMBS),
        ("limb_scales", ctypes.c_double * MAX_LIMBS),
        ("quotient_factors", ctypes.c_double * MAX_LIMBS),
    ]

    @classmethod
    def from_constants(cls, consts: CRTConstants) -> "CCrtConstants":
        s = cls()
        s.count, s.limbs = consts.count, consts.limbs
        for g, m in enumerate(consts.moduli):
            s.moduli[g] = m
            for j, d in enumerate(consts.weight_limbs[g]):
                s.weight_limbs[g][j] = d
        for j in range(consts.limbs):
            s.product_limbs[j] = consts.product_limbs[j]
            s.limb_scales[j] = consts.limb_scales[j]
            s.quotient_factors[j] = consts.quotient_factors[j]
        return s


class CNonfiniteSource(ctypes.Structure):
    """Mirror of ``ozaki::NonfiniteSource``: where the CRT kernels find the NaN/Inf pattern,
    ``CNonfiniteSource(a, a_rs, a_cs, b, b_rs, b_cs, k, row_flags, col_flags)`` with
    op(A)(i, l) = a[i*a_rs + l*a_cs], op(B)(l, j) = b[l*b_rs + j*b_cs], and the non-finite
    counts of op(A)'s rows and op(B)'s columns (``scan``'s)."""

    _fields_ = [("a", _ptr), ("a_rs", _i64), ("a_cs", _i64), ("b", _ptr), ("b_rs", _i64),
                ("b_cs", _i64), ("k", _i64), ("row_flags", _ptr), ("col_flags", _ptr)]


_NF = ctypes.POINTER(CNonfiniteSource)

_SIGNATURES = {
    "scan": [_ptr, _i64, _i64, _i64, _i64, _int, _ptr, _ptr, _ptr, _ptr],
    "coarse": [_ptr, _i64, _i64, _i64, _i64, _ptr, _ptr, _i64, _i64, _ptr],
    "accumulate_i64": [_ptr, _i64, _i64, _i64, _ptr, _int, _ptr],
    "accurate_shifts": [_ptr, _i64, _i64, _ptr, _ptr, _ptr, _ptr, _int, _ptr, _ptr, _ptr, _ptr],
    "accurate_shifts_i32": [_ptr, _i64, _i64, _i64, _ptr, _ptr, _ptr, _ptr, _int, _ptr, _ptr, _ptr, _ptr],
    "pack": [_ptr, _i64, _i64, _i64, _i64, _ptr, _ptr],
    "residues": [_ptr, _i64, _i64, _i64, _i64, _ptr, _int, _ptr, _ptr, _i64, _i64, _ptr],
    "residues_strided": [_ptr, _i64, _i64, _i64, _i64, _ptr, _int, _ptr, _ptr, _i64, _i64, _i64, _i64,
                         _ptr],
    "crt_unscale": [_ptr, _int, _i64, _i64, _i64, _i64, _int, _i64, ctypes.POINTER(CCrtConstants),
                    _ptr, _ptr, _dbl, _dbl, _ptr, _i64, _i64, _ptr, _i64, _i64, _NF, _ptr],
    "combine_unscale": [_ptr, _int, _ptr, _i64, _i64, _i64, _i64, ctypes.POINTER(CCrtConstants),
                        _ptr, _ptr, _dbl, _dbl, _ptr, _i64, _i64, _ptr, _i64, _i64, _NF, _ptr],
}


class Stages:
    """The loaded stage kernels of one arch. Pointers and streams are int handles."""

    def __init__(self, artifact: Artifact):
        library, symbol, name = Path(artifact.library_path), artifact.symbol, artifact.variant.name
        self._lib = open_library(library, symbol, name, STAGES_ABI_VERSION)
        self.name = name
        size = getattr(self._lib, f"{symbol}_crt_constants_size")
        size.restype, size.argtypes = ctypes.c_size_t, []
        if size() != ctypes.sizeof(CCrtConstants):
            raise KernelError(f"{library}: CrtConstants is {size()} bytes, the ctypes mirror "
                              f"{ctypes.sizeof(CCrtConstants)}")
        self._err = getattr(self._lib, f"{symbol}_last_error")
        self._fn = {}
        for stage, argtypes in _SIGNATURES.items():
            fn = getattr(self._lib, f"{symbol}_{stage}")
            fn.restype, fn.argtypes = _int, argtypes
            self._fn[stage] = fn
        self._constants: dict[int, CCrtConstants] = {}

    def _call(self, stage: str, *args) -> None:
        raise_for_status(self._fn[stage](*args), self._err, f"{self.name}.{stage}")

    def constants(self, consts: CRTConstants) -> CCrtConstants:
        if consts.count not in self._constants:
            self._constants[consts.count] = CCrtConstants.from_constants(consts)
        return self._constants[consts.count]

    def scan(self, x, nvec, k, vs, es, pb, exps, shifts, nonfinite, stream):
        self._call("scan", x, nvec, k, vs, es, pb, exps, shifts, nonfinite, stream or None)

    def coarse(self, x, nvec, k, vs, es, exps, out, rows_pad, k_pad, stream):
        self._call("coarse", x, nvec, k, vs, es, exps, out, rows_pad, k_pad, stream or None)

    def accumulate_i64(self, part, rows, cols, ld_part, acc, first, stream):
        self._call("accumulate_i64", part, rows, cols, ld_part, acc, int(first), stream or None)

    def accurate_shifts(self, g, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, work, stream):
        self._call("accurate_shifts", g, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, work,
                   stream or None)

    def accurate_shifts_i32(self, g, ldg, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, work,
                            stream):
        """accurate_shifts from an int32 bound matrix with leading dimension ldg (one k chunk)."""
        self._call("accurate_shifts_i32", g, ldg, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu,
                   work, stream or None)

    def pack(self, x, nvec, k, vs, es, out, stream):
        """out[v*k + l] = x[v*vs + l*es] (float64): contiguous vectors for the other stages."""
        self._call("pack", x, nvec, k, vs, es, out, stream or None)

    def residues(self, x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad, stream):
        self._call("residues", x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad,
                   stream or None)

    def residues_strided(self, x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad,
                         row_stride, plane_stride, stream):
        """Residue (g, v, l) at out[g*plane_stride + v*row_stride + l]: plane_stride =
        rows_pad*k_pad, row_stride = k_pad is ``residues``' layout; plane_stride = k_pad,
        row_stride = nmod*k_pad concatenates a row's moduli along k (fused GEMM)."""
        self._call("residues_strided", x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad,
                   row_stride, plane_stride, stream or None)

    def crt_unscale(self, c, nmod, m, n, ldc, batch_stride, nchunks, chunk_stride, consts: CRTConstants,
                    mu, nu, alpha, beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, nonfinite, stream):
        """``nonfinite``: a CNonfiniteSource, or None when both
        operands are finite."""
        self._call("crt_unscale", c, nmod, m, n, ldc, batch_stride, nchunks, chunk_stride,
                   ctypes.byref(self.constants(consts)), mu, nu, float(alpha), float(beta),
                   cin or None, cin_rs, cin_cs, out, out_rs, out_cs, _nf(nonfinite), stream or None)

    def combine_unscale(self, x, group_sizes, m, n, ldx, group_stride, consts: CRTConstants, mu, nu,
                        alpha, beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, nonfinite, stream):
        """Finish the CRT from group partials X mod M_gr (group gr: the next
        group_sizes[gr] moduli of ``consts``, in order), then the same
        pattern/unscale/alpha/beta as ``crt_unscale``. Group gr's plane starts at byte
        sum_{h < gr} partial_bytes(size_h) * group_stride of x and holds element i*ldx + j
        as uint32, or as one byte for a group of one modulus. group_sizes: host ints."""
        sizes = (ctypes.c_int32 * len(group_sizes))(*[int(v) for v in group_sizes])
        self._call("combine_unscale", x, len(group_sizes), sizes, m, n, ldx, group_stride,
                   ctypes.byref(self.constants(consts)), mu, nu, float(alpha), float(beta),
                   cin or None, cin_rs, cin_cs, out, out_rs, out_cs, _nf(nonfinite), stream or None)


def _nf(source):
    """A CNonfiniteSource by reference; None or 0: none (both operands finite)."""
    return ctypes.byref(source) if source else None


def load_stages(arch: Arch, out_dir=None, *, progress: bool = True) -> Stages:
    """The stage kernels of ``arch``, building them first (with progress) when missing."""
    return load_library(Stages, StagesVariant(arch=Arch(arch)), out_dir, progress=progress)
