"""The staged path: residues in (modulus, row, k) planes, one batched INT8 GEMM over the
moduli per k chunk, then the CRT reconstruction with the unscaling, alpha and beta (and
the NaN/Inf pattern where the inputs have non-finite values) in one kernel."""

from __future__ import annotations

from ..device.workspace import Workspace
from ..numerics.moduli import K_CHUNK, crt_constants, k_chunks, padded_k, padded_n
from .karatsuba import karatsuba_applies, run_karatsuba
from .launch import Finish, KernelSet, Launch, PhaseTimer
from .scale import nonfinite_source, residues, scale

__all__ = ["run_staged", "int8_products"]


def run_staged(kern: KernelSet, L: Launch, ws: Workspace, timer: PhaseTimer, overlap: bool) -> Finish | None:
    """The staged run up to its CRT (the finish); None where Karatsuba's products ran with
    their own CRT (a complex call's realified product: never replayed)."""
    st, m, n, count, sh = kern.stages, L.m, L.n, L.moduli, L.stream
    consts = crt_constants(count)
    kp = padded_k(L.k)
    n_pad = padded_n(n)
    sc = scale(kern, L, n_pad, ws, overlap)
    timer.mark("scale")
    if karatsuba_applies(L, sc) and run_karatsuba(kern, L, ws, timer, sc, consts, overlap):
        return None
    made = {name for name, p in L.prepared.items() if p.residues}
    ra = L.prepared["a"].residues if "a" in made else ws.get("ra", count * m * kp)
    rb = L.prepared["b"].residues if "b" in made else ws.get("rb", count * n_pad * kp)
    residues(kern, L, sc, ra, rb, n_pad, kp, None, ws, overlap, made)
    timer.mark("residues")
    c32, chunk_stride = int8_products(kern, ws, m, n_pad, kp, count, count, ra, rb, sh)
    timer.mark("int8_gemm")

    def finish(C: Launch) -> None:
        st.crt_unscale(c32, count, m, n, n_pad, m * n_pad, k_chunks(kp), chunk_stride, consts, sc.mu, sc.nu,
                       C.alpha, C.beta, *C.c_input, C.O.ptr, C.O.rs, C.O.cs, nonfinite_source(C, sc), C.stream)
    return finish


def int8_products(kern: KernelSet, ws: Workspace, m: int, n_pad: int, kp: int, planes: int, slots: int, ra: int,
                  rb: int, sh: int) -> tuple[int, int]:
    """One batched INT8 GEMM per k chunk over ``planes`` pairs of residue planes (ra's m x
    kp and rb's n_pad x kp, each set contiguous) into the int32 planes of the workspace's
    "c32", which holds ``slots`` >= planes of them per chunk; returns (c32, the elements
    between chunks)."""
    nchunks = k_chunks(kp)
    plane = m * n_pad
    c32 = ws.get("c32", 4 * nchunks * slots * plane)
    ws_bytes = kern.gemm.workspace_size(m, n_pad, min(kp, K_CHUNK), planes)
    gws = ws.get("gemm_ws", ws_bytes) if ws_bytes else 0
    for ch in range(nchunks):
        k0 = ch * K_CHUNK
        kl = min(K_CHUNK, kp - k0)
        kern.gemm(m, n_pad, kl, planes, ra + k0, kp, m * kp, rb + k0, kp, n_pad * kp,
                  c32 + 4 * ch * slots * plane, n_pad, plane, gws, ws_bytes, sh)
    return c32, slots * plane
