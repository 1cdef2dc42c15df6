"""The tile-local prologue prototype at run time: ``gemm(..., path="prologue")``.

scale (the staged path's own stage: exponents, shifts; accurate mode's coarse INT8 GEMM)
-> one prologue kernel launch per k chunk (templates/include/ozaki/prologue_gemm.h: CTAs
read float64 tiles, make their modulus' int8 residues on chip, mma.sync, int32 planes out)
-> the staged CRT stage, unchanged. Same bits as the staged path and the reference.

Opt-in only: the dispatcher never picks it and ``policy="auto"`` never sends a call here.
Not supported (ValueError, before any GPU work; ``ozaki_cutlass.call`` checks): prepared
operands (they carry pre-made residues), ``kernel=`` (the prologue variant is not a
GemmVariant).
"""

from __future__ import annotations

from ..device.workspace import Workspace
from ..numerics.moduli import K_CHUNK, crt_constants, k_chunks, padded_k, padded_n
from .launch import Finish, KernelSet, Launch, PhaseTimer
from .scale import nonfinite_source, scale

__all__ = ["run_prologue"]


def run_prologue(kern: KernelSet, L: Launch, ws: Workspace, timer: PhaseTimer, overlap: bool) -> Finish:
    """``kern.prologue`` is the loaded PrologueGemm, ``kern.gemm`` the plain INT8 GEMM for
    accurate mode's coarse bound. Timer phases: scale, prologue_gemm (residues + INT8
    GEMM), crt."""
    st, m, n, k, count, sh = kern.stages, L.m, L.n, L.k, L.moduli, L.stream
    consts = crt_constants(count)
    kp = padded_k(k)
    n_pad = padded_n(n)
    sc = scale(kern, L, n_pad, ws, overlap)
    timer.mark("scale")
    # the staged path's int32 planes, chunk by chunk (exact while a chunk is <= 2^17 long)
    nchunks = k_chunks(kp)
    plane = m * n_pad
    c32 = ws.get("c32", 4 * nchunks * count * plane)
    a_ptr, _, _, a_vs, a_es = sc.a
    b_ptr, _, _, b_vs, b_es = sc.b
    for ch in range(nchunks):
        k0 = ch * K_CHUNK
        kl = min(K_CHUNK, kp - k0)
        kern.prologue(m, n, n_pad, k, k0, kl, consts.moduli, a_ptr, a_vs, a_es, sc.mu, b_ptr, b_vs, b_es, sc.nu,
                      c32 + 4 * ch * count * plane, n_pad, plane, sh)
    timer.mark("prologue_gemm")

    def finish(C: Launch) -> None:
        st.crt_unscale(c32, count, m, n, n_pad, plane, nchunks, count * plane, consts, sc.mu, sc.nu,
                       C.alpha, C.beta, *C.c_input, C.O.ptr, C.O.rs, C.O.cs, nonfinite_source(C, sc), C.stream)
    return finish
