"""``ozaki_cutlass.gemm``: the staged Ozaki-II pipeline on the GPU.

Stages (each mirrors a function of ``ozaki_cutlass.reference``, bit for bit):
scan (exponents, fast shifts, non-finite counts) -> [accurate: coarse int8 operands,
one INT8 GEMM, accurate shifts] -> residues (int8, TN layout, k padded to 16) -> one
batched INT8 GEMM over the moduli per k chunk -> CRT reconstruction + undo scaling +
alpha/beta (+ the NaN/Inf pattern where the inputs have non-finite values).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _cuda
from .arrays import Matrix, allocate_like, describe_input
from .numerics import K_CHUNK, crt_constants
from .reference import _as_scalar, resolve_moduli, validate_mode

log = logging.getLogger(__name__)

PHASES = ("scale", "residues", "int8_gemm", "crt", "total")
MAX_DIM = 2**31 - 1 - 256  # int sizes in the kernels, with room for padding


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


class Workspace:
    """Grow-only device buffers by name, one set per (context, stream): reused across
    calls so a steady loop of gemm calls allocates nothing."""

    def __init__(self):
        self._buffers: dict[str, _cuda.DeviceBuffer] = {}

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
    gemm: object
    stages: object


def _resolve_kernels(kernel, arch) -> _Kernels:
    from .generator import catalog, default_variant
    from .generator.variants import GemmVariant
    from .kernels import load_int8_gemm
    from .stages_build import load_stages

    if kernel is None:
        variant = default_variant(arch)
    elif isinstance(kernel, GemmVariant):
        variant = kernel
    elif isinstance(kernel, str):
        matches = [v for v in catalog(None, kernel, full=True)]
        if len(matches) != 1:
            raise ValueError(f"kernel={kernel!r} matches {len(matches)} catalogued variants; "
                             "give one exact name (see `ozaki-cutlass list --full`)")
        variant = matches[0]
    else:
        raise TypeError(f"kernel must be None, a variant name or a GemmVariant, got {type(kernel).__name__}")
    return _Kernels(gemm=load_int8_gemm(variant), stages=load_stages(variant.arch))


def _default_stream(kind: str, stream) -> int:
    if stream is not None:
        return _cuda.stream_handle(stream)
    if kind == "torch":
        import torch

        return int(torch.cuda.current_stream().cuda_stream)
    if kind == "cupy":
        import cupy

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
            out[name] += float(_cuda.check(cu.cuEventElapsedTime(e0, e1), "cuEventElapsedTime"))
        out["total"] = float(_cuda.check(cu.cuEventElapsedTime(self.marks[0][1], self.marks[-1][1]),
                                         "cuEventElapsedTime"))
        for _, ev in self.marks:
            cu.cuEventDestroy(ev)
        return out


def _to_device(x: np.ndarray, name: str, keep: list) -> Matrix:
    host = np.ascontiguousarray(x, dtype=np.float64)
    buf = _cuda.DeviceBuffer(host.nbytes)
    buf.upload(host)
    keep.append(buf)
    return Matrix(buf.ptr, host.shape[0], host.shape[1], host.shape[1], 1, "numpy", None, buf)


def gemm(a, b, *, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, moduli=None,
         mode="accurate", out=None, stream=None, kernel=None, timings=None):
    """C = alpha op(A) op(B) + beta C, FP64-accurate, on INT8 tensor cores.

    Same semantics, defaults and bits as :func:`ozaki_cutlass.reference.gemm`. ``a``,
    ``b`` (and ``c``, ``out``) are NumPy arrays (copied to the GPU and back), CuPy arrays,
    PyTorch CUDA tensors, or objects with ``__cuda_array_interface__``; all float64, any
    positive strides. The result is of the kind given (a new array, or ``out``). Device
    results are returned without synchronizing ``stream`` (default: the framework's
    current stream, else the legacy default stream). ``kernel``: an INT8 GEMM variant
    (name or GemmVariant) instead of the default for the GPU's arch. ``timings``: a dict
    to fill with per-phase milliseconds (synchronizes).
    """
    alpha = _as_scalar(alpha, "alpha")
    beta = _as_scalar(beta, "beta")
    count = resolve_moduli(moduli)
    mode = validate_mode(mode)
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings must be a dict or None, got {type(timings).__name__}")
    A = describe_input(a, "a")
    B = describe_input(b, "b")
    C = describe_input(c, "c") if c is not None else None
    inputs = [("a", A), ("b", B)] + ([("c", C)] if C is not None else [])
    host = [isinstance(x, np.ndarray) for _, x in inputs]
    if any(host) and not all(host):
        raise ValueError("a, b and c must all be NumPy arrays or all be GPU arrays: got "
                         + ", ".join(f"{n}={'NumPy' if isinstance(x, np.ndarray) else x.kind}" for n, x in inputs))
    devices = {x.device for _, x in inputs if isinstance(x, Matrix) and x.device is not None}
    if len(devices) > 1:
        raise ValueError(f"a, b and c are on different GPUs {sorted(devices)}")
    on_host = host[0]
    kind = "numpy" if on_host else A.kind
    device = devices.pop() if devices else 0

    m, k = (A.shape[1], A.shape[0]) if trans_a else A.shape
    kb, n = (B.shape[1], B.shape[0]) if trans_b else B.shape
    if kb != k:
        raise ValueError(f"inner dimensions differ: op(a) is {(m, k)}, op(b) is {(kb, n)}")
    for dim, value in (("m", m), ("n", n), ("k", k)):
        if value > MAX_DIM:
            raise ValueError(f"{dim}={value} is out of range: the kernels take sizes up to {MAX_DIM}")
    if C is not None and tuple(C.shape) != (m, n):
        raise ValueError(f"c must have shape {(m, n)}, got {tuple(C.shape)}")
    if C is None and beta != 0.0:
        raise ValueError("beta != 0 needs c")
    if out is not None:
        O = describe_input(out, "out")
        if tuple(O.shape) != (m, n):
            raise ValueError(f"out must have shape {(m, n)}, got {tuple(O.shape)}")
        if isinstance(O, np.ndarray) != on_host:
            raise ValueError("out must be of the same kind as a and b (NumPy for NumPy inputs)")

    _cuda.ensure_context(device)
    from ._device import visible_arch

    arch = visible_arch()
    if arch is None:
        raise _cuda.NoGpuError("the visible GPU is not supported (compute capability 8.0 or newer needed)")
    kern = _resolve_kernels(kernel, arch)
    sh = _default_stream(kind, stream)
    keep: list = []
    if on_host:
        A, B = _to_device(a, "a", keep), _to_device(b, "b", keep)
        C = _to_device(c, "c", keep) if c is not None else None
    A = A.t() if trans_a else A
    B = B.t() if trans_b else B

    if out is not None and not on_host:
        result, O = out, describe_input(out, "out")
    else:
        result, O = allocate_like("numpy" if on_host else kind, m, n, device)
    timer = _Timer(sh, timings is not None)
    timer.mark("start")
    if m and n:
        _run(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, _workspace(device, sh), timer)
    timer.mark("crt")
    if timings is not None:
        timings.update(timer.result())
    if on_host:
        _cuda.synchronize(sh)
        value = result.get()
        if out is None:
            return value
        out[...] = value
        return out
    return result


def _run(kern, A, B, C, O, m, n, k, alpha, beta, count, mode, sh, ws, timer):
    st = kern.stages
    consts = crt_constants(count)
    pb = consts.bound_exponent
    if alpha == 0.0 or k == 0:
        # A and B are not read: out = beta * c (or 0) through the same final kernel.
        zc = crt_constants(2)
        z = ws.get("zero_c", 4 * 2 * m * n)
        _cuda.check(_cuda._driver().cuMemsetD8Async(z, 0, 4 * 2 * m * n, _cuda.as_cu_stream(sh)), "memset")
        zi = ws.get("zero_shift", 4 * max(m, n))
        _cuda.check(_cuda._driver().cuMemsetD8Async(zi, 0, 4 * max(m, n), _cuda.as_cu_stream(sh)), "memset")
        st.crt_unscale(z, 2, m, n, n, m * n, 1, 0, zc, zi, zi, 0.0, beta,
                       C.ptr if C is not None and beta != 0.0 else 0, C.rs if C else 0, C.cs if C else 0,
                       O.ptr, O.rs, O.cs, 0, sh)
        return
    kp = _round_up(k, 16)
    n_pad = _round_up(n, 4)
    i32 = lambda name, size: ws.get(name, 4 * size)  # noqa: E731
    ea, mu_f, nfa, mu = i32("ea", m), i32("mu_f", m), i32("nfa", m), i32("mu", m)
    eb, nu_f, nfb, nu = i32("eb", n), i32("nu_f", n), i32("nfb", n), i32("nu", n)
    # ---- scale: rows of op(A) are vectors (vs = rs, es = cs); columns of op(B) (vs = cs, es = rs)
    st.scan(A.ptr, m, k, A.rs, A.cs, pb, ea, mu_f, nfa, sh)
    st.scan(B.ptr, n, k, B.cs, B.rs, pb, eb, nu_f, nfb, sh)
    nchunks = -(-kp // K_CHUNK)
    gemm_ws_bytes = kern.gemm.workspace_size(m, n_pad, min(kp, K_CHUNK), count)
    gws = ws.get("gemm_ws", gemm_ws_bytes) if gemm_ws_bytes else 0
    if mode == "accurate":
        abar, bbar = ws.get("abar", m * kp), ws.get("bbar", n_pad * kp)
        st.coarse(A.ptr, m, k, A.rs, A.cs, ea, abar, m, kp, sh)
        st.coarse(B.ptr, n, k, B.cs, B.rs, eb, bbar, n_pad, kp, sh)
        part = i32("gpart", m * n_pad)
        g = ws.get("g", 8 * m * n)
        for ch in range(nchunks):
            k0 = ch * K_CHUNK
            kl = min(K_CHUNK, kp - k0)
            kern.gemm(m, n_pad, kl, 1, abar + k0, kp, 0, bbar + k0, kp, 0, part, n_pad, 0,
                      gws, gemm_ws_bytes, sh)
            st.accumulate_i64(part, m, n, n_pad, g, ch == 0, sh)
        st.accurate_shifts(g, m, n, ea, eb, mu_f, nu_f, pb, mu, nu, i32("dgain", m), sh)
    else:
        mu, nu = mu_f, nu_f
    timer.mark("scale")
    # ---- residues
    moduli = i32("moduli", count)
    mod_host = np.array(consts.moduli, dtype=np.int32)
    _cuda.check(_cuda._driver().cuMemcpyHtoDAsync(moduli, mod_host.ctypes.data, mod_host.nbytes,
                                                  _cuda.as_cu_stream(sh)), "cuMemcpyHtoDAsync")
    ra, rb = ws.get("ra", count * m * kp), ws.get("rb", count * n_pad * kp)
    st.residues(A.ptr, m, k, A.rs, A.cs, mu, count, moduli, ra, m, kp, sh)
    st.residues(B.ptr, n, k, B.cs, B.rs, nu, count, moduli, rb, n_pad, kp, sh)
    _cuda.synchronize(sh)  # mod_host is a host temporary; also orders the flag reads below
    timer.mark("residues")
    # ---- INT8 GEMMs: batch = moduli, one launch per k chunk
    plane = m * n_pad
    c32 = i32("c32", nchunks * count * plane)
    for ch in range(nchunks):
        k0 = ch * K_CHUNK
        kl = min(K_CHUNK, kp - k0)
        kern.gemm(m, n_pad, kl, count, ra + k0, kp, m * kp, rb + k0, kp, n_pad * kp,
                  c32 + 4 * ch * count * plane, n_pad, plane, gws, gemm_ws_bytes, sh)
    timer.mark("int8_gemm")
    # ---- non-finite pattern (only when some input row/column has NaN/Inf)
    pattern = 0
    flags_a = np.empty(m, np.int32)
    flags_b = np.empty(n, np.int32)
    cu = _cuda._driver()
    _cuda.check(cu.cuMemcpyDtoH(flags_a.ctypes.data, nfa, flags_a.nbytes), "cuMemcpyDtoH")
    _cuda.check(cu.cuMemcpyDtoH(flags_b.ctypes.data, nfb, flags_b.nbytes), "cuMemcpyDtoH")
    if flags_a.any() or flags_b.any():
        pattern = ws.get("pattern", 8 * m * n)
        st.nonfinite_pattern(A.ptr, m, k, A.rs, A.cs, B.ptr, n, B.rs, B.cs, nfa, nfb, pattern, sh)
    # ---- CRT + unscale + alpha/beta
    st.crt_unscale(c32, count, m, n, n_pad, plane, nchunks, count * plane, consts, mu, nu,
                   alpha, beta, C.ptr if (C is not None and beta != 0.0) else 0,
                   C.rs if C is not None else 0, C.cs if C is not None else 0,
                   O.ptr, O.rs, O.cs, pattern, sh)
