"""Karatsuba on the staged path of a complex call: three INT8 products of k per modulus
(Ar Br, Ai Bi, (Ar + Ai)(Br + Bi)) where the realified product (numerics.zgemm) has one of
2k x 2n, the work of four.

Per modulus p, Re = P1 - P2 and Im = P3 - P1 - P2 (mod p) are the residues of the very
integers the realified product reconstructs, so the bits are the realified product's,
provided the scaled integers are the same in both roles: B'r and B'i scaled alike in
Bhat's columns 2j and 2j + 1, A'r and A'i alike in Ahat's columns 2l and 2l + 1. That holds
in fast mode without an inner equilibration: the fast shifts of Bhat's columns 2j and
2j + 1 come from the same multiset of magnitudes (exact integer sums), and no inner scale
differs between 2l and 2l + 1. Accurate mode (its column shifts see different coarse
bounds per entry) and an equilibrated call run the realified product. docs/numerics.md
("Complex operands") has the argument; the GPU tests check the bits against the reference.

The residue kernel writes the parts' planes (Ar, Ai, Ar + Ai; Br, Bi, Br + Bi) straight
from the realified operands: the realified residue planes are never made, and of Bhat only
the odd columns are read (column 2j + 1 holds both Re b and Im b).

It runs where it was measured faster: complex m, n and k all at least
``config.karatsuba_min()`` (8192 unless OZAKI_KARATSUBA_MIN says otherwise). Its extra
work (a CRT reading three int32 planes) grows as the output, its saving (a quarter of the
INT8 products) as the product.
"""

from __future__ import annotations

from .. import config
from ..device import driver
from ..device.workspace import Fork, Workspace
from ..kernels.stages import CNonfiniteSource
from ..numerics.moduli import K_CHUNK, k_chunks, padded_k, padded_n
from ..operands.stages import round_up
from .launch import KernelSet, Launch, PhaseTimer
from .scale import Scaled, nonfinite_source

__all__ = ["PANEL_BYTES", "karatsuba_applies", "panel_columns", "run_karatsuba"]


def karatsuba_applies(L: Launch, sc: Scaled) -> bool:
    """Whether the staged path runs ``L`` (a complex call's realified product) as
    Karatsuba's three products with the realified product's bits (see the module)."""
    return (L.realified and L.mode == "fast" and not sc.inner_a and not sc.inner_b and L.k > 0
            and not L.prepared and min(L.m, L.n // 2, L.k // 2) >= config.karatsuba_min())


#: Bytes of int32 products one panel of complex columns may hold: wider products run in
#: panels (the same bits: every entry's CRT reads its own products only). 8192^3 at 16
#: moduli (12.9 GB) is one panel; 16384^3 at 17 moduli (55 GB) four.
PANEL_BYTES = 16 << 30


def panel_columns(count: int, m: int, nq: int, nchunks: int) -> int:
    """Complex columns per panel (of nq, a multiple of 4): all of them when their int32
    products (3 x count planes of m rows per k chunk) fit PANEL_BYTES, else equal panels
    rounded up to a multiple of 256 that do."""
    per_column = 4 * 3 * count * m * nchunks
    panels = max(1, -(-per_column * nq // PANEL_BYTES))
    return nq if panels == 1 else min(nq, round_up(-(-nq // panels), 256))


def run_karatsuba(kern: KernelSet, L: Launch, ws: Workspace, timer: PhaseTimer, sc: Scaled, consts,
                  overlap: bool) -> bool:
    """The three parts' residue planes straight from the realified operands (Ahat's rows;
    Bhat's odd columns, which hold Im b at their even rows and Re b at their odd ones, B's
    on the side stream when ``overlap``), then per panel of complex columns
    (panel_columns) one batched INT8 GEMM over 3 x count planes per k chunk and the CRT of
    the panel's realified output. False, with nothing enqueued, where its buffers (one
    panel's int32 products and the parts' residues) do not fit the GPU's memory: the
    realified product, whose bits are the same, runs instead."""
    st, m, count, sh = kern.stages, L.m, L.moduli, L.stream
    kc, nc = L.k // 2, L.n // 2
    kq = padded_k(kc)
    nq = padded_n(nc)
    nchunks = k_chunks(kq)
    w = panel_columns(count, m, nq, nchunks)
    plane = m * w
    part = count * plane
    try:
        c32 = ws.get("c32", 4 * nchunks * 3 * part)
        ra3, rb3 = ws.get("ra3", 3 * count * m * kq), ws.get("rb3", 3 * count * nq * kq)
    except driver.OutOfMemoryError:
        ws.drop("ra3", "rb3")
        return False
    moduli = ws.moduli()
    x, nvec, k, vs, es = sc.b
    with Fork(ws, sh, overlap) as side:
        # Bhat's column 2j + 1: Im b_lj at row 2l, Re b_lj at row 2l + 1; its shift is column 2j's
        st.residues_karatsuba(x + 8 * vs, nc, k, 2 * vs, es, sc.nu + 4, 2, count, moduli, rb3, nq, kq, True,
                              nq * kq, count * nq * kq, side)
        st.residues_karatsuba(*sc.a, sc.mu, 1, count, moduli, ra3, m, kq, False, m * kq, count * m * kq, sh)
    timer.mark("residues")
    ws_bytes = kern.gemm.workspace_size(m, w, min(kq, K_CHUNK), 3 * count)
    gws = ws.get("gemm_ws", ws_bytes) if ws_bytes else 0
    nf = nonfinite_source(L, sc)
    cin, cin_rs, cin_cs = L.c_input
    for j0 in range(0, nq, w):
        wj = min(w, nq - j0)      # a multiple of 4, as nq and w are
        for ch in range(nchunks):
            k0 = ch * K_CHUNK
            kl = min(K_CHUNK, kq - k0)
            kern.gemm(m, wj, kl, 3 * count, ra3 + k0, kq, m * kq, rb3 + j0 * kq + k0, kq, nq * kq,
                      c32 + 4 * ch * 3 * part, w, plane, gws, ws_bytes, sh)
        timer.mark("int8_gemm")
        # the panel's realified columns 2 j0 .. 2 (j0 + cols) - 1: output, shifts, c and op(B)
        # (for the NaN/Inf pattern) from there
        cols, j = min(wj, nc - j0), 2 * j0
        panel_nf = CNonfiniteSource(nf.a, nf.a_rs, nf.a_cs, nf.b + 8 * j * nf.b_cs if nf.b else 0, nf.b_rs,
                                    nf.b_cs, nf.k, nf.row_flags, nf.col_flags + 4 * j if nf.col_flags else 0)
        st.crt_unscale_karatsuba(c32, count, m, 2 * cols, w, plane, part, nchunks, min(kq, K_CHUNK), 3 * part,
                                 consts, sc.mu, sc.nu + 4 * j, L.alpha, L.beta, cin + 8 * j * cin_cs if cin else 0,
                                 cin_rs, cin_cs, L.O.ptr + 8 * j * L.O.cs, L.O.rs, L.O.cs, panel_nf, sh)
        timer.mark("crt")
    timer.notes["products"] = "karatsuba: 3 per modulus"
    return True
