"""The accuracy contract on the GPU (ozaki_cutlass.numerics.contract): before the scale
stage of a call without an explicit moduli count, the inner statistics of both operands,
the equilibration, the scan of the equilibrated operands and the certificate, then one
read of 14 doubles and the choice on the host, made by the same function as the
reference's from the same numbers. The scan's results are kept for the scale stage
(:class:`Prescan`). The inner statistics' read of A and B also makes the scan's first pass
(each vector's exponent and non-finite count), which stands unless the equilibration is
applied: so a contract call reads A and B as often as a call with an explicit count,
plus a few tiny kernels, and once more where it equilibrates."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..device import driver
from ..device.workspace import Fork, Workspace
from ..numerics.contract import Certificate, Choice, choose
from ..operands.stages import OperandBuffers, VectorSet, needs_pack, vectors_of
from ..templates.constants import INNER_CHUNK

__all__ = ["Prescan", "SideScan", "Pending", "Guesses", "GUESSES", "start_contract", "run_contract",
           "contract_buffers"]


#: The doubles the certificate kernel writes and the host reads (Certificate.from_values).
CERTIFICATE_VALUES = 14


@dataclass(frozen=True, slots=True)
class SideScan:
    """One operand after the contract's scan: its vector set, inner shifts (device int32 per
    l; 0 when the equilibration is not applied) and the scan's per-vector buffers."""

    vectors: VectorSet
    inner: int
    exps: int
    logq: int
    nonfinite: int


@dataclass(frozen=True, slots=True)
class Prescan:
    """Both operands' SideScan, for the scale stage of the chosen count."""

    a: SideScan
    b: SideScan


def contract_buffers(name: str, nvec: int, k: int) -> dict[str, int]:
    """The workspace buffers (name -> bytes) the contract adds for one operand ("a" or "b");
    the shared ones come with name "". The footprint (paths.footprint) counts them."""
    if not name:
        return {"eq_shift": 8 * k, "eq_applied": 16, "certificate": 8 * CERTIFICATE_VALUES}
    runs = -(-nvec // INNER_CHUNK)
    return {f"inner_part_{name}": 8 * runs * k, f"inner_pexp_{name}": 4 * runs * k, f"inner_e_{name}": 4 * k,
            f"inner_s_{name}": 8 * k, f"logq_{name}": 4 * nvec, f"s1_{name}": 8 * nvec}


@dataclass(frozen=True, slots=True)
class Pending:
    """The contract's stages enqueued, their certificate on its way to the host (``read``):
    :meth:`choose` waits for that copy alone, so work enqueued after it (a guess's run) goes
    on meanwhile. ``prescan``: the scan's results with the inner shifts as enqueued;
    :meth:`prescan_for` drops the shifts where no equilibration applies."""

    prescan: Prescan
    read: driver.PinnedRead
    m: int
    n: int
    k: int

    def choose(self, target: float, mode: str, may_fall_back: bool) -> Choice:
        values = self.read.wait()
        return choose(Certificate.from_values(values, self.m, self.n, self.k), target, mode, may_fall_back)

    def prescan_for(self, equilibrated: bool) -> Prescan:
        """The prescan for a run whose choice did (shifts kept) or did not equilibrate (the
        shifts are then all 0 and the later stages need not read them)."""
        if equilibrated:
            return self.prescan
        a, b = self.prescan.a, self.prescan.b
        return Prescan(SideScan(a.vectors, 0, a.exps, a.logq, a.nonfinite),
                       SideScan(b.vectors, 0, b.exps, b.logq, b.nonfinite))


def start_contract(st, A, B, m: int, n: int, k: int, sh: int, ws: Workspace, overlap: bool) -> Pending:
    """The contract's stages for op(A) (m x k device Matrix) and op(B) (k x n), m, n, k >= 1,
    on stream ``sh`` (B's side on the workspace's second stream when ``overlap``), and the
    start of the one read of their certificate."""
    sides = []
    for name, X, nvec, vs, es in (("a", A, m, A.rs, A.cs), ("b", B, n, B.cs, B.rs)):
        bufs = contract_buffers(name, nvec, k)
        ob = OperandBuffers(X=X, nvec=nvec, vs=vs, es=es, rows_pad=nvec,
                            packed=ws.get("pack_" + name, 8 * nvec * k) if needs_pack(nvec, k, es) else 0,
                            exps=ws.get("e" + name, 4 * nvec), fast=0, nonfinite=ws.get("nf_" + name, 4 * nvec),
                            coarse=0)
        sides.append((name, ob, {key: ws.get(key, size) for key, size in bufs.items()}))
    shared = {key: ws.get(key, size) for key, size in contract_buffers("", 0, k).items()}
    made: dict[str, VectorSet] = {}
    with Fork(ws, sh, overlap) as side:
        for name, ob, b in reversed(sides):
            s = side if name == "b" else sh
            v = made[name] = vectors_of(st, ob, k, s)
            st.inner_stats(*v, b[f"inner_part_{name}"], b[f"inner_pexp_{name}"], b[f"inner_e_{name}"],
                           b[f"inner_s_{name}"], s, vec_exps=ob.exps, vec_nonfinite=ob.nonfinite)
    (_, oa, ba), (_, ob_, bb) = sides
    shift_a, shift_b = shared["eq_shift"], shared["eq_shift"] + 4 * k
    st.equilibrate(ba["inner_e_a"], bb["inner_e_b"], k, shift_a, shift_b, shared["eq_applied"], sh)
    with Fork(ws, sh, overlap) as side:
        for name, ob, b, inner in (("b", ob_, bb, shift_b), ("a", oa, ba, shift_a)):
            st.scan(*made[name], 0, ob.exps, 0, ob.nonfinite, side if name == "b" else sh, inner=inner,
                    logq=b[f"logq_{name}"], abs_sum=b[f"s1_{name}"], given=shared["eq_applied"])
    st.certificate((oa.exps, ba["logq_a"], ba["s1_a"], m), (ob_.exps, bb["logq_b"], bb["s1_b"], n),
                   (ba["inner_e_a"], ba["inner_s_a"]), (bb["inner_e_b"], bb["inner_s_b"]), k, shared["eq_applied"],
                   shared["certificate"], sh)
    read = ws.pinned_read(CERTIFICATE_VALUES)
    read.start(shared["certificate"], sh)
    pre = Prescan(SideScan(made["a"], shift_a, oa.exps, ba["logq_a"], oa.nonfinite),
                  SideScan(made["b"], shift_b, ob_.exps, bb["logq_b"], ob_.nonfinite))
    return Pending(pre, read, m, n, k)


def run_contract(st, A, B, m: int, n: int, k: int, target: float, mode: str, may_fall_back: bool,
                 sh: int, ws: Workspace, overlap: bool) -> tuple[Choice, Prescan]:
    """:func:`start_contract`, then the choice (numerics.contract.choose) and what the scale
    stage reuses."""
    pending = start_contract(st, A, B, m, n, k, sh, ws, overlap)
    choice = pending.choose(target, mode, may_fall_back)
    return choice, pending.prescan_for(choice.equilibrated)


class Guesses:
    """What the contract chose for the last calls of each key (the GPU, the shape, the
    target, the mode, whether it may fall back): a call whose last two such calls made one
    choice runs that choice while its own certificate is on its way (execute.py), and
    runs again only where its choice differs. So a steady loop of calls never waits with
    the GPU idle for the host's choice, and a changed choice costs one run more, once."""

    LIMIT = 256  # keys kept; beyond that the one recorded longest ago is forgotten

    def __init__(self):
        self._last: OrderedDict[tuple, tuple[Choice, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def guess(self, key: tuple) -> Choice | None:
        """The choice the last two calls of ``key`` agreed on (an emulation), else None."""
        with self._lock:
            last = self._last.get(key, ())
        if len(last) == 2 and self.same(*last) and not last[1].native:
            return last[1]
        return None

    def record(self, key: tuple, choice: Choice) -> None:
        with self._lock:
            self._last[key] = self._last.pop(key, ())[-1:] + (choice,)  # now the newest
            if len(self._last) > self.LIMIT:
                self._last.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._last.clear()

    @staticmethod
    def same(a: Choice, b: Choice) -> bool:
        """The two choices run the same emulation, to the bit: count, mode and equilibration."""
        return (a.native, a.moduli, a.mode, a.equilibrated) == (b.native, b.moduli, b.mode, b.equilibrated)


#: The process's memory of the contract's choices.
GUESSES = Guesses()
