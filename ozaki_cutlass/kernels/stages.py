"""The stage kernels library (templates/stages.cu.j2): its binding and its loader.

Each method launches one stage on a stream and raises on a non-zero status, with the
library's message. C ABI and semantics: ``ozaki_cutlass.generator.abi.STAGES``; each
stage mirrors a function of ``ozaki_cutlass.reference``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from ..generator import Arch, StagesVariant, abi, build, resolve_toolchain
from ..generator.artifact import Artifact
from ..numerics.moduli import CRTConstants
from .library import GeneratedLibrary, KernelError, load_library

__all__ = ["Stages", "CCrtConstants", "CNonfiniteSource", "crt_constants_struct", "load_stages", "stages_from_tree",
           "stage_libraries"]

#: ``ozaki::CrtConstants`` as ctypes (its C++ definition is rendered from the same spec).
CCrtConstants = abi.CRT_CONSTANTS.ctypes_type
#: ``ozaki::NonfiniteSource`` as ctypes: where the CRT kernels find the NaN/Inf pattern,
#: ``CNonfiniteSource(a, a_rs, a_cs, b, b_rs, b_cs, k, row_flags, col_flags)`` with
#: op(A)(i, l) = a[i*a_rs + l*a_cs], op(B)(l, j) = b[l*b_rs + j*b_cs], and the non-finite
#: counts of op(A)'s rows and op(B)'s columns (``scan``'s).
CNonfiniteSource = abi.NONFINITE_SOURCE.ctypes_type


def crt_constants_struct(consts: CRTConstants) -> CCrtConstants:
    """``consts`` as the CrtConstants struct the CRT kernels take (unused entries 0)."""
    s = CCrtConstants()
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


class Stages(GeneratedLibrary):
    """The loaded stage kernels of one arch. Pointers and streams are int handles."""

    ABI = abi.STAGES

    def __init__(self, artifact: Artifact):
        super().__init__(artifact)
        size = self._fn["crt_constants_size"]()
        if size != ctypes.sizeof(CCrtConstants):
            raise KernelError(f"{artifact.library_path}: CrtConstants is {size} bytes, the ctypes twin "
                              f"{ctypes.sizeof(CCrtConstants)}")
        self._constants: dict[int, CCrtConstants] = {}

    def _stage(self, stage: str, *args) -> None:
        self._call(stage, *args, name_entry=True)

    def constants(self, consts: CRTConstants) -> CCrtConstants:
        if consts.count not in self._constants:
            self._constants[consts.count] = crt_constants_struct(consts)
        return self._constants[consts.count]

    def scan(self, x, nvec, k, vs, es, pb, exps, shifts, nonfinite, stream, *, inner=0, logq=0, abs_sum=0,
             given=0):
        """``inner``: the contract's inner shifts (0: none); ``shifts``, ``logq``, ``abs_sum``:
        0 where not wanted; ``given``: the contract's equilibration flag (0: none; where it
        reads 0 on the device, exps and nonfinite hold :meth:`inner_stats`' vector outputs)."""
        self._stage("scan", x, nvec, k, vs, es, inner or None, pb, exps, shifts or None, nonfinite,
                    logq or None, abs_sum or None, given or None, stream or None)

    def scan_coarse(self, x, nvec, k, vs, es, pb, exps, shifts, nonfinite, out, rows_pad, k_pad, stream, *,
                    inner=0):
        """:meth:`scan` then :meth:`coarse` of its exps, x read twice instead of three
        times where its vectors are contiguous (the same outputs)."""
        self._stage("scan_coarse", x, nvec, k, vs, es, inner or None, pb, exps, shifts or None, nonfinite,
                    out, rows_pad, k_pad, stream or None)

    def coarse(self, x, nvec, k, vs, es, exps, out, rows_pad, k_pad, stream, *, inner=0):
        self._stage("coarse", x, nvec, k, vs, es, inner or None, exps, out, rows_pad, k_pad, stream or None)

    def inner_stats(self, x, nvec, k, vs, es, partial, partial_exp, exps, sums, stream, *, vec_exps=0,
                    vec_nonfinite=0):
        """numerics.contract.inner_stats; partial, partial_exp: inner_runs(nvec) * k entries;
        ``vec_exps``, ``vec_nonfinite`` (0: not written): the scan's first pass of each
        vector, from the same read."""
        self._stage("inner_stats", x, nvec, k, vs, es, partial, partial_exp, exps, sums, vec_exps or None,
                    vec_nonfinite or None, stream or None)

    def equilibrate(self, exps_a, exps_b, k, shift_a, shift_b, applied, stream):
        self._stage("equilibrate", exps_a, exps_b, k, shift_a, shift_b, applied, stream or None)

    def certificate(self, a, b, inner_a, inner_b, k, applied, out, stream):
        """``a``, ``b``: (exps, logq, abs_sum, nvec) of op(A)'s rows and op(B)'s columns;
        ``inner_a``, ``inner_b``: (exps, sums) of P_inner_stats; out: 14 doubles
        (numerics.contract.Certificate.from_values)."""
        self._stage("certificate", *a, *b, *inner_a, *inner_b, k, applied, out, stream or None)

    def fast_shifts(self, exps, logq, nvec, k, pb, shifts, stream):
        self._stage("fast_shifts", exps, logq, nvec, k, pb, shifts, stream or None)

    def accumulate_i64(self, part, rows, cols, ld_part, acc, first, stream):
        self._stage("accumulate_i64", part, rows, cols, ld_part, acc, int(first), stream or None)

    def accurate_shifts(self, g, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, work, stream):
        self._stage("accurate_shifts", g, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, work,
                    stream or None)

    def accurate_shifts_i32(self, g, ldg, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu, work,
                            stream):
        """accurate_shifts from an int32 bound matrix with leading dimension ldg (one k chunk)."""
        self._stage("accurate_shifts_i32", g, ldg, m, n, exps_a, exps_b, mu_fast, nu_fast, pb, mu, nu,
                    work, stream or None)

    def pack(self, x, nvec, k, vs, es, out, stream):
        """out[v*k + l] = x[v*vs + l*es] (float64): contiguous vectors for the other stages."""
        self._stage("pack", x, nvec, k, vs, es, out, stream or None)

    def residues(self, x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad, stream, *, inner=0):
        self._stage("residues", x, nvec, k, vs, es, inner or None, shifts, nmod, moduli, out, rows_pad, k_pad,
                    stream or None)

    def residues_strided(self, x, nvec, k, vs, es, shifts, nmod, moduli, out, rows_pad, k_pad,
                         row_stride, plane_stride, stream, *, inner=0):
        """Residue (g, v, l) at out[g*plane_stride + v*row_stride + l]: plane_stride =
        rows_pad*k_pad, row_stride = k_pad is ``residues``' layout; plane_stride = k_pad,
        row_stride = nmod*k_pad concatenates a row's moduli along k (fused GEMM)."""
        self._stage("residues_strided", x, nvec, k, vs, es, inner or None, shifts, nmod, moduli, out, rows_pad,
                    k_pad, row_stride, plane_stride, stream or None)

    def residues_karatsuba(self, x, nvec, k, vs, es, shifts, shift_step, nmod, moduli, out, rows_pad, k_pad,
                           im_first: bool, plane, part, stream):
        """Re, Im and Re + Im (mod m_g) residue planes of a complex operand, from its
        realified vectors (Ahat's rows; Bhat's odd columns, Im first); see the ABI."""
        self._stage("residues_karatsuba", x, nvec, k, vs, es, shifts, shift_step, nmod, moduli, out, rows_pad,
                    k_pad, int(im_first), plane, part, stream or None)

    def crt_unscale(self, c, nmod, m, n, ldc, batch_stride, nchunks, chunk_stride, consts: CRTConstants,
                    mu, nu, alpha, beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, nonfinite, stream):
        """``nonfinite``: a CNonfiniteSource, or None when both
        operands are finite."""
        self._stage("crt_unscale", c, nmod, m, n, ldc, batch_stride, nchunks, chunk_stride,
                    ctypes.byref(self.constants(consts)), mu, nu, float(alpha), float(beta),
                    cin or None, cin_rs, cin_cs, out, out_rs, out_cs, _nf(nonfinite), stream or None)

    def combine_unscale(self, x, group_sizes, m, n, ldx, group_stride, consts: CRTConstants, mu, nu,
                        alpha, beta, cin, cin_rs, cin_cs, out, out_rs, out_cs, nonfinite, stream):
        """Finish the CRT from group partials X mod M_gr (group gr: the next
        group_sizes[gr] moduli of ``consts``, in order), then the same
        pattern/unscale/alpha/beta as ``crt_unscale``. Group gr's plane starts at byte
        sum_{h < gr} partial_bytes(size_h) * group_stride of x and holds element i*ldx + j
        as uint32, or as one byte for a group of one modulus. group_sizes: host ints."""
        sizes = self._array("combine_unscale", "group_sizes", group_sizes)
        self._stage("combine_unscale", x, len(group_sizes), sizes, m, n, ldx, group_stride,
                    ctypes.byref(self.constants(consts)), mu, nu, float(alpha), float(beta),
                    cin or None, cin_rs, cin_cs, out, out_rs, out_cs, _nf(nonfinite), stream or None)

    def realify(self, x, rows, cols, rs, cs, conj: bool, right: bool, out, stream):
        """numerics.zgemm.realify_left / realify_right of the complex matrix at ``x``
        (strides in complex elements) into the row-major float64 ``out``."""
        self._stage("realify", x, rows, cols, rs, cs, int(conj), int(right), out, stream or None)

    def crt_unscale_karatsuba(self, c, nmod, m, n, ldc, plane, part, nchunks, k_chunk, chunk_stride,
                              consts: CRTConstants, mu, nu, alpha, beta, cin, cin_rs, cin_cs, out, out_rs, out_cs,
                              nonfinite, stream):
        """crt_unscale of the realified m x n output from Karatsuba's three products per
        modulus (part q at c + q*part elements; see the ABI)."""
        self._stage("crt_unscale_karatsuba", c, nmod, m, n, ldc, plane, part, nchunks, k_chunk, chunk_stride,
                    ctypes.byref(self.constants(consts)), mu, nu, float(alpha), float(beta),
                    cin or None, cin_rs, cin_cs, out, out_rs, out_cs, _nf(nonfinite), stream or None)

    def complex_axpby(self, t, m, n, ldt, alpha: complex, beta: complex, cin, cin_rs, cin_cs, out, out_rs, out_cs,
                      stream):
        """numerics.zgemm.complex_axpby: out = alpha T + beta cin (complex128, strides in
        complex elements); ``t`` unread when alpha == 0, ``cin`` when beta == 0."""
        self._stage("complex_axpby", t or None, m, n, ldt, float(alpha.real), float(alpha.imag), float(beta.real),
                    float(beta.imag), cin or None, cin_rs, cin_cs, out, out_rs, out_cs, stream or None)


def _nf(source):
    """A CNonfiniteSource by reference; None or 0: none (both operands finite)."""
    return ctypes.byref(source) if source else None


def load_stages(arch: Arch, out_dir=None, *, build_missing: bool = True, progress: bool = True) -> Stages:
    """The stage kernels of ``arch``, building them first (with progress) when missing."""
    return load_library(Stages, StagesVariant(arch=Arch(arch)), out_dir, build_missing=build_missing,
                        progress=progress)


def stages_from_tree(arch: Arch, tree, out_dir=None, *, progress: bool = True) -> Stages:
    """The stage kernels of ``arch`` built from another checkout's templates (``tree``/templates
    and its include/ headers; e.g. ``git archive BRANCH templates | tar -x -C TREE``), cached
    next to this checkout's under their own key: a branch's kernels timed against these in one
    process (``--other`` of scripts/residues_alone.py, scan_alone.py, combine_alone.py and
    shifts_alone.py, one tree or several). This checkout's generator renders them, and the
    library must have this checkout's stage ABI."""
    templates = Path(tree) / "templates"
    if not (templates / "stages.cu.j2").is_file():
        raise FileNotFoundError(f"{templates} holds no stages.cu.j2: not a checkout's tree")
    toolchain = resolve_toolchain(templates_dir=templates)
    (art,) = build([StagesVariant(arch=Arch(arch))], out_dir, progress=progress, toolchain=toolchain).artifacts
    return Stages(art)


def stage_libraries(arch: Arch, others=()) -> dict[str, Stages]:
    """The stage scripts' libraries by name: "this" (this checkout's, :func:`load_stages`)
    and each of ``others``' (other checkouts' trees, :func:`stages_from_tree`; one tree may
    be given alone, as a string or path): "other" where there is one, else each by its tree
    as given (distinct, none named "this")."""
    others = [others] if isinstance(others, (str, Path)) else list(others or ())
    if len(set(others)) != len(others) or "this" in others:
        raise ValueError(f"stage_libraries: the other trees must be distinct and none named 'this': {others}")
    libs = {"this": load_stages(arch)}
    for tree in others:
        libs["other" if len(others) == 1 else tree] = stages_from_tree(arch, tree)
    return libs
