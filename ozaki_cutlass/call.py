"""A ``gemm`` call validated once, before any GPU work, into a frozen :class:`Call` that the
rest of the runtime takes whole.

Every refusal of bad input (types, dtypes, shapes, flags, settings, devices, overlapping
outputs, option mixes) happens here, so that it happens before anything is launched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import dispatch
from .device.arrays import Matrix, check_writable, describe_input, overlaps
from .device.driver import check_stream
from .generator import GemmVariant
from .generator.prologue import default_prologue_variant
from .operands.prepared import Prepared
from .numerics.contract import U
from .paths.native import decide
from .options import (DEFAULT_MODULI, as_trans, check_sizes, refuse_native_settings, resolve_accuracy,
                      resolve_moduli, validate_mode, validate_policy)

__all__ = ["Call", "validate", "check_settings", "requested_variant", "prologue_refusal", "emulation_asked",
           "decide_settings", "PATHS"]

#: What ``path=`` takes: the dispatcher's paths and the opt-in prologue prototype.
PATHS = dispatch.PATHS + ("prologue",)


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One validated ``gemm`` call. ``A``, ``B``, ``C``, ``O`` are the inputs as described
    (a :class:`Matrix` on the GPU, a float64 NumPy array on the host, C and O None when not
    given; a prepared side's source matrix), not yet transposed; ``a``, ``b``, ``c``,
    ``out`` are the caller's objects. ``m``, ``n``, ``k`` are those of the product."""

    a: object
    b: object
    c: object
    out: object
    A: Matrix | np.ndarray
    B: Matrix | np.ndarray
    C: Matrix | np.ndarray | None
    O: Matrix | np.ndarray | None
    trans_a: bool
    trans_b: bool
    m: int
    n: int
    k: int
    alpha: float
    beta: float
    moduli: int             # the count run; under the contract, the nominal one the dispatcher plans with
    mode: str
    target: float | None    # the accuracy contract's target (None: an explicit moduli count)
    emulation_asked: bool   # moduli, kernel, path or a target below DGEMM's: the auto policy emulates
    policy: str
    path: str | None
    variant: GemmVariant | None
    stream: object
    timings: dict | None
    on_host: bool           # NumPy in, NumPy out
    kind: str               # the kind of array the result is ("numpy", "cupy", "torch", "cai")
    device: int
    prepared: dict = field(default_factory=dict)  # "a"/"b" -> Prepared
    realified: bool = False  # a complex call's realified product (set by complex_gemm)
    lane: tuple | None = None  # the replay lane's key of the caller's arrays (set by gemm; paths.replay_lane)

    @property
    def may_fall_back(self) -> bool:
        """Whether the accuracy contract may run native DGEMM where 20 moduli do not meet
        its target: policy "auto" with no kernel or path asked for (the reference's rule,
        which has neither)."""
        return self.policy == "auto" and self.variant is None and self.path is None


def emulation_asked(moduli, variant, path, target) -> bool:
    """Whether a call's settings ask for the emulation, so that the auto policy does not
    run native DGEMM: moduli, a kernel or a path named, or a target below DGEMM's."""
    return moduli is not None or variant is not None or path is not None or (target is not None and target < U)


def decide_settings(settings: dict, m: int, n: int, k: int, arch, device: int,
                    realified: bool = False) -> tuple[bool, str]:
    """(run native DGEMM?, why) for an m x n x k product under a call's ``settings`` (gemm's
    moduli, mode, kernel, path, policy, accuracy; missing ones unset), before its arrays are
    described: the decision a validated call of that problem gets (paths.native.decide);
    ``realified``: a complex call's realified product."""
    moduli, path = settings.get("moduli"), settings.get("path")
    count, mode, target = resolve_accuracy(moduli, settings.get("accuracy"), settings.get("mode"))
    asked = emulation_asked(moduli, requested_variant(settings.get("kernel"), path), path, target)
    problem = dispatch.Problem(m, n, k, count or DEFAULT_MODULI, arch, realified, contract=target is not None)
    return decide(validate_policy(settings.get("policy", "auto")), asked, problem, mode, device, dispatch.load_table())


def requested_variant(kernel, path: str | None) -> GemmVariant | None:
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


def prologue_refusal(*, prepared: bool, kernel) -> str | None:
    """Why ``gemm(..., path="prologue")`` cannot run with these options, else None."""
    if prepared:
        return ("path='prologue' makes the residues inside the GEMM kernel from float64 operands; "
                "prepared operands (pre-made residues) run on the staged path")
    if kernel is not None:
        return ("path='prologue' runs the prologue prototype "
                f"({default_prologue_variant().name}); kernel= chooses staged or fused GEMM variants")
    return None


def check_settings(*, moduli, mode, kernel, path, policy, timings, stream, accuracy) -> str:
    """The checks of gemm's settings that need no operand (each value, and the mixes no
    operand can make right), so that a call that computes nothing (alpha == 0, an empty
    product, an empty batch) refuses what any other call refuses; the policy checked.
    :func:`validate` makes them first; where prepared operands change a setting, it checks
    the result again."""
    if path is not None and path not in PATHS:
        raise ValueError(f"path must be one of {PATHS} or None, got {path!r}")
    policy = validate_policy(policy)
    refuse_native_settings(policy, moduli=moduli, mode=mode, accuracy=accuracy, kernel=kernel, path=path)
    resolve_accuracy(moduli, accuracy, mode)
    if path == "prologue":
        why = prologue_refusal(prepared=False, kernel=kernel)
        if why is not None:
            raise ValueError(why)
    else:
        requested_variant(kernel, path)
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings must be a dict or None, got {type(timings).__name__}")
    check_stream(stream)
    return policy


def _check_out_overlap(O: Matrix, A, B, C, beta: float) -> None:
    """ValueError when ``out`` shares memory the call still reads while it writes ``out``:
    a or b (the CRT kernels read them for rows and columns with NaN/Inf, cuBLAS throughout),
    or c in another layout (an entry of c is read by the thread that writes the same entry
    of out, which is safe only when out is c itself)."""
    for name, X in (("a", A), ("b", B)):
        if isinstance(X, Matrix) and overlaps(O, X):
            raise ValueError(f"out overlaps {name}: the result would be written while {name} is still "
                             "read; pass an out that shares no memory with a and b")
    if isinstance(C, Matrix) and beta != 0.0 and overlaps(O, C) and (O.ptr, O.rs, O.cs) != (C.ptr, C.rs, C.cs):
        raise ValueError("out overlaps c in another layout: pass out=c itself (same strides) or an out "
                         "that shares no memory with c")


def validate(a, b, *, c, alpha: float, beta: float, trans_a, trans_b, moduli, mode, out, stream, kernel, path,
             policy, timings, accuracy=None) -> Call:
    """The call of ``ozaki_cutlass.gemm`` (same arguments; ``alpha`` and ``beta`` already
    real numbers), checked; TypeError or ValueError naming what is wrong otherwise."""
    policy = check_settings(moduli=moduli, mode=mode, kernel=kernel, path=path, policy=policy, timings=timings,
                            stream=stream, accuracy=accuracy)
    trans_a, trans_b = as_trans(trans_a, "trans_a"), as_trans(trans_b, "trans_b")
    prepared = {name: x for name, x in (("a", a), ("b", b)) if isinstance(x, Prepared)}
    if path == "prologue":
        why = prologue_refusal(prepared=bool(prepared), kernel=kernel)
        if why is not None:
            raise ValueError(why)
    for name, p in prepared.items():
        p.check_side(name)
    first = next(iter(prepared.values()), None)
    if first is not None or path == "prologue":
        if accuracy is not None:
            raise ValueError("prepared operands and path='prologue' run an explicit moduli count; "
                             "accuracy= (the contract) is not taken there")
        if first is None and moduli is None:
            raise ValueError("path='prologue' runs an explicit moduli count: pass moduli= (the accuracy "
                             "contract runs on the staged and fused paths)")
        count = resolve_moduli(moduli if moduli is not None else first.moduli)
        mode = validate_mode(mode if mode is not None else (first.mode if first is not None else "accurate"))
        target = None
    else:
        count, mode, target = resolve_accuracy(moduli, accuracy, mode)
        count = DEFAULT_MODULI if count is None else count
    if prepared:
        if trans_a and "a" in prepared or trans_b and "b" in prepared:
            raise ValueError("a prepared operand is transposed by prepare(trans=True), not by trans_a/trans_b")
        if policy == "native":
            raise ValueError("policy='native' runs cuBLAS DGEMM on arrays, not on prepared operands")
        if path == "fused":
            raise ValueError("prepared operands run on the staged path, path='fused' was asked")
        policy, path = "emulate", "staged"
    variant = requested_variant(kernel, path)
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
        check_writable(out, "out")
        if tuple(O.shape) != (m, n):
            raise ValueError(f"out must have shape {(m, n)}, got {tuple(O.shape)}")
        if isinstance(O, np.ndarray) != on_host:
            raise ValueError("out must be of the same kind as a and b (NumPy for NumPy inputs)")
        if isinstance(O, Matrix) and O.device is not None and O.device != device:
            raise ValueError(f"out is on GPU {O.device}, a and b on GPU {device}")
        if isinstance(O, Matrix):
            _check_out_overlap(O, A, B, C, beta)
    return Call(a=a, b=b, c=c, out=out, A=A, B=B, C=C, O=O, trans_a=trans_a, trans_b=trans_b, m=m, n=n, k=k,
                alpha=alpha, beta=beta, moduli=count, mode=mode, target=target,
                emulation_asked=emulation_asked(moduli, variant, path, target),
                policy=policy, path=path, variant=variant, stream=stream, timings=timings, on_host=on_host,
                kind=kind, device=device, prepared=prepared)
