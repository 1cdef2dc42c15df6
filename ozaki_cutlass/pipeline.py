"""``ozaki_cutlass.gemm``: the staged Ozaki-II pipeline on the GPU.

Stages (each mirrors a function of ``ozaki_cutlass.reference``, bit for bit):
scan (exponents, fast shifts, non-finite counts) -> [accurate: coarse int8 operands,
one INT8 GEMM, accurate shifts] -> residues (int8, TN layout, k padded to 16) -> one
batched INT8 GEMM over the moduli per k chunk -> CRT reconstruction + undo scaling +
alpha/beta (+ the NaN/Inf pattern where the inputs have non-finite values).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _cublas, _cuda, dispatch
from ._device import visible_arch
from .arrays import Matrix, allocate_like, describe_input
from .generator import GemmVariant, default_variant, environment
from .kernels import load_group_gemm, load_int8_gemm
from .numerics import K_CHUNK, MODULI_TABLE, crt_constants, group_sizes, partial_bytes
from .prepared import Prepared
from .reference import _as_scalar, resolve_moduli, validate_mode
from .stages import CNonfiniteSource
from .stages_build import load_stages

log = logging.getLogger(__name__)

PHASES = ("scale", "residues", "int8_gemm", "crt", "total")
POLICIES = ("auto", "emulate", "native")
MAX_DIM = 2**31 - 1 - 256  # int sizes in the kernels, with room for padding


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


class Workspace:
    """Grow-only device buffers by name, one set per (context, stream): reused across
    calls so a steady loop of gemm calls allocates nothing. ``lock`` is held while a call
    enqueues its work: two threads on one stream then enqueue whole calls one after the
    other, and stream order keeps each call's buffers to itself."""

    def __init__(self):
        self.lock = threading.Lock()
        self._buffers: dict[str, _cuda.DeviceBuffer] = {}
        self._moduli: _cuda.DeviceBuffer | None = None
        self._side = None

    def side_stream(self) -> tuple[int, object, object]:
        """A second stream (non-blocking) and two events for forking work off the main
        stream and joining it back; created on first use, kept."""
        if self._side is None:
            cu = _cuda._driver()
            flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
            self._side = (int(_cuda.new_stream()), _cuda.check(cu.cuEventCreate(flags), "cuEventCreate"),
                          _cuda.check(cu.cuEventCreate(flags), "cuEventCreate"))
        return self._side

    def moduli(self) -> int:
        """The whole moduli table as device int32, uploaded once: N moduli are its first N."""
        if self._moduli is None:
            table = np.array(MODULI_TABLE, dtype=np.int32)
            self._moduli = _cuda.DeviceBuffer(table.nbytes)
            self._moduli.upload(table)  # synchronous: done before any kernel reads it
        return self._moduli.ptr

    def get(self, name: str, nbytes: int) -> int:
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            if buf is not None:
                buf.close()
                del self._buffers[name]
            try:
                buf = _cuda.DeviceBuffer(max(nbytes, 16))
            except _cuda.CudaError as exc:
                held = sum(b.nbytes for b in self._buffers.values())
                raise MemoryError(f"the emulation needs {nbytes / 2**30:.2f} GiB more device memory for "
                                  f"'{name}' (its workspace already holds {held / 2**30:.2f} GiB): {exc}") from exc
            self._buffers[name] = buf
        return buf.ptr


_WORKSPACES: dict[tuple[int, int], Workspace] = {}
_WS_LOCK = threading.Lock()


def _workspace(device: int, stream: int) -> Workspace:
    with _WS_LOCK:
        return _WORKSPACES.setdefault((device, stream), Workspace())


@dataclass
class _Kernels:
    path: str           # "staged", "fused" or "prologue"
    variant: object     # the GemmVariant chosen (prologue: the PrologueVariant)
    stages: object
    gemm: object = None  # staged: the INT8 GEMM (prologue: the coarse-bound GEMM)
    prologue: object = None  # prologue: the loaded prologue kernel (ozaki_cutlass.prologue)


def check_sizes(**dims: int) -> None:
    """ValueError for a dimension the kernels cannot index (they use int sizes, with room
    for padding)."""
    for dim, value in dims.items():
        if value > MAX_DIM:
            raise ValueError(f"{dim}={value} is out of range: the kernels take sizes up to {MAX_DIM}")


def _requested_variant(kernel, path) -> GemmVariant | None:
    """gemm's ``kernel=`` as a GemmVariant (None: the dispatcher chooses), checked against
    ``path`` before anything touches the GPU."""
    if kernel is None:
        return None
    if isinstance(kernel, str):
        variant = dispatch.variant_by_name(kernel, "kernel=")
    elif isinstance(kernel, GemmVariant):
        variant = kernel
    else:
        raise TypeError(f"kernel must be None, a variant name or a GemmVariant, got {type(kernel).__name__}")
    if path is not None and path != dispatch.path_of(variant):
        raise ValueError(f"kernel {variant.name} runs the {dispatch.path_of(variant)} path, path={path!r} was asked")
    return variant


def _resolve_kernels(variant, path, arch, m, n, k, count, table) -> _Kernels:
    """The kernels of the call; ``table``: dispatch.load_table()'s (table, source)."""
    if path == "prologue":  # opt-in prototype, never dispatched (ozaki_cutlass/prologue.py)
        from . import prologue

        lib = prologue.load_prologue_gemm()
        return _Kernels(path="prologue", variant=lib.variant, stages=load_stages(arch),
                        gemm=load_int8_gemm(default_variant(arch)), prologue=lib)
    if variant is None:
        choice = dispatch.choose(dispatch.Problem(m, n, k, count, arch), table=table[0],
                                 table_source=table[1], path=path)
        variant, chosen_path = choice.variant, choice.path
    else:
        chosen_path = dispatch.path_of(variant)
        why = dispatch.Candidate(path=chosen_path, variant=variant).rejection(
            dispatch.Problem(m, n, k, count, arch))
        if why is not None:
            raise ValueError(f"kernel {variant.name} cannot run m={m}, n={n}, k={k}: {why}")
    stages = load_stages(variant.arch)
    if chosen_path == "staged":
        return _Kernels(path="staged", variant=variant, stages=stages, gemm=load_int8_gemm(variant))
    return _Kernels(path="fused", variant=variant, stages=stages)


@functools.cache
def _group_kernel(variant: GemmVariant, size: int):
    """The fused kernel of ``variant``'s tiles for a group of ``size`` moduli (loaded once
    per process)."""
    return load_group_gemm(dataclasses.replace(variant, group_size=size))


def _default_stream(kind: str, stream, device: int = 0) -> int:
    """``stream`` as a handle, else the framework's current stream on ``device`` (the GPU
    holding the arrays, which need not be the framework's current one), else the legacy
    default stream."""
    if stream is not None:
        return _cuda.stream_handle(stream)
    if kind == "torch":
        import torch

        return int(torch.cuda.current_stream(device).cuda_stream)
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


@dataclass
class _Timer:
    stream: int
    enabled: bool
    marks: list = field(default_factory=list)

    def mark(self, name: str) -> None:
        if not self.enabled:
            return
        cu = _cuda._driver()
        ev = _cuda.check(cu.cuEventCreate(0), "cuEventCreate")
        _cuda.check(cu.cuEventRecord(ev, _cuda.as_cu_stream(self.stream)), "cuEventRecord")
        self.marks.append((name, ev))

    def result(self) -> dict:
        cu = _cuda._driver()
        _cuda.check(cu.cuEventSynchronize(self.marks[-1][1]), "cuEventSynchronize")
        out = {p: 0.0 for p in PHASES}
        for (_, e0), (name, e1) in zip(self.marks, self.marks[1:]):
            out[name] = out.get(name, 0.0) + float(_cuda.check(cu.cuEventElapsedTime(e0, e1), "cuEventElapsedTime"))
        out["total"] = float(_cuda.check(cu.cuEventElapsedTime(self.marks[0][1], self.marks[-1][1]),
                                         "cuEventElapsedTime"))
        for _, ev in self.marks:
            cu.cuEventDestroy(ev)
        return out


def _to_device(x: np.ndarray, keep: list) -> Matrix:
    host = np.ascontiguousarray(x, dtype=np.float64)
    buf = _cuda.DeviceBuffer(host.nbytes)
    buf.upload(host)
    keep.append(buf)
    return Matrix(buf.ptr, host.shape[0], host.shape[1], host.shape[1], 1, "numpy", None, buf)


def gemm(a, b, *, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, moduli=None,
         mode=None, out=None, stream=None, kernel=None, path=None, policy="auto", timings=None):
    """C = alpha op(A) op(B) + beta C, FP64-accurate, on INT8 tensor cores.

    Same semantics, defaults and bits as :func:`ozaki_cutlass.reference.gemm`. ``a``,
    ``b`` (and ``c``, ``out``) are NumPy arrays (copied to the GPU and back), CuPy arrays,
    PyTorch CUDA tensors, or objects with ``__cuda_array_interface__``; all float64, any
    positive strides. The result is of the kind given (a new array, or ``out``). Work runs
    on ``stream`` (default: the framework's current stream, else the legacy default
    stream). Device results come back without waiting for the GPU (the NaN/Inf pattern is
    decided on the device); NumPy results, and ``timings``, wait. The dispatcher picks the kernel by
    shape and arch (ozaki_cutlass.dispatch); ``kernel`` (a variant name or GemmVariant)
    and ``path`` ("staged" or "fused") override it; ``path="prologue"`` runs the opt-in
    tile-local prologue prototype (ozaki_cutlass.prologue; never chosen otherwise). Every
    choice gives the same bits.

    ``policy``: "auto" (default) runs native cuBLAS DGEMM instead of the emulation where
    that is measured (tuning table) or, on sm_90 outside any table, predicted (H200 cost
    model) to be faster, so that calling this function never loses to DGEMM; it does so
    only when ``moduli``, ``kernel`` and ``path`` are all left unset (an explicit moduli
    count asks for that emulation) and cuBLAS can take the layouts. Native results carry
    DGEMM's accuracy (the emulation at the default 15 moduli is about 10x more accurate
    on the benchmark inputs) and cuBLAS's bits, not the reference's. A shape's decision is
    remembered until ozaki_cutlass.dispatch.forget_tables() (call it after changing
    OZAKI_TUNING_TABLE or rewriting the table in a running process). "emulate" always
    emulates (bits equal to ozaki_cutlass.reference.gemm); "native" always runs cuBLAS.
    ``timings``: a dict to fill with per-phase milliseconds (synchronizes); its "path" is
    "staged", "fused" or "native" ("policy" says why for native).

    ``a`` and ``b`` may be operands made by :func:`ozaki_cutlass.prepare` (side "left"
    for ``a``, "right" for ``b``): their per-operand stages are not redone. Such a call
    emulates on the staged path, takes ``moduli`` and ``mode`` from the prepared operand
    when they are left unset, and refuses (ValueError) a mismatch of side, k, moduli,
    mode, GPU or a trans flag. ``mode`` unset means "accurate" otherwise.
    """
    alpha = _as_scalar(alpha, "alpha")
    beta = _as_scalar(beta, "beta")
    if (policy == "auto" and c is None and out is None and moduli is None and kernel is None and path is None
            and timings is None and stream is None and not trans_a and not trans_b and beta == 0.0
            and mode in (None, "accurate", "fast")):
        result = _native_fast_lane(a, b, alpha, mode or "accurate")
        if result is not None:
            return result
    if path is not None and path not in dispatch.PATHS + ("prologue",):
        raise ValueError(f"path must be one of {dispatch.PATHS + ('prologue',)} or None, got {path!r}")
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    for name, flag in (("trans_a", trans_a), ("trans_b", trans_b)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {type(flag).__name__}")
    prepared = {name: x for name, x in (("a", a), ("b", b)) if isinstance(x, Prepared)}
    if path == "prologue":
        from .prologue import refusal

        why = refusal(prepared=bool(prepared), kernel=kernel)
        if why is not None:
            raise ValueError(why)
    for name, p in prepared.items():
        p.check_side(name)
    first = next(iter(prepared.values()), None)
    count = resolve_moduli(moduli if moduli is not None or first is None else first.moduli)
    mode = validate_mode(mode if mode is not None else (first.mode if first is not None else "accurate"))
    if prepared:
        if trans_a and "a" in prepared or trans_b and "b" in prepared:
            raise ValueError("a prepared operand is transposed by prepare(trans=True), not by trans_a/trans_b")
        if policy == "native":
            raise ValueError("policy='native' runs cuBLAS DGEMM on arrays, not on prepared operands")
        if path == "fused":
            raise ValueError("prepared operands run on the staged path, path='fused' was asked")
        policy, path = "emulate", "staged"
    variant = _requested_variant(kernel, path)
    if policy == "native" and (kernel is not None or path is not None):
        raise ValueError("policy='native' runs cuBLAS DGEMM: kernel= and path= choose emulation kernels")
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings must be a dict or None, got {type(timings).__name__}")
    A = prepared["a"].source if "a" in prepared else describe_input(a, "a")
    B = prepared["b"].source if "b" in prepared else describe_input(b, "b")
    C = describe_input(c, "c") if c is not None else None
    inputs = [("a", A), ("b", B)] + ([("c", C)] if C is not None else [])
    host = [prepared[n].kind == "numpy" if n in prepared else isinstance(x, np.ndarray) for n, x in inputs]
    if any(host) and not all(host):
        raise ValueError("a, b and c must all be NumPy arrays or all be GPU arrays: got "
                         + ", ".join(f"{n}={'NumPy' if isinstance(x, np.ndarray) else x.kind}" for n, x in inputs))
    devices = {x.device for n, x in inputs if n not in prepared and isinstance(x, Matrix) and x.device is not None}
    if len(devices) > 1:
        raise ValueError(f"a, b and c are on different GPUs {sorted(devices)}")
    on_host = host[0]
    kind = "numpy" if on_host else A.kind
    device = devices.pop() if devices else next((p.device for p in prepared.values()), 0)

    m, k = (A.shape[1], A.shape[0]) if trans_a else A.shape
    kb, n = (B.shape[1], B.shape[0]) if trans_b else B.shape
    if kb != k:
        raise ValueError(f"inner dimensions differ: op(a) is {(m, k)}, op(b) is {(kb, n)}")
    for name, p in prepared.items():
        p.check_use(name, count, mode, device)
    check_sizes(m=m, n=n, k=k)
    if C is not None and tuple(C.shape) != (m, n):
        raise ValueError(f"c must have shape {(m, n)}, got {tuple(C.shape)}")
    if C is None and beta != 0.0:
        raise ValueError("beta != 0 needs c")
    O = describe_input(out, "out") if out is not None else None
    if O is not None:
        if tuple(O.shape) != (m, n):
            raise ValueError(f"out must have shape {(m, n)}, got {tuple(O.shape)}")
        if isinstance(O, np.ndarray) != on_host:
            raise ValueError("out must be of the same kind as a and b (NumPy for NumPy inputs)")
        if isinstance(O, Matrix) and O.device is not None and O.device != device:
            raise ValueError(f"out is on GPU {O.device}, a and b on GPU {device}")
        if isinstance(O, Matrix):
            _check_out_overlap(O, A, B, C, beta)

    with _cuda.on_device(device):  # the caller's current GPU is current again after the call
        arch = visible_arch(device)
        if arch is None:
            raise _cuda.NoGpuError(f"GPU {device} is not supported (compute capability 8.0 or newer needed)")
        table = dispatch.load_table()
        native, why = _native_decision(policy, moduli, variant, path, m, n, k, count, mode, arch, device, table)
        kern = None if native else _resolve_kernels(variant, path, arch, m, n, k, count, table)
        sh = _default_stream(kind, stream, device)
        keep: list = []
        if on_host:
            A = A if "a" in prepared else _to_device(a, keep)
            B = B if "b" in prepared else _to_device(b, keep)
            C = _to_device(c, keep) if c is not None and beta != 0.0 else None  # beta == 0: c is not read
        A = A.t() if trans_a else A
        B = B.t() if trans_b else B

        if out is not None and not on_host:
            result = out
        else:
            result, O = allocate_like("numpy" if on_host else kind, m, n, device)
        plan = _native_plan(A, B, C, O, beta) if native else None
        if native and plan is None:
            if policy == "native":
                raise ValueError("policy='native': cuBLAS cannot take these layouts (each of a, b, c and out needs "
                                 "a unit stride along one dimension, c and out the same one, and out must not "
                                 "overlap a or b)")
            native, why = False, "cuBLAS cannot take these layouts"
            kern = _resolve_kernels(variant, path, arch, m, n, k, count, table)
        timer = _Timer(sh, timings is not None)
        timer.mark("start")
        if native:
            _run_native(plan, alpha, beta, sh)
            timer.mark("native")
        else:
            if m and n:
                ws = _workspace(device, sh)
                with ws.lock:
                    _run(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer, prepared)
            timer.mark("crt")
        if timings is not None:
            if native:
                timings.update(timer.result(), path="native", kernel="cublasDgemm_v2", policy=why)
            else:
                timings.update(timer.result(), path=kern.path, kernel=kern.variant.name)
        if on_host:
            _cuda.synchronize(sh)
            value = result.get()
            if out is None:
                return value
            out[...] = value
            return out
        return result


# --------------------------------------------------------------------------- native fast lane
# The common auto-policy call (two CuPy arrays or two PyTorch CUDA tensors, float64, no c,
# out, transposes, stream or timings) on a shape whose decision is known to be native:
# straight to cuBLASLt with what that call needs, so that calling ozaki_cutlass.gemm costs no
# more host time than the framework's own matmul (measured: scripts/native_call_cost.py).
# Anything else, and the first call of a shape (which records the decision), take the
# general path. Keys hold only what each framework gives cheaply (shapes, strides, dtype,
# GPU, mode); the lane for one is worked out once, and kept until dispatch.forget_tables().
_FAST_DECISIONS: dict[tuple, bool] = {}
_FAST_LANES: dict[tuple, object] = {}   # a framework's key -> _Lane, or None: the general path
_FRAMEWORK_LANES: dict[type, object] = {}  # array type -> its lane function
_FAST_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class _Lane:
    shape: tuple[int, int]  # the result's
    swap: bool              # the cuBLAS call computes O^T: its first operand is the caller's b
    lt: _cublas.LtDgemm
    context: int            # the GPU's primary context, the one CuPy and PyTorch make current


def _native_fast_lane(a, b, alpha, mode):
    kind = type(a)
    if type(b) is not kind:
        return None
    lane = _FRAMEWORK_LANES.get(kind)
    if lane is None:
        lane = _FRAMEWORK_LANES.setdefault(kind, _framework_lane(kind))
    return lane(a, b, alpha, mode)


def _framework_lane(kind: type):
    """The fast lane function for arrays of type ``kind``: CuPy's, PyTorch's, or none."""
    root = kind.__module__.partition(".")[0]
    if root == "cupy":
        import cupy

        if issubclass(kind, cupy.ndarray):
            return functools.partial(_cupy_lane, cupy)
    if root == "torch":
        import torch

        if issubclass(kind, torch.Tensor):
            # PyTorch's own matmul reads the current device and stream through these (C++,
            # no Python objects made); the public calls cost the lane microseconds
            current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
            current_stream = getattr(torch._C, "_cuda_getCurrentRawStream",
                                     lambda i: torch.cuda.current_stream(i).cuda_stream)
            return functools.partial(_torch_lane, current_device, current_stream)
    return lambda a, b, alpha, mode: None


def _cupy_lane(cupy, a, b, alpha, mode):
    da, db = a.data, b.data
    key = (a.shape, a.strides, a.dtype.char, da.device_id, b.shape, b.strides, b.dtype.char, db.device_id, mode)
    lane = _FAST_LANES.get(key, False)
    if lane is False:
        lane = _new_lane(key, 1, key[2] == key[6] == "d")
    # only on the current GPU (the general path switches GPUs)
    if lane is None or cupy.cuda.runtime.getDevice() != key[3]:
        return None
    out = cupy.ndarray(lane.shape, np.float64)  # cupy.empty without its Python frame
    pa, pb = (db.ptr, da.ptr) if lane.swap else (da.ptr, db.ptr)
    lane.lt.run(_cublas.handles(lane.context), pa, pb, out.data.ptr, alpha, 0.0,
                cupy.cuda.get_current_stream().ptr)
    return out


def _torch_lane(current_device, current_stream, a, b, alpha, mode):
    try:  # get_device(): the CUDA ordinal, -1 on the CPU
        key = (a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype, b.get_device(), mode)
    except RuntimeError:  # a tensor without strides (sparse): the general path says what is wrong
        return None
    lane = _FAST_LANES.get(key, False)
    if lane is False:
        import torch

        lane = _new_lane(key, 8, key[2] is key[6] is torch.float64 and key[3] >= 0)
    if lane is None or current_device() != key[3]:
        return None
    out = a.new_empty(lane.shape)  # a's dtype (float64) and GPU
    pa, pb = (b.data_ptr(), a.data_ptr()) if lane.swap else (a.data_ptr(), b.data_ptr())
    lane.lt.run(_cublas.handles(lane.context), pa, pb, out.data_ptr(), alpha, 0.0, current_stream(key[3]))
    return out


def _new_lane(key: tuple, stride_unit: int, float64: bool):
    """The lane of a framework's ``key`` (shape, strides in units of ``stride_unit`` bytes,
    dtype and GPU of a, the same of b, mode), stored, or None: these arrays take the
    general path (``float64``: both are float64 arrays on a GPU). Nothing is stored while
    the general path has not yet decided the shape under the tuning table in force. A
    stored lane holds until dispatch.forget_tables() (which a process that changes
    OZAKI_TUNING_TABLE or rewrites its table calls): reading the setting on every call
    would cost the lane a tenth of its time."""
    (a_shape, a_strides, _, device, b_shape, b_strides, _, b_device, mode) = key[:9]
    table = environment.setting("OZAKI_TUNING_TABLE")
    lane = None
    strides = [s * stride_unit for s in a_strides + b_strides]
    if (float64 and len(a_shape) == len(b_shape) == 2 and device == b_device and a_shape[1] == b_shape[0]
            and all(s % 8 == 0 for s in strides)):
        (m, k), n = a_shape, b_shape[1]
        decided = _FAST_DECISIONS.get((m, n, k, mode, device, table))
        if decided is None:
            return None
        context = _cuda.primary_context(device)
        if decided and context is not None and min(m, n, k) > 0:
            ra, ca, rb, cb = (s // 8 for s in strides)
            plan = _cublas.plan_dgemm(Matrix(0, m, k, ra, ca, "", device, None),
                                      Matrix(0, k, n, rb, cb, "", device, None),
                                      Matrix(0, m, n, n, 1, "", device, None))
            if plan is not None:
                lane = _Lane((m, n), plan.transposed, _cublas.lt_dgemm(plan, context), context)
    if len(_FAST_LANES) >= _FAST_LIMIT:
        _FAST_LANES.clear()
    _FAST_LANES[key] = lane
    return lane


def _forget_decisions() -> None:
    _FAST_DECISIONS.clear()
    _FAST_LANES.clear()


dispatch._ON_FORGET.append(_forget_decisions)


def _remember_native(m, n, k, mode, device, native: bool) -> None:
    if len(_FAST_DECISIONS) >= _FAST_LIMIT:
        _FAST_DECISIONS.clear()
    _FAST_DECISIONS[(m, n, k, mode, device, environment.setting("OZAKI_TUNING_TABLE"))] = native


def _native_decision(policy, moduli, variant, path, m, n, k, count, mode, arch, device,
                     table=None) -> tuple[bool, str]:
    """(run cuBLAS DGEMM?, why) for gemm's ``policy`` (see its docstring); ``table``:
    dispatch.load_table()'s (table, source), loaded here when not given."""
    if policy == "native":
        _cublas._library()  # raises NativeUnavailable, saying what was looked for, when absent
        return True, "policy='native'"
    if policy == "emulate" or moduli is not None or variant is not None or path is not None:
        return False, "emulation asked for"
    table, source = table or dispatch.load_table()
    native, why = dispatch.prefer_native(dispatch.Problem(m, n, k, count, arch), mode,
                                         table=table, table_source=source)
    if native and not _cublas.available():
        log.info("auto policy: %s, but cuBLAS is not available here; emulating", why)
        return False, why + "; cuBLAS not available"
    _remember_native(m, n, k, mode, device, native)
    return native, why


def _native_plan(A, B, C, O, beta):
    """(DGEMM plan, c copy plan or None) when cuBLAS can run C = alpha A B + beta c into O
    with these layouts (c first copied into O unless it is O), else None."""
    if _overlaps(O, A) or _overlaps(O, B):  # cuBLAS must not write what it reads
        return None
    plan = _cublas.plan_dgemm(A, B, O)
    if plan is None:
        return None
    copy = None
    if C is not None and beta != 0.0 and (C.ptr, C.rs, C.cs) != (O.ptr, O.rs, O.cs):
        copy = _cublas.plan_copy(C, O, O.rows, O.cols)
        if copy is None:
            return None
    return plan, copy


def _check_out_overlap(O, A, B, C, beta) -> None:
    """ValueError when ``out`` shares memory the call still reads while it writes ``out``:
    a or b (the CRT kernels read them for rows and columns with NaN/Inf, cuBLAS throughout),
    or c in another layout (an entry of c is read by the thread that writes the same entry
    of out, which is safe only when out is c itself)."""
    for name, X in (("a", A), ("b", B)):
        if isinstance(X, Matrix) and _overlaps(O, X):
            raise ValueError(f"out overlaps {name}: the result would be written while {name} is still "
                             "read; pass an out that shares no memory with a and b")
    if isinstance(C, Matrix) and beta != 0.0 and _overlaps(O, C) and (O.ptr, O.rs, O.cs) != (C.ptr, C.rs, C.cs):
        raise ValueError("out overlaps c in another layout: pass out=c itself (same strides) or an out "
                         "that shares no memory with c")


def _overlaps(x: Matrix, y: Matrix) -> bool:
    """Whether the address ranges of two (non-empty) device matrices meet."""
    def span(z):
        last = (z.rows - 1) * z.rs + (z.cols - 1) * z.cs
        return z.ptr, z.ptr + 8 * (last + 1)

    if 0 in (x.rows, x.cols, y.rows, y.cols):
        return False
    (x0, x1), (y0, y1) = span(x), span(y)
    return x0 < y1 and y0 < x1


def _run_native(plan, alpha, beta, sh):
    dgemm_plan, copy = plan
    if copy is not None:
        _cublas.run_copy(copy, sh)
    _cublas.dgemm(dgemm_plan, alpha, beta, sh)  # beta != 0 only with c (checked)


def _zero_result(st, C, O, m, n, beta, sh, ws):
    """alpha == 0 or k == 0: A and B are not read; out = beta * c (or 0) through the
    same final kernel, fed zero residues and zero shifts."""
    zc = crt_constants(2)
    z = ws.get("zero_c", 4 * 2 * m * n)
    _cuda.check(_cuda._driver().cuMemsetD8Async(z, 0, 4 * 2 * m * n, _cuda.as_cu_stream(sh)), "memset")
    zi = ws.get("zero_shift", 4 * max(m, n))
    _cuda.check(_cuda._driver().cuMemsetD8Async(zi, 0, 4 * max(m, n), _cuda.as_cu_stream(sh)), "memset")
    st.crt_unscale(z, 2, m, n, n, m * n, 1, 0, zc, zi, zi, 0.0, beta, *_cin(C, beta), O.ptr, O.rs, O.cs, None, sh)


def _scale(kern, A, B, m, n, k, n_pad, consts, mode, sh, ws, overlap, prepared=None):
    """Stages 1-3 for op(A)'s rows (vs = rs, es = cs) and op(B)'s columns (vs = cs,
    es = rs): pack (where k is strided), exponents, fast shifts, non-finite counts, coarse
    magnitudes; A's side on ``sh``, B's on the side stream when ``overlap``. Then the
    accurate shifts through one INT8 GEMM of the coarse magnitudes (the plain kernel of
    the arch). A side in ``prepared`` ({"a"/"b": Prepared}) brings its own results. Returns
    the vector sets (ptr, nvec, k, vs, es) the later stages read and the device pointers
    (mu, nu, non-finite counts of A rows and B columns)."""
    prepared = prepared or {}
    st = kern.stages
    pb = consts.bound_exponent
    accurate = mode == "accurate"
    i32 = lambda name, size: ws.get(name, 4 * size)  # noqa: E731
    k16 = _round_up(k, 16)
    sides = []
    for name, X, nvec, vs, es, rows_pad in (("a", A, m, A.rs, A.cs, m), ("b", B, n, B.cs, B.rs, n_pad)):
        p = prepared.get(name)
        if p is not None:
            sides.append(dict(name=name, prepared=True, v=p.vector_set, e=p.exps, fast=p.fast,
                              nonfinite=p.nonfinite, bar=p.coarse, shift=i32("shift_" + name, nvec)))
            continue
        sides.append(dict(name=name, X=X, nvec=nvec, vs=vs, es=es, rows_pad=rows_pad, e=i32("e" + name, nvec),
                          fast=i32("fast_" + name, nvec), nonfinite=i32("nf_" + name, nvec),
                          shift=i32("shift_" + name, nvec),
                          bar=ws.get("bar_" + name, rows_pad * k16) if accurate else 0,
                          packed=ws.get("pack_" + name, 8 * nvec * k) if _needs_pack(nvec, k, es) else 0))
    a, b = sides
    with _Fork(ws, sh, overlap) as side:
        for d, s in ((b, side), (a, sh)):
            if not d.get("prepared"):
                _operand_stages(st, d, k, pb, accurate, s)
    if not accurate:
        return a["v"], b["v"], a["fast"], b["fast"], a["nonfinite"], b["nonfinite"]
    gemm = kern.gemm if kern.gemm is not None else _coarse_gemm(kern)
    nchunks = -(-k16 // K_CHUNK)
    part = i32("gpart", m * n_pad)
    ws_bytes = gemm.workspace_size(m, n_pad, min(k16, K_CHUNK), 1)
    gws = ws.get("coarse_ws", ws_bytes) if ws_bytes else 0
    shift_args = (a["e"], b["e"], a["fast"], b["fast"], pb, a["shift"], b["shift"], i32("dgain", m), sh)
    if nchunks == 1:  # the int32 GEMM output is the bound itself
        gemm(m, n_pad, k16, 1, a["bar"], k16, 0, b["bar"], k16, 0, part, n_pad, 0, gws, ws_bytes, sh)
        st.accurate_shifts_i32(part, n_pad, m, n, *shift_args)
    else:
        g = ws.get("g", 8 * m * n)
        for ch in range(nchunks):
            k0 = ch * K_CHUNK
            kl = min(K_CHUNK, k16 - k0)
            gemm(m, n_pad, kl, 1, a["bar"] + k0, k16, 0, b["bar"] + k0, k16, 0, part, n_pad, 0, gws, ws_bytes, sh)
            st.accumulate_i64(part, m, n, n_pad, g, ch == 0, sh)
        st.accurate_shifts(g, m, n, *shift_args)
    return a["v"], b["v"], a["shift"], b["shift"], a["nonfinite"], b["nonfinite"]


def _operand_stages(st, d, k, pb, accurate, stream) -> None:
    """One operand's own stages (gemm's _scale and prepare share them): pack where k is
    strided, scan (exponents, fast shifts, non-finite counts), and in accurate mode the
    coarse magnitudes. ``d``: X, nvec, vs, es, packed (0: no pack), e, fast, nonfinite,
    bar, rows_pad; gets "v", the vector set the later stages read. k >= 1."""
    d["v"] = _vectors(st, d, k, stream)
    st.scan(*d["v"], pb, d["e"], d["fast"], d["nonfinite"], stream)
    if accurate:
        st.coarse(*d["v"], d["e"], d["bar"], d["rows_pad"], _round_up(k, 16), stream)


def _needs_pack(nvec, k, es) -> bool:
    return es != 1 and k > 1 and nvec > 0


def _vectors(st, d, k, stream):
    """The vector set (ptr, nvec, k, vs, es) the stages read: the operand itself when its
    k stride is 1, else its contiguous copy (``pack``, a tiled transpose), so that scan,
    coarse and residues take their fast path (lanes along k). The copy is exact."""
    if not d["packed"]:
        return d["X"].ptr, d["nvec"], k, d["vs"], d["es"]
    st.pack(d["X"].ptr, d["nvec"], k, d["vs"], d["es"], d["packed"], stream)
    return d["packed"], d["nvec"], k, k, 1


class _Fork:
    """``with _Fork(ws, sh, on) as side:`` work launched on ``side`` inside the block runs
    after everything already on ``sh`` and before anything launched on ``sh`` after the
    block (two events); ``side`` is the workspace's second stream, or ``sh`` itself when
    ``on`` is false. Used to build A's and B's operands concurrently."""

    def __init__(self, ws, sh, on: bool):
        self.ws, self.sh, self.on = ws, sh, on

    def __enter__(self) -> int:
        if not self.on:
            return self.sh
        self.side, self.ev_fork, self.ev_join = self.ws.side_stream()
        cu = _cuda._driver()
        _cuda.check(cu.cuEventRecord(self.ev_fork, _cuda.as_cu_stream(self.sh)), "cuEventRecord")
        _cuda.check(cu.cuStreamWaitEvent(_cuda.as_cu_stream(self.side), self.ev_fork, 0), "cuStreamWaitEvent")
        return self.side

    def __exit__(self, *exc) -> None:
        if self.on:
            cu = _cuda._driver()
            _cuda.check(cu.cuEventRecord(self.ev_join, _cuda.as_cu_stream(self.side)), "cuEventRecord")
            _cuda.check(cu.cuStreamWaitEvent(_cuda.as_cu_stream(self.sh), self.ev_join, 0), "cuStreamWaitEvent")


def _residues(st, va, vb, mu, nu, count, moduli, ra, rb, m, n_pad, kp, layout, sh, ws, overlap, skip=()):
    """Residues of op(A)'s rows into ``ra`` and op(B)'s columns into ``rb`` (B's on the
    side stream when ``overlap``). ``layout``: None for the staged (modulus, row, k)
    planes, else (row_stride, plane_stride) of the fused kernels' concatenated rows.
    ``skip``: the sides ("a", "b") whose residues are already made (prepared, fast mode)."""
    with _Fork(ws, sh, overlap) as side:
        for name, v, shifts, out, rows_pad, s in (("b", vb, nu, rb, n_pad, side), ("a", va, mu, ra, m, sh)):
            if name in skip:
                continue
            if layout is None:
                st.residues(*v, shifts, count, moduli, out, rows_pad, kp, s)
            else:
                st.residues_strided(*v, shifts, count, moduli, out, rows_pad, kp, *layout, s)


def _runs(sizes):
    """[(group size, how many in a row)] of a list of group sizes: [4, 4, 4, 3] -> [(4, 3), (3, 1)]."""
    return [(size, len(list(run))) for size, run in itertools.groupby(sizes)]


def _coarse_gemm(kern):
    """The plain INT8 GEMM used for the coarse bound on the fused path."""
    kern.gemm = load_int8_gemm(default_variant(kern.variant.arch))
    return kern.gemm


def _nonfinite(A, B, k, nfa, nfb):
    """Where the CRT finds the NaN/Inf pattern: op(A), op(B) and the non-finite counts of
    their rows and columns (the scan's). The CRT kernel classifies the terms of an entry
    whose row or column is flagged; nothing is decided on the host, so nothing waits."""
    return CNonfiniteSource(A.ptr, A.rs, A.cs, B.ptr, B.rs, B.cs, k, nfa, nfb)


def _run(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer, prepared):
    if alpha == 0.0 or k == 0:
        _zero_result(kern.stages, C, O, m, n, beta, sh, ws)
        return
    if kern.path == "prologue":
        from . import prologue

        prologue.run(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer)
    elif kern.path == "fused":
        _run_fused(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer)
    else:
        _run_staged(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer, prepared)


def _cin(C, beta):
    if C is None or beta == 0.0:
        return 0, 0, 0
    return C.ptr, C.rs, C.cs


def _run_staged(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer, prepared=None):
    st = kern.stages
    consts = crt_constants(count)
    kp = _round_up(k, 16)
    n_pad = _round_up(n, 4)
    prepared = prepared or {}
    overlap = environment.overlap()  # A's and B's operands on two streams; the same bits either way
    va, vb, mu, nu, nfa, nfb = _scale(kern, A, B, m, n, k, n_pad, consts, mode, sh, ws, overlap, prepared)
    timer.mark("scale")
    made = {name for name, p in prepared.items() if p.residues}
    ra = prepared["a"].residues if "a" in made else ws.get("ra", count * m * kp)
    rb = prepared["b"].residues if "b" in made else ws.get("rb", count * n_pad * kp)
    _residues(st, va, vb, mu, nu, count, ws.moduli(), ra, rb, m, n_pad, kp, None, sh, ws, overlap, made)
    timer.mark("residues")
    # one batched INT8 GEMM over the moduli per k chunk
    nchunks = -(-kp // K_CHUNK)
    plane = m * n_pad
    c32 = ws.get("c32", 4 * nchunks * count * plane)
    ws_bytes = kern.gemm.workspace_size(m, n_pad, min(kp, K_CHUNK), count)
    gws = ws.get("gemm_ws", ws_bytes) if ws_bytes else 0
    for ch in range(nchunks):
        k0 = ch * K_CHUNK
        kl = min(K_CHUNK, kp - k0)
        kern.gemm(m, n_pad, kl, count, ra + k0, kp, m * kp, rb + k0, kp, n_pad * kp,
                  c32 + 4 * ch * count * plane, n_pad, plane, gws, ws_bytes, sh)
    timer.mark("int8_gemm")
    cin, cin_rs, cin_cs = _cin(C, beta)
    st.crt_unscale(c32, count, m, n, n_pad, plane, nchunks, count * plane, consts, mu, nu,
                   alpha, beta, cin, cin_rs, cin_cs, O.ptr, O.rs, O.cs, _nonfinite(A, B, k, nfa, nfb), sh)


def _run_fused(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer):
    """Residues of all moduli concatenated along k (row i: modulus 0's k_pad values, then
    modulus 1's, ...); the fused kernel writes each group's partial (X mod prod of the
    group's moduli: uint32, one byte for a one-modulus group, rows of n_pad, a multiple of
    16 for the byte rows' TMA stores), one call per run of equal-size groups (one batched
    launch for one-modulus groups on sm_90a); the combine kernel finishes the CRT."""
    st = kern.stages
    consts = crt_constants(count)
    tile_k = kern.variant.tile_k
    kp = _round_up(k, tile_k)
    n_pad = _round_up(n, 16)
    overlap = environment.overlap()
    va, vb, mu, nu, nfa, nfb = _scale(kern, A, B, m, n, k, n_pad, consts, mode, sh, ws, overlap)
    timer.mark("scale")
    row = count * kp
    ra, rb = ws.get("ra", m * row), ws.get("rb", n_pad * row)
    _residues(st, va, vb, mu, nu, count, ws.moduli(), ra, rb, m, n_pad, kp, (row, kp), sh, ws, overlap)
    timer.mark("residues")
    sizes = group_sizes(count, kern.variant.group_size)
    plane = m * n_pad
    x = ws.get("x", sum(partial_bytes(size) for size in sizes) * plane)
    first, offset = 0, 0
    for size, groups in _runs(sizes):
        gk = _group_kernel(kern.variant, size)
        ws_bytes = gk.workspace_size(m, n_pad, kp, groups)
        gws = ws.get(f"group_ws{size}", ws_bytes) if ws_bytes else 0
        gk(m, n_pad, kp, consts.moduli[first:first + size * groups], ra + first * kp, row, rb + first * kp, row,
           x + offset, n_pad, plane, gws, ws_bytes, sh)
        first += size * groups
        offset += partial_bytes(size) * plane * groups
    timer.mark("int8_gemm")
    cin, cin_rs, cin_cs = _cin(C, beta)
    st.combine_unscale(x, sizes, m, n, n_pad, plane, consts, mu, nu, alpha, beta, cin, cin_rs, cin_cs,
                       O.ptr, O.rs, O.cs, _nonfinite(A, B, k, nfa, nfb), sh)
