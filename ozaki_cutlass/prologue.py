"""The tile-local prologue prototype (issue 6 item 3) at run time: ``gemm(..., path="prologue")``.

scale (the staged path's own stage: exponents, shifts; accurate mode's coarse INT8 GEMM)
-> one prologue kernel launch per k chunk (templates/include/ozaki/prologue_gemm.h: CTAs
read float64 tiles, make their modulus' int8 residues on chip, mma.sync, int32 planes out)
-> the staged CRT stage, unchanged. Same bits as the staged path and the reference.

Opt-in only: the dispatcher never picks it and ``policy="auto"`` never sends a call here.
Not supported (ValueError, before any GPU work): prepared operands (they carry pre-made
residues), ``kernel=`` (the prologue variant is not a GemmVariant).
"""

from __future__ import annotations

import ctypes

from .generator.prologue import PrologueVariant, default_prologue_variant
from .kernels import GeneratedLibrary, load_library

__all__ = ["PrologueGemm", "load_prologue_gemm", "refusal", "run"]

_i64, _int, _ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p


class PrologueGemm(GeneratedLibrary):
    """One built prologue kernel (ABI: templates/include/ozaki/prologue_gemm.h)."""

    RUN_ARGTYPES = [_i64, _i64, _i64, _i64, _i64, _i64, _int, ctypes.POINTER(ctypes.c_int32),
                    _ptr, _i64, _i64, _ptr, _ptr, _i64, _i64, _ptr, _ptr, _i64, _i64, _ptr]
    WORKSPACE_ARGTYPES = None  # it needs none

    def __call__(self, m, n, n_out, k, k_begin, k_len, moduli, a, a_vs, a_es, mu, b, b_vs, b_es, nu,
                 c, ldc, plane_stride, stream=0) -> None:
        """int32 planes c[g] (g < len(moduli)) of the residue products over k in
        [k_begin, k_begin + k_len); pointers and the stream are integer handles."""
        mods = (ctypes.c_int32 * len(moduli))(*moduli)
        self._check(self._run(m, n, n_out, k, k_begin, k_len, len(moduli), mods, a, a_vs, a_es, mu,
                              b, b_vs, b_es, nu, c, ldc, plane_stride, stream or None))


def load_prologue_gemm(variant: PrologueVariant | None = None, out_dir=None, *,
                       build_missing: bool = True, progress: bool = True) -> PrologueGemm:
    """The loaded prologue kernel (default: the catalog's one), built first when missing."""
    variant = variant if variant is not None else default_prologue_variant()
    return load_library(PrologueGemm, variant, out_dir, build_missing=build_missing, progress=progress)


def refusal(*, prepared: bool, kernel) -> str | None:
    """Why ``gemm(..., path="prologue")`` cannot run with these options, else None."""
    if prepared:
        return ("path='prologue' makes the residues inside the GEMM kernel from float64 operands; "
                "prepared operands (pre-made residues) run on the staged path")
    if kernel is not None:
        return ("path='prologue' runs the prologue prototype "
                f"({default_prologue_variant().name}); kernel= chooses staged or fused GEMM variants")
    return None


def run(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer) -> None:
    """The prologue path of pipeline._run (same arguments as _run_staged); ``kern.prologue``
    is the loaded PrologueGemm, ``kern.gemm`` the plain INT8 GEMM for accurate mode's
    coarse bound. Timer phases: scale, prologue_gemm (residues + INT8 GEMM), crt."""
    from . import pipeline
    from .generator import environment
    from .numerics import K_CHUNK, crt_constants

    st = kern.stages
    consts = crt_constants(count)
    kp = pipeline._round_up(k, 16)
    n_pad = pipeline._round_up(n, 4)
    overlap = environment.overlap()
    va, vb, mu, nu, nfa, nfb = pipeline._scale(kern, A, B, m, n, k, n_pad, consts, mode, sh, ws, overlap)
    timer.mark("scale")
    # the staged path's int32 planes, chunk by chunk (exact while a chunk is <= 2^17 long)
    nchunks = -(-kp // K_CHUNK)
    plane = m * n_pad
    c32 = ws.get("c32", 4 * nchunks * count * plane)
    a_ptr, _, _, a_vs, a_es = va
    b_ptr, _, _, b_vs, b_es = vb
    for ch in range(nchunks):
        k0 = ch * K_CHUNK
        kl = min(K_CHUNK, kp - k0)
        kern.prologue(m, n, n_pad, k, k0, kl, consts.moduli, a_ptr, a_vs, a_es, mu, b_ptr, b_vs, b_es, nu,
                      c32 + 4 * ch * count * plane, n_pad, plane, sh)
    timer.mark("prologue_gemm")
    cin, cin_rs, cin_cs = pipeline._cin(C, beta)
    st.crt_unscale(c32, count, m, n, n_pad, plane, nchunks, count * plane, consts, mu, nu,
                   alpha, beta, cin, cin_rs, cin_cs, O.ptr, O.rs, O.cs, pipeline._nonfinite(A, B, k, nfa, nfb), sh)
