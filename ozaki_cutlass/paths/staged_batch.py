"""A batch of emulated products of one shape on the staged path, with one INT8 GEMM launch
per k chunk for many elements: each element's own stages (the accuracy contract where it
runs, scale, residues) in turn, its residue planes written into its slot of the batch's,
its shifts and non-finite counts copied aside; then, for a run of consecutive elements
with one moduli count and mode, one batched INT8 GEMM over all their planes per k chunk
(the planes of element e and modulus g are plane e x count + g: evenly strided) and each
element's CRT from its own int32 planes.

Every element computes exactly what a single call computes (the same stages on the same
data, the same choice of count and mode, the same CRT), so the bits are the loop's. A run
holds at most ``batch_slots`` elements (``BATCH_BYTES`` of residue and int32 planes); an
element whose contract falls back to native DGEMM is left to the caller."""

from __future__ import annotations

import dataclasses

from ..device import driver
from ..device.workspace import Workspace
from ..kernels.stages import CNonfiniteSource
from ..numerics.contract import Choice, warn
from ..numerics.moduli import crt_constants, k_chunks, padded_k, padded_n
from .contract import run_contract
from .launch import KernelSet, Launch, PhaseTimer
from .scale import nonfinite_source, residues, scale
from .staged import int8_products

__all__ = ["BATCH_BYTES", "batch_slots", "batch_buffers", "run_staged_batch"]

#: Bytes of residue planes and int32 products the elements of one launch may hold: at 16
#: moduli 170 elements of 1024^3 (0.1 GB each), or 10 of 4096^3 (1.6 GB each).
BATCH_BYTES = 16 << 30


def batch_slots(count: int, m: int, n: int, k: int) -> int:
    """Elements of an m x n x k batch at ``count`` moduli whose residue and int32 planes
    fit BATCH_BYTES (at least 1)."""
    kp, n_pad = padded_k(k), padded_n(n)
    per_element = count * (m + n_pad) * kp + 4 * k_chunks(kp) * count * m * n_pad
    return max(1, BATCH_BYTES // per_element)


def batch_buffers(slots: int, count: int, m: int, n: int, k: int) -> dict[str, int]:
    """The batch's own workspace buffers (name -> bytes) for ``slots`` elements: their
    residue and int32 planes (the names a single staged call uses, grown) and the shifts
    and non-finite counts each element's CRT reads."""
    kp, n_pad = padded_k(k), padded_n(n)
    return {"ra": slots * count * m * kp, "rb": slots * count * n_pad * kp,
            "c32": 4 * k_chunks(kp) * slots * count * m * n_pad,
            "batch_mu": 4 * slots * m, "batch_nu": 4 * slots * n, "batch_nfa": 4 * slots * m,
            "batch_nfb": 4 * slots * n}


@dataclasses.dataclass
class _Run:
    """Consecutive elements of one moduli count and mode, in the slots of the batch buffers."""

    count: int
    mode: str
    slots: int
    buffers: dict[str, int]
    elements: list = dataclasses.field(default_factory=list)

    def accepts(self, L: Launch) -> bool:
        return (L.moduli, L.mode) == (self.count, self.mode) and len(self.elements) < self.slots


def run_staged_batch(kern: KernelSet, launches: list[Launch], ws: Workspace, timer: PhaseTimer,
                     target: float | None, may_fall_back: bool, overlap: bool) -> tuple[list[Choice | None], int]:
    """Run ``launches`` (one shape, one stream; ``kern`` a staged kernel set) as the
    module says; under the accuracy contract (``target`` set) each element's count and mode
    are its own choice. Returns each element's Choice (None without the contract) and the
    INT8 GEMM launches made; elements whose Choice is native are not run."""
    m, n, k, sh = launches[0].m, launches[0].n, launches[0].k, launches[0].stream
    kp, n_pad = padded_k(k), padded_n(n)
    choices: list[Choice | None] = []
    run: _Run | None = None
    launched = 0
    for index, L in enumerate(launches):
        choice = None
        if target is not None:
            choice, pre = run_contract(kern.stages, L.A, L.B, m, n, k, target, L.mode, may_fall_back, sh, ws,
                                       overlap)
            if not choice.native:
                warn(choice)
                L = dataclasses.replace(L, moduli=choice.moduli, mode=choice.mode, prescan=pre)
        choices.append(choice)
        if choice is not None and choice.native:
            continue
        if run is not None and not run.accepts(L):
            launched += _finish(kern, run, ws, timer, kp, n_pad)
            run = None
        if run is None:
            slots = min(batch_slots(L.moduli, m, n, k), len(launches) - index)
            run = _Run(L.moduli, L.mode, slots, {name: ws.get(name, size) for name, size in   # c32: int8_products
                                                  batch_buffers(slots, L.moduli, m, n, k).items() if name != "c32"})
        slot, count, b = len(run.elements), run.count, run.buffers
        sc = scale(kern, L, n_pad, ws, overlap)
        timer.mark("scale")
        residues(kern, L, sc, b["ra"] + slot * count * m * kp, b["rb"] + slot * count * n_pad * kp, n_pad, kp,
                 None, ws, overlap)
        for name, src, size in (("batch_mu", sc.mu, m), ("batch_nu", sc.nu, n), ("batch_nfa", sc.nonfinite_a, m),
                                ("batch_nfb", sc.nonfinite_b, n)):
            driver.copy_async(b[name] + 4 * slot * size, src, 4 * size, sh)
        timer.mark("residues")
        run.elements.append((L, sc))
    if run is not None:
        launched += _finish(kern, run, ws, timer, kp, n_pad)
    return choices, launched


def _finish(kern: KernelSet, run: _Run, ws: Workspace, timer: PhaseTimer, kp: int, n_pad: int) -> int:
    """The run's INT8 GEMMs (one per k chunk) and each element's CRT; the launches made."""
    L0 = run.elements[0][0]
    m, n, sh, count, b = L0.m, L0.n, L0.stream, run.count, run.buffers
    c32, chunk_stride = int8_products(kern, ws, m, n_pad, kp, len(run.elements) * count, run.slots * count,
                                      b["ra"], b["rb"], sh)
    timer.mark("int8_gemm")
    consts = crt_constants(count)
    plane = m * n_pad
    nchunks = k_chunks(kp)
    for slot, (L, sc) in enumerate(run.elements):
        nf = nonfinite_source(L, sc)
        nf = CNonfiniteSource(nf.a, nf.a_rs, nf.a_cs, nf.b, nf.b_rs, nf.b_cs, nf.k, b["batch_nfa"] + 4 * slot * m,
                              b["batch_nfb"] + 4 * slot * n)
        kern.stages.crt_unscale(c32 + 4 * slot * count * plane, count, m, n, n_pad, plane, nchunks, chunk_stride,
                                consts, b["batch_mu"] + 4 * slot * m, b["batch_nu"] + 4 * slot * n, L.alpha, L.beta,
                                *L.c_input, L.O.ptr, L.O.rs, L.O.cs, nf, sh)
    timer.mark("crt")
    return nchunks
