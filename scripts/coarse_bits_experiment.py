"""Experiment, not the shipped numerics: accurate mode with finer coarse magnitudes.
The shipped coarse bound uses ceil(2^(6 - E) |x|) <= 64 (int8, COARSE_BITS = 6); small
entries are rounded up to 1/64 of their row's (column's) maximum, and that rounding is
where the spare CRT range goes (docs/benchmarks.md). This runs the NumPy reference with
COARSE_BITS = 6, 7, 8 (7: magnitudes <= 128, 8: <= 256: unsigned 8-bit operands of a
u8 x u8 GEMM; 128 and 256 themselves need the top code, so a GPU version would store
ceil(...) - 1 or split the chunk, not studied here) and prints the normwise error against
a double-double product for 14 and 15 moduli next to float64 @, and checks that no entry
can wrap (sum |A'||B'| <= P/2, with Python integers on sampled rows).
    python scripts/coarse_bits_experiment.py [n]   (CPU; n = 1024: about a minute)"""
import math
import sys

import numpy as np

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import dd_product, normwise_error, random_matrix
from ozaki_cutlass.numerics.moduli import crt_constants


def coarse_magnitudes_wide(x, axis, exps):
    e = np.expand_dims(exps, axis)
    q = np.ceil(np.ldexp(np.abs(x), R.COARSE_BITS - e))
    q = np.where((x != 0) & (q == 0), 1.0, q)
    return q.astype(np.int64)


def coarse_bound_wide(abar, bbar):
    return (abar.astype(np.float64) @ bbar.astype(np.float64)).astype(np.int64)  # < 2^53: exact


def no_wrap(a, b, count, mode, rows):
    consts = crt_constants(count)
    s = R.choose_scaling(a, b, consts, mode)
    A = R.scale_to_integers(a, s.mu, 1).astype(object)
    B = R.scale_to_integers(b, s.nu, 0).astype(object)
    half = math.prod(consts.moduli) // 2
    return all(int(np.abs(A[i]).dot(np.abs(B)).max()) <= half for i in rows)


R.coarse_magnitudes = coarse_magnitudes_wide
R.coarse_bound = coarse_bound_wide
rng = np.random.default_rng(11)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
for phi in (0.5,):
    a, b = random_matrix(n, n, phi, rng), random_matrix(n, n, phi, rng)
    hi, lo = dd_product(a, b)
    print(f"n = {n}, phi = {phi}: float64 @ error {normwise_error(a @ b, hi, lo):.2e}")
    for bits in (6, 7, 8):
        R.COARSE_BITS = bits
        errs = [normwise_error(R.gemm(a, b, moduli=c, mode="accurate"), hi, lo) for c in (14, 15)]
        safe = no_wrap(a, b, 14, "accurate", range(0, n, max(1, n // 8)))
        sc = R.choose_scaling(a, b, crt_constants(14), "accurate")
        print(f"  coarse bits {bits}: 14 moduli {errs[0]:.2e}, 15 moduli {errs[1]:.2e}; "
              f"14 moduli: shifts sum mu {int(sc.mu.sum())}, nu {int(sc.nu.sum())}; "
              f"no wrap-around on sampled rows: {safe}", flush=True)
