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
from .paths.contract import GUESSES, Guesses, start_contract
from .paths.fused import run_fused
from .paths.launch import KernelSet, Launch, PhaseTimer, replay_key, resolve_kernels
from .paths.native import NO_LAYOUT, decide, native_plan, run_native
from .paths.prologue import run_prologue
from .paths.replay_lane import lane_stream_key, learn
from .paths.scale import zero_result
from .paths.staged import run_staged
from .paths.staged_batch import run_staged_batch

__all__ = ["execute", "execute_batch"]

_RUNS = {"staged": run_staged, "fused": run_fused, "prologue": run_prologue}


def execute(call: Call):
    """Run a validated call on its GPU; the caller's current GPU is current again after."""
    m, n, k = call.m, call.n, call.k
    with driver.on_device(call.device):
        arch = visible_arch(call.device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {call.device} is not supported (compute capability 8.0 or newer needed)")
        table = dispatch.load_table()
        problem = dispatch.Problem(m, n, k, call.moduli, arch, call.realified, contract=call.target is not None)
        native, why = decide(call.policy, call.emulation_asked, problem, call.mode, call.device, table)
        kern = None if native else resolve_kernels(call.variant, call.path, arch, problem, table)
        sh = current_stream(call.kind, call.stream, call.device)
        keep: list = []
        A, B, C = call.A, call.B, call.C
        if call.on_host:
            A = A if "a" in call.prepared else upload(call.a, keep)
            B = B if "b" in call.prepared else upload(call.b, keep)
            C = upload(call.c, keep) if call.c is not None and call.beta != 0.0 else None  # beta == 0: c is not read
        A, B = _ordered(A, B, C, call.trans_a, call.trans_b, sh, None if call.on_host else call.O)
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
            lane = call.lane if call.lane is not None and _unordered(call, sh) else None
            choice = _emulate(kern, launch, call.device, timer, call.target, fallback is not None, lane)
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


def _ordered(A, B, C, trans_a: bool, trans_b: bool, sh: int, O=None):
    """op(A) and op(B) (a transpose is in the strides), with the work on ``sh`` ordered
    after the streams that produced A, B and C, and that last used ``out`` (O: work there
    may still write or read it), as their CUDA array interface v3 says."""
    A = A.t() if trans_a else A
    B = B.t() if trans_b else B
    for X in (A, B, C, O):
        if X is not None and X.stream is not None:
            driver.order_after(X.stream, sh)
    return A, B


def _unordered(call: Call, sh: int) -> bool:
    """Whether the call's operands ask for no wait before ``sh`` (no CUDA array interface
    stream, or ``sh`` itself): what a replay lane may skip (paths.replay_lane)."""
    main = driver.canonical_stream(sh)
    return all(X is None or X.stream is None or driver.canonical_stream(X.stream) == main
               for X in (call.A, call.B, call.O))


def _emulate(kern: KernelSet, launch: Launch, device: int, timer: PhaseTimer, target: float | None,
             may_fall_back: bool, lane: tuple | None = None) -> Choice | None:
    """Run the emulation of ``launch``; under the accuracy contract (``target`` set) choose
    its moduli count and mode first and return the Choice (without running anything when
    it falls back to native DGEMM: the caller runs that). ``lane``: the call's replay lane
    key, under which a replayed call is kept for later ones (paths.replay_lane).

    While the contract's certificate is on its way to the host, the choice the last two
    calls of the same key agreed on (paths.contract.Guesses) already runs, where C is not
    read (beta == 0: a second run would otherwise read the first one's result); where the
    call's own choice differs, its run follows and overwrites the result. The bits are
    those of the call's own choice either way; ``timings["speculation"]`` says "hit" or
    "miss". ``OZAKI_SPECULATE=0`` turns this off."""
    overlap = config.overlap()  # A's and B's operands on two streams (OZAKI_OVERLAP=0: one); same bits
    run = _RUNS[kern.path]
    with WORKSPACES.hold(device, launch.stream, None if lane is None else lane_stream_key(lane)) as ws:
        capturing = _caller_capture(ws, target)
        if launch.alpha == 0.0 or launch.k == 0:
            zero_result(kern.stages, launch, ws)
            return None
        if target is None:
            how, key = _run_or_replay(run, kern, launch, ws, timer, overlap, capturing)
            if lane is not None and how != "direct":
                learn(lane, ws, key, launch, overlap, device)
            return None
        pending = start_contract(kern.stages, launch.A, launch.B, launch.m, launch.n, launch.k, launch.stream, ws,
                                 overlap)
        key = (device, launch.m, launch.n, launch.k, target, launch.mode, may_fall_back)
        guess = GUESSES.guess(key) if launch.beta == 0.0 and config.speculate() else None
        if guess is not None:
            _run(run, kern, _chosen(launch, guess, pending.prescan_for(guess.equilibrated)), ws, timer, overlap)
        choice = pending.choose(target, launch.mode, may_fall_back)
        GUESSES.record(key, choice)
        hit = guess is not None and Guesses.same(guess, choice)
        if guess is not None:
            timer.notes["speculation"] = "hit" if hit else "miss"
        if choice.native:
            return choice
        warn(choice)
        if not hit:
            _run(run, kern, _chosen(launch, choice, pending.prescan_for(choice.equilibrated)), ws, timer, overlap)
        return choice


#: Why a call under the accuracy contract cannot run into the caller's CUDA graph capture.
CAPTURED_CONTRACT = ("a call under the accuracy contract reads its certificate back to the host, which cannot "
                     "happen while its stream is being captured into a CUDA graph: pass moduli= (an explicit "
                     "count) to call it under a capture")

#: Why ozaki_cutlass.contract cannot run on a stream the caller is capturing.
CAPTURED_QUESTION = ("ozaki_cutlass.contract reads the certificate back to the host, which cannot happen while its "
                     "stream is being captured into a CUDA graph: ask outside the capture")


def _caller_capture(ws, target: float | None) -> bool:
    """Whether the call is captured into the caller's own CUDA graph: its stream's
    workspace is then the capture one, pinned from the start (the graph keeps its buffers'
    addresses; device.workspace), known when the pool looked the stream up. A call under
    the contract (``target`` set) is refused there: it reads back."""
    if not ws.captured:
        return False
    if target is not None:
        raise ValueError(CAPTURED_CONTRACT)
    return True


def _run(run, kern: KernelSet, launch: Launch, ws, timer: PhaseTimer, overlap: bool) -> None:
    """The path's whole run: its launches, then its finish (paths.launch.Finish)."""
    finish = run(kern, launch, ws, timer, overlap)
    if finish is not None:
        finish(launch)


def _run_or_replay(run, kern: KernelSet, launch: Launch, ws, timer: PhaseTimer, overlap: bool,
                   capturing: bool) -> tuple[str, object]:
    """``run`` the call, or, where a call with the same operands, shape and settings came
    before, replay its launches up to the finish as a CUDA graph (device.graphs.Replays)
    and launch the call's own finish (its O, C, alpha, beta) after: the same bits. Not
    with ``timings`` (the phases' events), under the caller's own capture of the stream
    (``capturing``), or with ``OZAKI_GRAPHS=0``. Returns how it ran ("direct", "captured",
    "replayed") and the graph's key (None where it ran directly without one)."""
    key = None if timer.enabled or not config.graphs() else replay_key(kern, launch, overlap)
    if key is None or capturing:
        _run(run, kern, launch, ws, timer, overlap)
        return "direct", None

    def work(stream: int):
        return run(kern, launch if stream == launch.stream else dataclasses.replace(launch, stream=stream), ws,
                   timer, overlap)

    how, finish = ws.replays.run(key, launch.stream, ws.capture_stream, work)
    finish(launch)
    return how, key


def _chosen(launch: Launch, choice: Choice, prescan) -> Launch:
    """``launch`` with the contract's choice and the scan it made."""
    return dataclasses.replace(launch, moduli=choice.moduli, mode=choice.mode, prescan=prescan)


def execute_batch(calls: list[Call]) -> dict | None:
    """Run the validated calls of one batch (ozaki_cutlass.batched: one shape and one set
    of options, each element its own out): on GPU operands that emulate where the
    dispatcher runs the element shape on the staged path, with one INT8 GEMM launch per
    k chunk for many elements (paths.staged_batch); otherwise each with :func:`execute`
    (where it picks the fused path a loop of fused calls measured faster than the
    staged batch: docs/benchmarks.md, "Batched GEMM"). Returns the batch's
    timings (phases summed; {} where the calls asked for none) when it ran as one batch,
    else None (each call filled its own)."""
    first = calls[0]
    m, n, k = first.m, first.n, first.k
    staged = first.path in (None, "staged") and (first.variant is None or dispatch.path_of(first.variant) == "staged")
    if first.on_host or first.prepared or first.realified or not staged or len(calls) < 2 \
            or not (m and n and k) or first.alpha == 0.0:
        for call in calls:
            execute(call)
        return None
    with driver.on_device(first.device):
        arch = visible_arch(first.device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {first.device} is not supported (compute capability 8.0 or newer needed)")
        table = dispatch.load_table()
        problem = dispatch.Problem(m, n, k, first.moduli, arch, contract=first.target is not None)
        native, _ = decide(first.policy, first.emulation_asked, problem, first.mode, first.device, table)
        if native:
            for call in calls:
                execute(call)
            return None
        kern = resolve_kernels(first.variant, first.path, arch, problem, table)
        if kern.path != "staged":   # where the dispatcher runs an element fused, element by element is faster
            for call in calls:
                execute(call)
            return None
        sh = current_stream(first.kind, first.stream, first.device)
        launches = []
        for call in calls:
            A, B = _ordered(call.A, call.B, call.C, call.trans_a, call.trans_b, sh, call.O)
            if isinstance(call.out, DeviceArray):
                call.out.stream = sh
            launches.append(Launch(A=A, B=B, C=call.C if call.beta != 0.0 else None, O=call.O, m=m, n=n, k=k,
                                   alpha=call.alpha, beta=call.beta, moduli=call.moduli, mode=call.mode, stream=sh))
        plans = [None] * len(launches)
        if first.target is not None and first.may_fall_back:
            plans = [native_plan(L.A, L.B, L.C, L.O, L.beta) for L in launches]
        timer = PhaseTimer(sh, first.timings is not None)
        timer.mark("start")
        with WORKSPACES.hold(first.device, sh) as ws:
            _caller_capture(ws, first.target)
            choices, launched = run_staged_batch(kern, launches, ws, timer, first.target,
                                                 all(p is not None for p in plans), config.overlap())
        fell_back = [i for i, choice in enumerate(choices) if choice is not None and choice.native]
        for i in fell_back:   # the contract's native fallback, element by element
            run_native(plans[i], launches[i].alpha, launches[i].beta, sh)
        timer.mark("native" if fell_back else "crt")
        if first.timings is None:
            return {}
        counts = sorted({(c.moduli, c.mode) if c is not None else (first.moduli, first.mode)
                         for c in choices if c is None or not c.native})
        out = dict(timer.result(), path="staged", kernel=kern.variant.name, int8_launches=launched,
                   batched=f"one INT8 GEMM launch per k chunk for up to {len(calls)} elements")
        if len(counts) == 1:
            out.update(moduli=counts[0][0], mode=counts[0][1])
        else:
            out.update(moduli=[c[0] for c in counts], mode=[c[1] for c in counts])
        if first.target is not None:
            out["contract"] = [c.as_dict() for c in choices]
        if fell_back:
            out["native_elements"] = fell_back
        return out
