"""The NumPy twin of the fused modulus-group GEMM's ABI (group_gemm_sm90.h), for
test_fused_gemm.py; the kernels are called through the runtime's own binding
(ozaki_cutlass.kernels.gemm.GroupGemm)."""

from __future__ import annotations

import numpy as np


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
