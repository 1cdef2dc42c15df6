"""Operand reuse: ``ozaki_cutlass.prepare`` quantizes a matrix once for many GEMMs.

A matrix used against many others (a fixed A times a stream of B's, say) repeats the
same per-operand stages on every call: pack (where its k stride is not 1), scan
(exponents, fast shifts, NaN/Inf counts) and, in accurate mode, the coarse magnitudes;
in fast mode also the residues, since its shifts depend on that operand alone. A
:class:`Prepared` operand holds those results on the GPU, and ``gemm`` takes it in place
of the array, on the side it was prepared for.

What cannot be reused: in accurate mode an operand's shifts depend on the other operand
(the row gains come from the coarse bound of the product), so its residues are made on
every call, from the kept (packed) float64 data. Fast mode reuses everything.

The bits are those of the unprepared call with the same settings. The guard: a prepared
operand carries its side, shape, moduli count, mode and GPU; ``gemm`` refuses it with a
``ValueError`` naming the mismatch when any of those differ from the call. It also keeps
a reference to the array it was made from (read again for the NaN/Inf pattern and, in
accurate mode, for the residues when no packed copy was needed): changing that array
afterwards is not detected, as with any library that caches a factorization.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..device import driver
from ..device.arch import visible_arch
from ..device.arrays import Matrix, current_stream, describe_input, upload
from ..device.workspace import WORKSPACES
from ..kernels.stages import load_stages
from ..numerics.moduli import crt_constants, padded_k, padded_n
from ..options import as_flag, check_sizes, resolve_moduli, validate_mode
from .stages import OperandBuffers, needs_pack, run_operand_stages

__all__ = ["Prepared", "prepare", "SIDES"]

SIDES = ("left", "right")


@dataclass(eq=False)
class Prepared:
    """A GEMM operand quantized once (see the module docstring); make it with
    :func:`prepare`. ``shape`` is that of op(operand): (m, k) on the left, (k, n) on
    the right."""

    side: str
    moduli: int
    mode: str
    device: int
    source: Matrix            # op(operand) on the GPU (a copy for NumPy input)
    vector_set: tuple         # (ptr, nvec, k, vs, es) that the stages read
    exps: int                 # device pointers, int32 per vector
    fast: int
    nonfinite: int
    coarse: int = 0           # accurate: int8 coarse magnitudes, rows_pad x k16
    residues: int = 0         # fast: int8 residues, moduli x rows_pad x k_pad
    _keep: list = field(default_factory=list, repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        return self.source.shape

    @property
    def kind(self) -> str:
        """The kind of array it was made from ("numpy", "cupy", ...)."""
        return self.source.kind

    def check_side(self, position: str) -> None:
        """Raise ValueError unless this operand was prepared for gemm's ``position`` ("a"/"b")."""
        want = "left" if position == "a" else "right"
        if self.side != want:
            raise ValueError(f"{position} is an operand prepared for side={self.side!r}; as {position} it must be "
                             f"prepared with side={want!r}")

    def check_use(self, position: str, count: int, mode: str, device: int) -> None:
        """Raise ValueError, naming what differs, unless this operand fits a gemm call
        whose side and shapes are already checked."""
        if self.moduli != count:
            raise ValueError(f"{position} was prepared for {self.moduli} moduli, the call asks for {count}")
        if self.mode != mode:
            raise ValueError(f"{position} was prepared for mode={self.mode!r}, the call asks for mode={mode!r}")
        if self.device != device:
            raise ValueError(f"{position} was prepared on GPU {self.device}, the other arrays are on GPU {device}")

    def __repr__(self) -> str:
        return (f"Prepared(side={self.side!r}, shape={self.shape}, moduli={self.moduli}, mode={self.mode!r}, "
                f"device={self.device})")


def prepare(x: Any, side: str = "left", *, trans: bool = False, moduli: int | None = None,
            mode: str | None = "accurate", stream: Any = None) -> Prepared:
    """Quantize ``x`` once for use as ``a`` (side="left") or ``b`` (side="right") of
    :func:`ozaki_cutlass.gemm`; ``trans`` transposes it first (gemm's trans_a/trans_b
    must then be left False). ``moduli`` and ``mode`` must be those of the calls that use
    it (gemm takes them from the prepared operand when left unset; moduli None means
    DEFAULT_MODULI, mode None "accurate", as with an explicit count in gemm: a call with
    a prepared operand runs that count, no accuracy contract, whose count depends on both
    operands). ``x``: NumPy (copied
    to the GPU), CuPy, PyTorch CUDA or ``__cuda_array_interface__``, float64. The work
    is enqueued on ``stream`` (default as in gemm); gemm calls on other streams must be
    ordered after it by the caller."""
    trans = as_flag(trans, "trans")
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    count = resolve_moduli(moduli)
    mode = validate_mode("accurate" if mode is None else mode)
    driver.check_stream(stream)
    X = describe_input(x, "x")
    check_sizes(rows=X.shape[0], cols=X.shape[1])
    kind = "numpy" if isinstance(X, np.ndarray) else X.kind
    device = 0 if isinstance(X, np.ndarray) or X.device is None else X.device
    with driver.on_device(device):  # the caller's current GPU is current again after the call
        arch = visible_arch(device)
        if arch is None:
            raise driver.NoGpuError(f"GPU {device} is not supported (compute capability 8.0 or newer needed)")
        keep: list = []
        if isinstance(X, np.ndarray):
            X = upload(x, keep)
        X = X.t() if trans else X
        if side == "left":  # rows of op(A): vs = rs, es = cs
            nvec, k = X.rows, X.cols
            vs, es, rows_pad = X.rs, X.cs, X.rows
        else:               # columns of op(B): vs = cs, es = rs
            k, nvec = X.rows, X.cols
            vs, es, rows_pad = X.cs, X.rs, padded_n(X.cols)
        st = load_stages(arch)
        sh = current_stream(kind, stream, device)
        if X.stream is not None:  # its producer's work first (CUDA array interface v3)
            driver.order_after(X.stream, sh)

        def buf(nbytes: int) -> int:
            b = driver.DeviceBuffer(max(nbytes, 16))
            keep.append(b)
            return b.ptr

        accurate = mode == "accurate"
        k16 = padded_k(k)
        ob = OperandBuffers(X=X, nvec=nvec, vs=vs, es=es, rows_pad=rows_pad,
                            packed=buf(8 * nvec * k) if needs_pack(nvec, k, es) else 0,
                            exps=buf(4 * nvec), fast=buf(4 * nvec), nonfinite=buf(4 * nvec),
                            coarse=buf(rows_pad * k16) if accurate else 0)
        pb = crt_constants(count).bound_exponent
        if k:
            v = run_operand_stages(st, ob, k, pb, accurate, sh)
        else:  # nothing to scan: no non-finite entries; the zero-size vector set
            v = (X.ptr, nvec, 0, vs, es)
            if nvec:
                driver.check(driver.bindings().cuMemsetD8Async(ob.nonfinite, 0, 4 * nvec, driver.as_cu_stream(sh)),
                             "memset")
        residues = 0
        if not accurate and nvec and k:  # an empty operand has no residues (its products are never run)
            residues = buf(count * rows_pad * k16)
            with WORKSPACES.hold(device, sh) as ws:  # its moduli table is uploaded once, by whichever call asks first
                moduli = ws.moduli()
            st.residues(*v, ob.fast, count, moduli, residues, rows_pad, k16, sh)
        return Prepared(side=side, moduli=count, mode=mode, device=device, source=X, vector_set=v, exps=ob.exps,
                        fast=ob.fast, nonfinite=ob.nonfinite, coarse=ob.coarse, residues=residues, _keep=keep)
