"""The fused path: residues of all moduli concatenated along k (row i: modulus 0's k_pad
values, then modulus 1's, ...); the fused kernel writes each group's partial CRT value
(X mod the product of the group's moduli: uint32, one byte for a one-modulus group, rows
of n_pad, a multiple of 16 for the byte rows' TMA stores), one call per run of equal-size
groups (one batched launch for one-modulus groups on sm_90a); the combine kernel
finishes the CRT with the unscaling, alpha and beta."""

from __future__ import annotations

import itertools

from ..device.workspace import Workspace
from ..kernels.gemm import load_group_gemm
from ..numerics.moduli import crt_constants, group_sizes, padded_n, partial_bytes
from ..operands.stages import round_up
from .launch import Finish, KernelSet, Launch, PhaseTimer, group_variant
from .scale import nonfinite_source, residues, scale

__all__ = ["run_fused", "runs"]


def runs(sizes: list[int]) -> list[tuple[int, int]]:
    """[(group size, how many in a row)] of a list of group sizes: [4, 4, 4, 3] -> [(4, 3), (3, 1)]."""
    return [(size, len(list(run))) for size, run in itertools.groupby(sizes)]


def run_fused(kern: KernelSet, L: Launch, ws: Workspace, timer: PhaseTimer, overlap: bool) -> Finish:
    st, m, n, count, sh = kern.stages, L.m, L.n, L.moduli, L.stream
    consts = crt_constants(count)
    kp = round_up(L.k, kern.variant.tile_k)
    n_pad = padded_n(n, fused=True)
    sc = scale(kern, L, n_pad, ws, overlap)
    timer.mark("scale")
    row = count * kp
    ra, rb = ws.get("ra", m * row), ws.get("rb", n_pad * row)
    residues(kern, L, sc, ra, rb, n_pad, kp, (row, kp), ws, overlap)
    timer.mark("residues")
    sizes = group_sizes(count, kern.variant.group_size)
    plane = m * n_pad
    x = ws.get("x", sum(partial_bytes(size) for size in sizes) * plane)
    first, offset = 0, 0
    for size, groups in runs(sizes):
        gk = load_group_gemm(group_variant(kern.variant, size))
        ws_bytes = gk.workspace_size(m, n_pad, kp, groups)
        gws = ws.get(f"group_ws{size}", ws_bytes) if ws_bytes else 0
        gk(m, n_pad, kp, consts.moduli[first:first + size * groups], ra + first * kp, row, rb + first * kp, row,
           x + offset, n_pad, plane, gws, ws_bytes, sh)
        first += size * groups
        offset += partial_bytes(size) * plane * groups
    timer.mark("int8_gemm")

    def finish(C: Launch) -> None:
        st.combine_unscale(x, sizes, m, n, n_pad, plane, consts, sc.mu, sc.nu, C.alpha, C.beta, *C.c_input,
                           C.O.ptr, C.O.rs, C.O.cs, nonfinite_source(C, sc), C.stream)
    return finish
