"""Native DGEMM (cuBLASLt) as a path of ``gemm``: whether a call takes it (the policy and
the auto decision), its plan for the call's layouts, and running it."""

from __future__ import annotations

import logging

from .. import config, dispatch
from ..device import cublas
from ..device.arrays import Matrix, overlaps
from ..device.layouts import CopyPlan, DgemmPlan, plan_copy, plan_dgemm
from ..dispatch.policy import DECISIONS

__all__ = ["decide", "native_plan", "run_native", "decision_key", "NO_LAYOUT"]

log = logging.getLogger(__name__)

#: Why policy="native" cannot run a call (cuBLAS cannot take its layouts).
NO_LAYOUT = ("policy='native': cuBLAS cannot take these layouts (each of a, b, c and out needs a unit stride "
             "along one dimension, c and out the same one, and out must not overlap a or b)")


def decision_key(m: int, n: int, k: int, mode: str, device: int, realified: bool = False) -> tuple:
    """The key of an auto decision: the shape, the mode, the GPU, the tuning table in
    force (the setting as given, read cheaply), and whether the product is a complex
    call's realified one (a table may decide those apart)."""
    return m, n, k, mode, device, config.tuning_table_setting(), realified


def decide(policy: str, emulation_asked: bool, problem: dispatch.Problem, mode: str, device: int,
           table: tuple[dict, str]) -> tuple[bool, str]:
    """(run cuBLAS DGEMM?, why) for gemm's ``policy``; ``emulation_asked``: the call named
    moduli, a kernel or a path; ``table``: dispatch.load_table()'s (table, source). An
    auto decision is remembered for the native fast lane."""
    if policy == "native":
        cublas.library()  # raises NativeUnavailable, saying what was looked for, when absent
        return True, "policy='native'"
    if policy == "emulate" or emulation_asked:
        return False, "emulation asked for"
    native, why = dispatch.prefer_native(problem, mode, table=table[0], table_source=table[1])
    if native and not cublas.available():
        log.info("auto policy: %s, but cuBLAS is not available here; emulating", why)
        return False, why + "; cuBLAS not available"
    DECISIONS.remember(decision_key(problem.m, problem.n, problem.k, mode, device, problem.realified), native)
    return native, why


def native_plan(A: Matrix, B: Matrix, C: Matrix | None, O: Matrix,
                beta: float) -> tuple[DgemmPlan, CopyPlan | None] | None:
    """(DGEMM plan, c copy plan or None) when cuBLAS can run C = alpha A B + beta c into O
    with these layouts (c first copied into O unless it is O), else None."""
    if overlaps(O, A) or overlaps(O, B):  # cuBLAS must not write what it reads
        return None
    plan = plan_dgemm(A, B, O)
    if plan is None:
        return None
    copy = None
    if C is not None and beta != 0.0 and (C.ptr, C.rs, C.cs) != (O.ptr, O.rs, O.cs):
        copy = plan_copy(C, O, O.rows, O.cols)
        if copy is None:
            return None
    return plan, copy


def run_native(plan: tuple[DgemmPlan, CopyPlan | None], alpha: float, beta: float, stream: int) -> None:
    dgemm_plan, copy = plan
    if copy is not None:
        cublas.run_copy(copy, stream)
    cublas.dgemm(dgemm_plan, alpha, beta, stream)  # beta != 0 only with c (checked)
