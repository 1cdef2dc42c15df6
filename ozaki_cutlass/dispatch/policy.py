"""The ``auto`` policy: whether a problem runs as native DGEMM or emulated, from a tuning
table's measurements or, outside them, a cost model; and the decisions remembered per
shape (which the native fast lane of ``ozaki_cutlass.gemm`` reads)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..generator import Arch
from .candidates import ANY, Problem

__all__ = ["CostModel", "H200_MODEL", "MEASURED_MARGIN", "emulation_measured_faster", "prefer_native",
           "AutoDecisions", "DECISIONS"]

#: The auto policy emulates a tuning table's bucket only where its default call measured
#: this much faster than native DGEMM (``ms * MEASURED_MARGIN < native_ms``), so that a
#: bucket within the spread between a tune and later calls stays native. Measured on the
#: H200 (docs/stages/combine.md, "The combine's NaN/Inf test outside its plain path, and
#: a re-tune not shipped"): a default call 1 % faster than native in the tune (5.33 against
#: 5.39 ms at 8192 x 8192 x 2048) ran at 0.92-0.93x native in the bench minutes later; the
#: buckets that emulate in the shipped table measured 1.25-1.73x.
MEASURED_MARGIN = 1.05


def emulation_measured_faster(ms: float, native_ms: float) -> bool:
    """Whether a default call of ``ms`` against native DGEMM's ``native_ms`` (timed in
    alternation) wins its bucket for the emulation: the rule ``tune`` writes tables by and
    :func:`prefer_native` reads them by."""
    return ms * MEASURED_MARGIN < native_ms


@dataclass(frozen=True, slots=True)
class CostModel:
    """Predicted milliseconds of emulated and native DGEMM for an m x n x k problem:

        emulated = (N + coarse) * 2mnk / int8_rate + operand_s * (m + n) k + output_s * m n + fixed
        native   = 2mnk / fp64_rate

    N moduli, coarse = 1 in accurate mode (the coarse-bound GEMM); operand_s covers the
    per-entry stages of A and B (pack, scan, coarse, residues), output_s the CRT. Fitted
    to the phase times of the H200 run in docs/stages.md ("Phases per shape": 2026-11-29,
    15 moduli, shapes 1024^3 .. 16384^3 and three rectangular ones): a guide for shapes no tuning
    table covers, not a measurement."""

    int8_rate: float = 1.45e15     # INT8 ops/s inside the pipeline
    fp64_rate: float = 55e12       # cuBLAS DGEMM flop/s
    operand_s: float = 2.6e-11     # seconds per operand entry
    output_s: float = 5.0e-11      # seconds per output entry
    fixed_s: float = 3.0e-4        # host work and launches per call
    margin: float = 1.1            # emulate only where predicted this much faster

    def emulated_ms(self, m: int, n: int, k: int, moduli: int, mode: str) -> float:
        gemms = moduli + (1 if mode == "accurate" else 0)
        return 1e3 * (gemms * 2.0 * m * n * k / self.int8_rate + self.operand_s * (m + n) * k
                      + self.output_s * m * n + self.fixed_s)

    def native_ms(self, m: int, n: int, k: int) -> float:
        return 1e3 * 2.0 * m * n * k / self.fp64_rate


H200_MODEL = CostModel()


def _inside(problem: Problem, entry: dict) -> bool:
    return all(lo <= v <= hi for v, (lo, hi) in
               zip((problem.m, problem.n, problem.k), (entry.get(d, ANY) for d in "mnk")))


def prefer_native(problem: Problem, mode: str, *, table: dict | None = None,
                  table_source: str = "table") -> tuple[bool, str]:
    """Whether the ``auto`` policy runs ``problem`` as native DGEMM, and why. A tuning
    table's bucket that holds a native measurement decides first (a ``native`` entry, or a
    kernel entry with ``native_ms``: native unless emulation_measured_faster); elsewhere,
    on sm_90 only, the H200 cost model decides (no other GPU has been measured: there the
    emulation is kept, unless a table from ``ozaki-cutlass tune`` on that GPU says
    otherwise)."""
    for e in (table or {}).get("entries", []):
        if e.get("arch", problem.arch.value) != problem.arch.value or not _inside(problem, e):
            continue
        if e.get("complex", False) and not problem.realified:
            continue
        if e.get("path") == "native":
            return True, f"{table_source}: native DGEMM measured faster in this bucket"
        if "native_ms" in e and "ms" in e:
            if emulation_measured_faster(e["ms"], e["native_ms"]):
                return False, f"{table_source}: emulation measured faster in this bucket"
            return True, (f"{table_source}: emulation not measured {MEASURED_MARGIN:g}x faster than "
                          "native DGEMM in this bucket")
    if problem.arch is Arch.SM90A:
        m, n, k = problem.m, problem.n, problem.k
        em, nat = H200_MODEL.emulated_ms(m, n, k, problem.moduli, mode), H200_MODEL.native_ms(m, n, k)
        if em * H200_MODEL.margin > nat:
            return True, f"H200 cost model: emulated {em:.3g} ms vs native {nat:.3g} ms"
        return False, f"H200 cost model: emulated {em:.3g} ms vs native {nat:.3g} ms"
    return False, f"no measurement for {problem.arch.value}: emulation kept"


class AutoDecisions:
    """The auto policy's decisions, native or not, per (m, n, k, mode, GPU, tuning-table
    setting), and what callers derive from them (``lanes``: the native fast lane's plans,
    keyed by what a framework gives cheaply). Both are bounded; :meth:`clear` (through
    ``ozaki_cutlass.dispatch.forget_tables``) forgets them, as it forgets the tables they
    came from."""

    LIMIT = 4096

    def __init__(self):
        self._lock = threading.Lock()
        self.native: dict[tuple, bool] = {}
        self.lanes: dict[tuple, object] = {}

    def remember(self, key: tuple, native: bool) -> None:
        with self._lock:
            if len(self.native) >= self.LIMIT:
                self.native.clear()
            self.native[key] = native

    def remember_lane(self, key: tuple, lane) -> None:
        with self._lock:
            if len(self.lanes) >= self.LIMIT:
                self.lanes.clear()
            self.lanes[key] = lane

    def clear(self) -> None:
        with self._lock:
            self.native.clear()
            self.lanes.clear()


#: The one AutoDecisions of the process.
DECISIONS = AutoDecisions()
