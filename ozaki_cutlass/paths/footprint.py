"""How much device memory the emulation's workspaces hold for a call: the buffers the
paths (and, for a complex call, the complex layer) ask their workspaces for
(``Workspace.get``), by name, summed. A workspace keeps its
buffers after the call (grow-only, per GPU and stream) until ``ozaki_cutlass.empty_cache``.

Upper bounds where the call's details are not known here: both operands are counted as
packed (copied contiguous along k, which a call makes only for an operand whose k stride
is not 1), and the fused path's k is padded to 128 (the longest k tile of any variant).
Not counted: the INT8 kernels' own workspaces (CUTLASS's; none for the shipped kernels),
the device copies of NumPy inputs and the result.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..generator.variants import MAX_GROUP_SIZE
from ..numerics.moduli import K_CHUNK, group_sizes, k_chunks, padded_k, padded_n, partial_bytes, shift_work_words
from ..operands.stages import round_up
from ..numerics.contract import CONTRACT_MODULI
from ..options import resolve_accuracy
from .contract import contract_buffers
from .karatsuba import panel_columns
from .staged_batch import batch_buffers, batch_slots

__all__ = ["workspace_buffers", "complex_workspace_buffers", "batch_workspace_buffers", "workspace_bytes",
           "MAX_TILE_K"]

#: The longest k tile of any catalogued variant: the fused path pads k to its tile.
MAX_TILE_K = 128


def workspace_buffers(m: int, n: int, k: int, moduli: int, mode: str, path: str,
                      group_size: int = 1, tile_k: int = MAX_TILE_K, contract: bool = False) -> dict[str, int]:
    """The workspace buffers (name -> bytes) an emulated m x n x k call asks for on
    ``path`` ("staged", "fused" or "prologue"), each operand counted as packed;
    ``contract``: the call runs the accuracy contract (and then ``moduli`` of them)."""
    if m == 0 or n == 0:
        return {}
    if k == 0:
        return {"zero_c": 8 * m * n, "zero_shift": 4 * max(m, n)}
    accurate = mode == "accurate"
    k16 = padded_k(k)
    n_pad = padded_n(n, fused=path == "fused")
    out: dict[str, int] = {}
    if contract:
        for name, nvec in (("a", m), ("b", n), ("", 0)):
            out |= contract_buffers(name, nvec, k)
    for name, nvec, rows_pad in (("a", m, m), ("b", n, n_pad)):
        out |= {f"pack_{name}": 8 * nvec * k, f"e{name}": 4 * nvec, f"fast_{name}": 4 * nvec,
                f"nf_{name}": 4 * nvec, f"shift_{name}": 4 * nvec}
        if accurate:
            out[f"bar_{name}"] = rows_pad * k16
    if accurate:
        out["gpart"] = 4 * m * n_pad
        out["shift_work"] = 4 * shift_work_words(m, n)
        if k16 > K_CHUNK:
            out["g"] = 8 * m * n
    plane = m * n_pad
    if path == "fused":
        kp = round_up(k, tile_k)
        out["ra"], out["rb"] = m * moduli * kp, n_pad * moduli * kp
        out["x"] = sum(partial_bytes(size) for size in group_sizes(moduli, group_size)) * plane
    else:
        nchunks = k_chunks(k16)
        if path == "staged":
            out["ra"], out["rb"] = moduli * m * k16, moduli * n_pad * k16
        out["c32"] = 4 * nchunks * moduli * plane
    return {name: max(size, 16) for name, size in out.items()}


def complex_workspace_buffers(m: int, n: int, k: int, moduli: int, mode: str, path: str, group_size: int = 1,
                              tile_k: int = MAX_TILE_K, contract: bool = False,
                              karatsuba_fits: bool = True) -> dict[str, int]:
    """The buffers (name -> bytes) an emulated complex m x n x k call asks for: the
    complex layer's realified operands and product (``a_hat``, ``b_hat``, ``t``; counted
    always, though op(A) may serve as Ahat in place and T may be the output itself) and
    its realified m x 2n x 2k product's (:func:`workspace_buffers`). Where the staged path
    may run Karatsuba (fast mode, m, n, k >= config.karatsuba_min()): the three parts'
    residue planes and one panel's int32 products (paths.karatsuba) in place of the
    realified product's residue and int32 planes, or, ``karatsuba_fits=False``, what a
    call keeps whose parts did not fit: the realified product's planes (its int32 ones
    grown to Karatsuba's, had those been made) and no parts."""
    if m == 0 or n == 0 or k == 0:
        return {}   # beta c (or zeros) from the complex layer alone: no real product
    out = {"a_hat": 16 * m * k, "b_hat": 32 * k * n, "t": 16 * m * n}
    out |= workspace_buffers(m, 2 * n, 2 * k, moduli, mode, path, group_size, tile_k, contract)
    del out["pack_a"]   # Ahat's rows are contiguous along k: never packed (Bhat, k-strided, always)
    if path == "staged" and mode == "fast" and min(m, n, k) >= config.karatsuba_min():
        kq, nq = padded_k(k), padded_n(n)
        nchunks = k_chunks(kq)
        c32 = 4 * nchunks * 3 * moduli * m * panel_columns(moduli, m, nq, nchunks)
        if karatsuba_fits:   # the parts' planes are made in place of the realified ones
            del out["ra"], out["rb"]
            out |= {"c32": c32, "ra3": 3 * moduli * m * kq, "rb3": 3 * moduli * nq * kq}
        else:
            out["c32"] = max(out["c32"], c32)
    return out


def batch_workspace_buffers(batch: int, m: int, n: int, k: int, moduli: int, mode: str,
                            contract: bool = False) -> dict[str, int]:
    """The buffers (name -> bytes) a batch of ``batch`` emulated float64 m x n x k products
    asks for on the staged path (paths.staged_batch): one element's stages, and the
    residue and int32 planes, shifts and non-finite counts of as many elements as one
    INT8 launch takes."""
    out = workspace_buffers(m, n, k, moduli, mode, "staged", contract=contract)
    if batch < 2 or m == 0 or n == 0 or k == 0:
        return out
    out |= batch_buffers(min(batch, batch_slots(moduli, m, n, k)), moduli, m, n, k)
    return {name: max(size, 16) for name, size in out.items()}


def workspace_bytes(m: int, n: int, k: int, *, moduli=None, mode=None, path: str | None = None,
                    dtype=None, batch: int = 1) -> int:
    """Bytes of device memory the emulation's workspaces hold after an m x n x k call
    with ``moduli`` and ``mode`` on ``path`` ("staged", "fused"; None: the larger of the
    two, what the dispatcher may choose), for any of the fused kernels' group sizes.
    ``moduli=None`` is gemm's default, the accuracy contract: its buffers and the most
    moduli it may choose (20), ``mode`` defaulting to "fast" there and to "accurate" with
    an explicit count. ``dtype``: float64 (None) or complex128, a complex call of that
    shape (:func:`complex_workspace_buffers`). ``batch``: a batched call of that many
    elements of the shape (float64 ones run their INT8 products for many elements at once
    on the staged path: :func:`batch_workspace_buffers`; complex ones run element by
    element). An upper bound (see the module docstring); the native paths need none."""
    contract = moduli is None
    count, mode, _ = resolve_accuracy(moduli, None, mode)
    count = CONTRACT_MODULI[-1] if contract else count
    for dim, value in (("m", m), ("n", n), ("k", k), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{dim} must be a non-negative int, got {value!r}")
    paths = ("staged", "fused") if path is None else (path,)
    for p in paths:
        if p not in ("staged", "fused", "prologue"):
            raise ValueError(f"path must be 'staged', 'fused', 'prologue' or None, got {p!r}")
    try:
        kind = np.dtype(np.float64 if dtype is None else dtype)
    except TypeError as exc:
        raise ValueError(f"dtype must be float64 or complex128, got {dtype!r}") from exc
    if kind not in (np.float64, np.complex128):
        raise ValueError(f"dtype must be float64 or complex128, got {kind}")
    groups = range(1, min(MAX_GROUP_SIZE, count) + 1)
    if batch == 0:
        return 0
    if kind == np.float64 and batch > 1 and "staged" in paths:
        batched = sum(batch_workspace_buffers(batch, m, n, k, count, mode, contract).values())
        return max([batched] + [sum(workspace_buffers(m, n, k, count, mode, p, group_size=g, contract=contract)
                                    .values()) for p in paths if p != "staged" for g in groups])
    if kind == np.complex128:
        return max(sum(complex_workspace_buffers(m, n, k, count, mode, p, group_size=g, contract=contract,
                                                 karatsuba_fits=fits).values())
                   for p in paths for g in groups for fits in (True, False))
    return max(sum(workspace_buffers(m, n, k, count, mode, p, group_size=g, contract=contract).values())
               for p in paths for g in groups)
