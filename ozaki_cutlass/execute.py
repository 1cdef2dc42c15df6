"""Running a validated ``gemm`` call (:class:`~ozaki_cutlass.call.Call`) on its GPU: the
native-or-emulate decision, uploads and the result in kind, the accuracy contract, the
path's launches, timings. ``ozaki_cutlass.gemm`` (real) and the complex layer
(``ozaki_cutlass.complex_gemm``) both end here.
"""

from __future__ import annotations

import dataclasses

from . import config, dispatch
from .call import Call
from .device import driver
from .device.arch import visible_arch
from .device.arrays import DeviceArray, allocate_like, current_stream, upload
from .device.workspace import WORKSPACES
from .numerics.contract import Choice, warn
from .paths.contract import run_contract
from .paths.fused import run_fused
from .paths.launch import KernelSet, Launch, PhaseTimer, resolve_kernels
from .paths.native import NO_LAYOUT, decide, native_plan, run_native
from .paths.prologue import run_prologue
from .paths.scale import zero_result
from .paths.staged import run_staged

__all__ = ["execute"]

_RUNS = {"staged": run_staged, "fused": run_fused, "prologue": run_prologue}


def execute(call: Call):
    """Run a validated call on its GPU; the caller's current GPU is current again after."""
    m, n, k = call.m, call.n, call.k
    with driver.on_device(call.device):
        arch = visible_arch(call.device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {call.device} is not supported (compute capability 8.0 or newer needed)")
        table = dispatch.load_table()
        problem = dispatch.Problem(m, n, k, call.moduli, arch, call.realified)
        native, why = decide(call.policy, call.emulation_asked, problem, call.mode, call.device, table)
        kern = None if native else resolve_kernels(call.variant, call.path, arch, problem, table)
        sh = current_stream(call.kind, call.stream, call.device)
        keep: list = []
        A, B, C = call.A, call.B, call.C
        if call.on_host:
            A = A if "a" in call.prepared else upload(call.a, keep)
            B = B if "b" in call.prepared else upload(call.b, keep)
            C = upload(call.c, keep) if call.c is not None and call.beta != 0.0 else None  # beta == 0: c is not read
        A = A.t() if call.trans_a else A
        B = B.t() if call.trans_b else B
        for X in (A, B, C):  # CUDA array interface v3: order after the producers' streams
            if X is not None and X.stream is not None:
                driver.order_after(X.stream, sh)
        if call.out is not None and not call.on_host:
            result, O = call.out, call.O
        else:
            result, O = allocate_like("numpy" if call.on_host else call.kind, m, n, call.device)
        if isinstance(result, DeviceArray):
            result.stream = sh
        plan = native_plan(A, B, C, O, call.beta) if native else None
        if native and plan is None:
            if call.policy == "native":
                raise ValueError(NO_LAYOUT)
            native, why = False, "cuBLAS cannot take these layouts"
            kern = resolve_kernels(call.variant, call.path, arch, problem, table)
        timer = PhaseTimer(sh, call.timings is not None)
        timer.mark("start")
        choice = None
        if not native and m and n:
            launch = Launch(A=A, B=B, C=C, O=O, m=m, n=n, k=k, alpha=call.alpha, beta=call.beta,
                            moduli=call.moduli, mode=call.mode, stream=sh, prepared=call.prepared,
                            realified=call.realified)
            fallback = None
            if call.target is not None and call.may_fall_back:
                fallback = native_plan(A, B, C, O, call.beta)
            choice = _emulate(kern, launch, call.device, timer, call.target, fallback is not None)
            if choice is not None and choice.native:
                native, why, plan = True, choice.reason, fallback
        if native:
            run_native(plan, call.alpha, call.beta, sh)
            timer.mark("native")
        else:
            timer.mark("crt")
        if call.timings is not None:
            if native:
                call.timings.update(timer.result(), path="native", kernel="cublasDgemm_v2", policy=why)
            else:
                call.timings.update(timer.result(), path=kern.path, kernel=kern.variant.name,
                                    moduli=choice.moduli if choice else call.moduli,
                                    mode=choice.mode if choice else call.mode, **timer.notes)
            if choice is not None:
                call.timings["contract"] = choice.as_dict()
        if call.on_host:
            driver.synchronize(sh)
            value = result.get()
            if call.out is None:
                return value
            call.out[...] = value
            return call.out
        return result


def _emulate(kern: KernelSet, launch: Launch, device: int, timer: PhaseTimer, target: float | None,
             may_fall_back: bool) -> Choice | None:
    """Run the emulation of ``launch``; under the accuracy contract (``target`` set) choose
    its moduli count and mode first and return the Choice (without running anything when
    it falls back to native DGEMM: the caller runs that)."""
    ws = WORKSPACES.get(device, launch.stream)
    overlap = config.overlap()  # A's and B's operands on two streams (OZAKI_OVERLAP=0: one); same bits
    with ws.lock:
        if launch.alpha == 0.0 or launch.k == 0:
            zero_result(kern.stages, launch, ws)
            return None
        choice = None
        if target is not None:
            choice, pre = run_contract(kern.stages, launch.A, launch.B, launch.m, launch.n, launch.k, target,
                                       launch.mode, may_fall_back, launch.stream, ws, overlap)
            if choice.native:
                return choice
            warn(choice, stacklevel=4)
            launch = dataclasses.replace(launch, moduli=choice.moduli, mode=choice.mode, prescan=pre)
        _RUNS[kern.path](kern, launch, ws, timer, overlap)
        return choice
