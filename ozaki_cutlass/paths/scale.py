"""The stages every emulated path runs before its INT8 products, and the zero result:
scale (each operand's own stages, then accurate mode's shifts through one INT8 GEMM of
the coarse magnitudes) and residues (op(A)'s rows and op(B)'s columns modulo each
modulus), A's side on the call's stream and B's on a second one."""

from __future__ import annotations

from dataclasses import dataclass

from ..device import driver
from ..device.workspace import Fork, Workspace
from ..kernels.stages import CNonfiniteSource
from ..numerics.moduli import K_CHUNK, crt_constants, k_chunks, padded_k, shift_work_words
from ..operands.stages import OperandBuffers, VectorSet, needs_pack, run_operand_stages
from .launch import KernelSet, Launch

__all__ = ["Scaled", "scale", "residues", "nonfinite_source", "zero_result"]


@dataclass(frozen=True, slots=True)
class Scaled:
    """What the scale stage leaves for the later ones: the vector sets of op(A)'s rows and
    op(B)'s columns, and device pointers to their shifts and non-finite counts."""

    a: VectorSet
    b: VectorSet
    mu: int
    nu: int
    nonfinite_a: int
    nonfinite_b: int
    inner_a: int = 0  # the contract's inner shifts (device int32 per l), 0: none
    inner_b: int = 0


@dataclass(frozen=True, slots=True)
class _Side:
    """One operand of a call, after its own stages: made now or brought by a Prepared."""

    vectors: VectorSet
    exps: int
    fast: int
    nonfinite: int
    coarse: int
    shift: int  # accurate mode: the shifts accurate_shifts writes
    inner: int = 0


def scale(kern: KernelSet, L: Launch, n_pad: int, ws: Workspace, overlap: bool) -> Scaled:
    """Stages 1-3 for op(A)'s rows (vs = rs, es = cs) and op(B)'s columns (vs = cs,
    es = rs): pack (where k is strided), exponents, fast shifts, non-finite counts, coarse
    magnitudes; A's side on the call's stream, B's on the side stream when ``overlap``.
    Then the accurate shifts through one INT8 GEMM of the coarse magnitudes (the plain
    kernel of the arch). A side in ``L.prepared`` brings its own results; under the
    accuracy contract (``L.prescan``) the scan is done, and the fast shifts of the chosen
    count follow from it."""
    st, sh, m, n, k = kern.stages, L.stream, L.m, L.n, L.k
    pb = crt_constants(L.moduli).bound_exponent
    accurate = L.mode == "accurate"
    k16 = padded_k(k)

    def i32(name: str, size: int) -> int:
        return ws.get(name, 4 * size)

    if L.prescan is not None:
        return _after_prescan(kern, L, n_pad, ws, i32)
    todo: list[tuple[str, OperandBuffers]] = []
    for name, X, nvec, vs, es, rows_pad in (("a", L.A, m, L.A.rs, L.A.cs, m), ("b", L.B, n, L.B.cs, L.B.rs, n_pad)):
        if name in L.prepared:
            continue
        todo.append((name, OperandBuffers(
            X=X, nvec=nvec, vs=vs, es=es, rows_pad=rows_pad,
            packed=ws.get("pack_" + name, 8 * nvec * k) if needs_pack(nvec, k, es) else 0,
            exps=i32("e" + name, nvec), fast=i32("fast_" + name, nvec), nonfinite=i32("nf_" + name, nvec),
            coarse=ws.get("bar_" + name, rows_pad * k16) if accurate else 0)))
    made: dict[str, VectorSet] = {}
    with Fork(ws, sh, overlap) as side:
        for name, ob in reversed(todo):  # B's side first, on the side stream
            made[name] = run_operand_stages(st, ob, k, pb, accurate, side if name == "b" else sh)
    sides = {}
    for name, ob in todo:
        sides[name] = _Side(made[name], ob.exps, ob.fast, ob.nonfinite, ob.coarse,
                            i32("shift_" + name, ob.nvec))
    for name, p in L.prepared.items():
        sides[name] = _Side(p.vector_set, p.exps, p.fast, p.nonfinite, p.coarse,
                            i32("shift_" + name, m if name == "a" else n))
    return _shifts(kern, L, n_pad, ws, i32, sides["a"], sides["b"])


def _after_prescan(kern: KernelSet, L: Launch, n_pad: int, ws: Workspace, i32) -> Scaled:
    """The scale stage of a contract call: the fast shifts of the chosen count from the
    contract's scan, then (accurate mode) the coarse magnitudes of the equilibrated
    operands and the accurate shifts."""
    st, sh, k = kern.stages, L.stream, L.k
    pb = crt_constants(L.moduli).bound_exponent
    k16 = padded_k(k)
    sides = {}
    for name, p, nvec, rows_pad in (("a", L.prescan.a, L.m, L.m), ("b", L.prescan.b, L.n, n_pad)):
        fast = i32("fast_" + name, nvec)
        st.fast_shifts(p.exps, p.logq, nvec, k, pb, fast, sh)
        coarse = 0
        if L.mode == "accurate":
            coarse = ws.get("bar_" + name, rows_pad * k16)
            st.coarse(*p.vectors, p.exps, coarse, rows_pad, k16, sh, inner=p.inner)
        sides[name] = _Side(p.vectors, p.exps, fast, p.nonfinite, coarse, i32("shift_" + name, nvec), p.inner)
    return _shifts(kern, L, n_pad, ws, i32, sides["a"], sides["b"])


def _shifts(kern: KernelSet, L: Launch, n_pad: int, ws: Workspace, i32, a: _Side, b: _Side) -> Scaled:
    """The shifts of both sides: the fast ones, or in accurate mode those of the coarse
    bound's INT8 GEMM."""
    st, sh, m, n, k = kern.stages, L.stream, L.m, L.n, L.k
    pb = crt_constants(L.moduli).bound_exponent
    k16 = padded_k(k)
    if L.mode != "accurate":
        return Scaled(a.vectors, b.vectors, a.fast, b.fast, a.nonfinite, b.nonfinite, a.inner, b.inner)
    gemm = kern.coarse_gemm()
    nchunks = k_chunks(k16)
    part = i32("gpart", m * n_pad)
    ws_bytes = gemm.workspace_size(m, n_pad, min(k16, K_CHUNK), 1)
    gws = ws.get("coarse_ws", ws_bytes) if ws_bytes else 0
    shift_args = (a.exps, b.exps, a.fast, b.fast, pb, a.shift, b.shift, i32("shift_work", shift_work_words(m, n)), sh)
    if nchunks == 1:  # the int32 GEMM output is the bound itself
        gemm(m, n_pad, k16, 1, a.coarse, k16, 0, b.coarse, k16, 0, part, n_pad, 0, gws, ws_bytes, sh)
        st.accurate_shifts_i32(part, n_pad, m, n, *shift_args)
    else:
        g = ws.get("g", 8 * m * n)
        for ch in range(nchunks):
            k0 = ch * K_CHUNK
            kl = min(K_CHUNK, k16 - k0)
            gemm(m, n_pad, kl, 1, a.coarse + k0, k16, 0, b.coarse + k0, k16, 0, part, n_pad, 0, gws, ws_bytes, sh)
            st.accumulate_i64(part, m, n, n_pad, g, ch == 0, sh)
        st.accurate_shifts(g, m, n, *shift_args)
    return Scaled(a.vectors, b.vectors, a.shift, b.shift, a.nonfinite, b.nonfinite, a.inner, b.inner)


def residues(kern: KernelSet, L: Launch, sc: Scaled, ra: int, rb: int, n_pad: int, kp: int,
             layout: tuple[int, int] | None, ws: Workspace, overlap: bool, skip=()) -> None:
    """Residues of op(A)'s rows into ``ra`` and op(B)'s columns into ``rb`` (B's on the
    side stream when ``overlap``). ``layout``: None for the staged (modulus, row, k)
    planes, else (row_stride, plane_stride) of the fused kernels' concatenated rows.
    ``skip``: the sides ("a", "b") whose residues are already made (prepared, fast mode)."""
    st, sh, count, moduli = kern.stages, L.stream, L.moduli, ws.moduli()
    with Fork(ws, sh, overlap) as side:
        for name, v, shifts, out, rows_pad, s, inner in (("b", sc.b, sc.nu, rb, n_pad, side, sc.inner_b),
                                                         ("a", sc.a, sc.mu, ra, L.m, sh, sc.inner_a)):
            if name in skip:
                continue
            if layout is None:
                st.residues(*v, shifts, count, moduli, out, rows_pad, kp, s, inner=inner)
            else:
                st.residues_strided(*v, shifts, count, moduli, out, rows_pad, kp, *layout, s, inner=inner)


def nonfinite_source(L: Launch, sc: Scaled) -> CNonfiniteSource:
    """Where the CRT finds the NaN/Inf pattern: op(A), op(B) and the non-finite counts of
    their rows and columns (the scan's). The CRT kernel classifies the terms of an entry
    whose row or column is flagged; nothing is decided on the host, so nothing waits."""
    A, B = L.A, L.B
    return CNonfiniteSource(A.ptr, A.rs, A.cs, B.ptr, B.rs, B.cs, L.k, sc.nonfinite_a, sc.nonfinite_b)


def zero_result(st, L: Launch, ws: Workspace) -> None:
    """alpha == 0 or k == 0: A and B are not read; out = beta * c (or 0) through the
    same final kernel, fed zero residues and zero shifts."""
    m, n, sh = L.m, L.n, L.stream
    zc = crt_constants(2)
    z = ws.get("zero_c", 4 * 2 * m * n)
    driver.check(driver.bindings().cuMemsetD8Async(z, 0, 4 * 2 * m * n, driver.as_cu_stream(sh)), "memset")
    zi = ws.get("zero_shift", 4 * max(m, n))
    driver.check(driver.bindings().cuMemsetD8Async(zi, 0, 4 * max(m, n), driver.as_cu_stream(sh)), "memset")
    st.crt_unscale(z, 2, m, n, n, m * n, 1, 0, zc, zi, zi, 0.0, L.beta, *L.c_input, L.O.ptr, L.O.rs, L.O.cs, None, sh)
