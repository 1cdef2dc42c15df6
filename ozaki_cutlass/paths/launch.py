"""What every path takes: the call made ready for the GPU (:class:`Launch`), the kernels
chosen for it (:class:`KernelSet`, from :func:`resolve_kernels`) and the phase timer
behind ``timings=``; what every path gives back (:data:`Finish`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import dispatch
from ..device import driver
from ..device.arrays import Matrix
from ..generator import Arch, GemmVariant, default_variant
from ..kernels.gemm import Int8Gemm, load_group_gemm, load_int8_gemm
from ..kernels.library import build_missing
from ..kernels.prologue import PrologueGemm, load_prologue_gemm
from ..kernels.stages import Stages, load_stages

__all__ = ["PHASES", "Launch", "KernelSet", "PhaseTimer", "Finish", "resolve_kernels", "replay_key"]

PHASES = ("scale", "residues", "int8_gemm", "crt", "total")


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """One emulated product on the GPU: C = alpha op(A) op(B) + beta C into O.

    A and B are already op(A) (m x k) and op(B) (k x n) as device matrices (a transpose is
    in their strides), C is None when beta is 0, O is where the result goes. ``prepared``
    maps "a"/"b" to the :class:`~ozaki_cutlass.operands.prepared.Prepared` operands of the
    call. Sizes are those of the product; the stream is an int handle."""

    A: Matrix
    B: Matrix
    C: Matrix | None
    O: Matrix
    m: int
    n: int
    k: int
    alpha: float
    beta: float
    moduli: int
    mode: str
    stream: int
    prepared: dict = field(default_factory=dict)
    prescan: object = None  # paths.contract.Prescan: the accuracy contract's scan, done
    realified: bool = False  # a complex call's realified product (paths.karatsuba may run it)

    @property
    def c_input(self) -> tuple[int, int, int]:
        """(ptr, row stride, column stride) of the c the final kernel reads; zeros when it
        reads none."""
        if self.C is None or self.beta == 0.0:
            return 0, 0, 0
        return self.C.ptr, self.C.rs, self.C.cs


@dataclass
class KernelSet:
    """The kernels of one call."""

    path: str                      # "staged", "fused" or "prologue"
    variant: object                # the GemmVariant chosen (prologue: the PrologueVariant)
    stages: Stages
    gemm: Int8Gemm | None = None   # staged: the INT8 GEMM; else the coarse-bound GEMM once loaded
    prologue: PrologueGemm | None = None

    def coarse_gemm(self) -> Int8Gemm:
        """The plain INT8 GEMM that computes the accurate mode's coarse bound: the staged
        path's own, else the arch's default one (loaded on first need)."""
        if self.gemm is None:
            self.gemm = load_int8_gemm(default_variant(self.variant.arch))
        return self.gemm


#: What a path's run gives back: its last kernel (the combine or the CRT), the one that
#: reads C and writes O with alpha and beta, not yet launched; ``finish(L)`` launches it
#: for the call ``L`` (its O, C, alpha, beta and stream; everything else as in the run).
#: A replayed call (device.graphs) launches the graph of the rest, then its own finish.
Finish = Callable[[Launch], None]


def replay_key(kern: KernelSet, L: Launch, overlap: bool) -> tuple | None:
    """Everything that fixes the launches of ``kern``'s run of ``L`` up to its finish (the
    key under which device.graphs.Replays keeps their graph; the workspace and the stream
    are the Replays' own; O, C, alpha and beta are the finish's), or None where a call is
    not replayed: prepared operands, the contract's scan, a complex call's realified
    product, the prologue prototype."""
    if L.prepared or L.prescan is not None or L.realified or kern.path == "prologue":
        return None
    return (kern.path, kern.variant, overlap, L.m, L.n, L.k, L.moduli, L.mode, _where(L.A), _where(L.B))


def _where(X: Matrix) -> tuple:
    return (X.ptr, X.rs, X.cs, X.itemsize)


def resolve_kernels(variant: GemmVariant | None, path: str | None, arch: Arch, problem: dispatch.Problem,
                    table: tuple[dict, str]) -> KernelSet:
    """The kernels of a call, loaded: ``variant`` when the caller named one (checked
    against the problem), else the dispatcher's choice under ``table``
    (dispatch.load_table()'s (table, source)) and ``path``; ``path="prologue"`` is the
    opt-in prototype. When a kernel of the call is not built, every kernel the dispatcher
    may pick on this arch is built first, in one parallel build (kernels.library
    .build_missing), so that later shapes find theirs; what the call needs beyond those
    (a named kernel, another moduli count's group sizes) is built then."""
    if path == "prologue":  # opt-in prototype, never dispatched: built alone when missing
        return _kernel_set(variant, path, arch, problem, table, build=True)
    try:
        return _kernel_set(variant, path, arch, problem, table, build=False)
    except FileNotFoundError:
        build_missing(dispatch.kernel_targets(arch, table, problem.moduli))
        return _kernel_set(variant, path, arch, problem, table, build=True)


def _kernel_set(variant, path, arch, problem, table, *, build: bool) -> KernelSet:
    if path == "prologue":
        lib = load_prologue_gemm(build_missing=build)
        return KernelSet(path="prologue", variant=lib.variant, stages=load_stages(arch, build_missing=build),
                         gemm=load_int8_gemm(default_variant(arch), build_missing=build), prologue=lib)
    if variant is None:
        choice = dispatch.choose(problem, table=table[0], table_source=table[1], path=path)
        variant, chosen_path = choice.variant, choice.path
    else:
        chosen_path = dispatch.path_of(variant)
        why = dispatch.Candidate(path=chosen_path, variant=variant).rejection(problem)
        if why is not None:
            raise ValueError(f"kernel {variant.name} cannot run m={problem.m}, n={problem.n}, k={problem.k}: {why}")
    stages = load_stages(variant.arch, build_missing=build)
    if chosen_path == "staged":
        return KernelSet(path="staged", variant=variant, stages=stages, gemm=load_int8_gemm(variant, build_missing=build))
    if build:  # after a first-use build: every group size the call launches, built now (not per call)
        for sibling in dispatch.Candidate(path="fused", variant=variant).kernels(problem.moduli):
            load_group_gemm(sibling)
    return KernelSet(path="fused", variant=variant, stages=stages)


def group_variant(variant: GemmVariant, size: int) -> GemmVariant:
    """``variant``'s sibling for a group of ``size`` moduli (the fused path's kernels)."""
    return variant if variant.group_size == size else dataclasses.replace(variant, group_size=size)


@dataclass
class PhaseTimer:
    """CUDA events recorded on ``stream`` at each phase's end (when ``enabled``), read
    into milliseconds per phase by :meth:`result` (which waits for the last)."""

    stream: int
    enabled: bool
    marks: list = field(default_factory=list)
    notes: dict = field(default_factory=dict)  # what the phases ran, for timings (e.g. "products")

    def mark(self, name: str) -> None:
        if not self.enabled:
            return
        cu = driver.bindings()
        ev = driver.check(cu.cuEventCreate(0), "cuEventCreate")
        driver.check(cu.cuEventRecord(ev, driver.as_cu_stream(self.stream)), "cuEventRecord")
        self.marks.append((name, ev))

    def result(self) -> dict:
        cu = driver.bindings()
        driver.wait_event(self.marks[-1][1])
        out = {p: 0.0 for p in PHASES}
        for (_, e0), (name, e1) in zip(self.marks, self.marks[1:]):
            out[name] = out.get(name, 0.0) + float(driver.check(cu.cuEventElapsedTime(e0, e1),
                                                                "cuEventElapsedTime"))
        out["total"] = float(driver.check(cu.cuEventElapsedTime(self.marks[0][1], self.marks[-1][1]),
                                          "cuEventElapsedTime"))
        for _, ev in self.marks:
            cu.cuEventDestroy(ev)
        return out
