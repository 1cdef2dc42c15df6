"""ctypes access to a built fused modulus-group GEMM, and its NumPy twin (scratch helpers
for test_fused_host.py / test_fused_gpu.py; the runtime's own wrapper lives in
ozaki_cutlass.kernels)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

_int, _i64, _ptr = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
OUT = Path(__file__).resolve().parent / "out"


class FusedLib:
    def __init__(self, artifact):
        self.variant = artifact.variant
        sym = artifact.symbol
        self.lib = ctypes.CDLL(str(artifact.library_path), mode=ctypes.RTLD_LOCAL)
        self._run = getattr(self.lib, f"{sym}_run")
        self._run.restype = _int
        self._run.argtypes = [_int, _int, _int, _int, _ptr, _i64, _ptr, _i64, _ptr, _i64,
                              ctypes.POINTER(ctypes.c_uint32), _ptr, ctypes.c_size_t, _ptr]
        self._ws = getattr(self.lib, f"{sym}_workspace_size")
        self._ws.restype, self._ws.argtypes = ctypes.c_size_t, [_int, _int, _int, _int]
        for what, restype in (("name", ctypes.c_char_p), ("abi_version", _int),
                              ("last_error", ctypes.c_char_p)):
            f = getattr(self.lib, f"{sym}_{what}")
            f.restype, f.argtypes = restype, []
            setattr(self, what, f)

    def workspace_size(self, m, n, k_pad, group_size):
        return int(self._ws(m, n, k_pad, group_size))

    def run(self, m, n, k_pad, group_size, a, lda, b, ldb, x, ldx, moduli,
            workspace=0, workspace_bytes=0, stream=0):
        """Returns (status, last_error). Pointers are integers; moduli a Python sequence."""
        mod = (ctypes.c_uint32 * max(1, len(moduli)))(*moduli) if moduli is not None else None
        status = self._run(m, n, k_pad, group_size, a or None, lda, b or None, ldb, x or None, ldx,
                           mod, workspace or None, workspace_bytes, stream or None)
        return status, self.last_error().decode()


def crt_weights(moduli):
    """c_g = (M/m_g) ((M/m_g)^-1 mod m_g) mod M, exact Python integers."""
    big = 1
    for m in moduli:
        big *= m
    return [(big // m) * pow(big // m, -1, m) % big for m in moduli], big


def reference(a, b, moduli, k_pad):
    """X for A (m x G*k_pad) and B (n x G*k_pad) int8, as the ABI defines it (int64 NumPy)."""
    weights, big = crt_weights(moduli)
    x = np.zeros((a.shape[0], b.shape[0]), dtype=object)
    for g, m in enumerate(moduli):
        sl = slice(g * k_pad, (g + 1) * k_pad)
        acc = a[:, sl].astype(np.int64) @ b[:, sl].astype(np.int64).T
        acc = ((acc + 2**31) % 2**32) - 2**31  # int32 wrap-around (never hit by residues)
        x = x + (acc % m).astype(object) * weights[g]
    return (x % big).astype(np.uint64).astype(np.uint32)


def symmetric_residues(rng, shape, m):
    """Random int8 values in the symmetric range of modulus m (for 256: [-128, 127])."""
    lo = -(m // 2)
    hi = (m - 1) // 2 if m % 2 else m // 2 - 1
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.int8)
