"""Experiment, not the shipped numerics: accurate mode with finer coarse magnitudes.
The shipped coarse bound uses ceil(2^(6 - E) |x|) <= 64 (int8, COARSE_BITS = 6); small
entries are rounded up to 1/64 of their row's (column's) maximum, and that rounding is
where the spare CRT range goes (docs/accuracy.md). This runs the NumPy reference's
stages with 6, 7 and 8 coarse bits (7: magnitudes <= 128, 8: <= 256: unsigned 8-bit
operands of a u8 x u8 GEMM; 128 and 256 themselves need the top code, so a GPU version
would store ceil(...) - 1 or split the chunk, not studied here) and prints the normwise
error against a double-double product for 14 and 15 moduli next to float64 @, and checks
that no entry can wrap (sum |A'||B'| <= P/2, with Python integers on sampled rows).
The coarse width is passed explicitly: the magnitudes and the accurate shifts for a given
width are written out here (with 6 bits they must give the reference's shifts: checked),
and the product runs through ozaki_cutlass.reference's public stages.
    python scripts/coarse_bits_experiment.py [n]   (CPU; n = 1024: about a minute)"""

import argparse
import math

import numpy as np

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import dd_product, normwise_error, random_matrix
from ozaki_cutlass.numerics.moduli import COARSE_BITS, crt_constants
from ozaki_cutlass.templates.constants import NO_CONSTRAINT  # the slack of pairs G_ij = 0 leaves free


def ceil_log2(g: np.ndarray) -> np.ndarray:
    """ceil(log2 g) for integers 1 <= g < 2^53, exactly (0 maps to 0)."""
    return np.frexp(np.maximum(g, 1).astype(np.float64) - 1.0)[1].astype(np.int64)


def coarse_magnitudes_wide(x, axis, exps, bits):
    """ceil(2^(bits - E) |x|) in [0, 2^bits], zero only for zeros (the reference's
    coarse_magnitudes at ``bits`` wide, as int64: 2^7 and 2^8 do not fit int8)."""
    e = np.expand_dims(exps, axis)
    q = np.ceil(np.ldexp(np.abs(x), bits - e))
    q = np.where((x != 0) & (q == 0), 1.0, q)
    return q.astype(np.int64)


def accurate_shifts_wide(g, exps_a, exps_b, mu_fast, nu_fast, bound_exponent, bits):
    """reference.accurate_shifts with the coarse width ``bits`` instead of COARSE_BITS."""
    c = bound_exponent + 2 * bits - exps_a[:, None] - exps_b[None, :] - ceil_log2(g)
    slack = np.where(g > 0, c - mu_fast[:, None] - nu_fast[None, :], NO_CONSTRAINT)
    cap_a = bound_exponent - exps_a - mu_fast
    cap_b = bound_exponent - exps_b - nu_fast
    d = np.clip(slack.min(axis=1) // 2, 0, np.maximum(cap_a, 0))
    gcol = np.clip((slack - d[:, None]).min(axis=0), 0, np.maximum(cap_b, 0))
    return mu_fast + d, nu_fast + gcol


def scaling_wide(a, b, consts, bits) -> R.Scaling:
    """reference.choose_scaling in accurate mode with ``bits``-wide coarse magnitudes."""
    pb = consts.bound_exponent
    ea, eb = R.exponents(a, 1), R.exponents(b, 0)
    mu, nu = R.fast_shifts(a, 1, ea, pb), R.fast_shifts(b, 0, eb, pb)
    # entries <= 2^8, k < 2^37: float64 sums are exact (as in reference.coarse_bound)
    g = R.coarse_bound(coarse_magnitudes_wide(a, 1, ea, bits), coarse_magnitudes_wide(b, 0, eb, bits))
    mu, nu = accurate_shifts_wide(g, ea, eb, mu, nu, pb, bits)
    return R.Scaling(mu=mu, nu=nu, exps_a=ea, exps_b=eb)


def gemm_scaled(a, b, consts, sc):
    """reference.gemm (finite a and b, alpha 1, beta 0) with the shifts of ``sc``."""
    a_int, b_int = R.scale_to_integers(a, sc.mu, 1), R.scale_to_integers(b, sc.nu, 0)
    r = R.modular_products(R.residues(a_int, consts.moduli), R.residues(b_int.T, consts.moduli), consts.moduli)
    return R.unscale(R.crt_reconstruct(r, consts), sc.mu, sc.nu, 1.0, 0.0, None)


def no_wrap(a, b, consts, sc, rows):
    A = R.scale_to_integers(a, sc.mu, 1).astype(object)
    B = R.scale_to_integers(b, sc.nu, 0).astype(object)
    half = math.prod(consts.moduli) // 2
    return all(int(np.abs(A[i]).dot(np.abs(B)).max()) <= half for i in rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int, nargs="?", default=1024, help="square size (default 1024)")
    n = p.parse_args().n
    rng = np.random.default_rng(11)
    for phi in (0.5,):
        a, b = random_matrix(n, n, phi, rng), random_matrix(n, n, phi, rng)
        hi, lo = dd_product(a, b)
        print(f"n = {n}, phi = {phi}: float64 @ error {normwise_error(a @ b, hi, lo):.2e}")
        for bits in (6, 7, 8):
            scalings = {c: scaling_wide(a, b, crt_constants(c), bits) for c in (14, 15)}
            if bits == COARSE_BITS:  # the copy above is the shipped rule at the shipped width
                for c, sc in scalings.items():
                    want = R.choose_scaling(a, b, crt_constants(c), "accurate")
                    assert np.array_equal(sc.mu, want.mu) and np.array_equal(sc.nu, want.nu), "differs from reference"
            errs = [normwise_error(gemm_scaled(a, b, crt_constants(c), scalings[c]), hi, lo) for c in (14, 15)]
            sc = scalings[14]
            safe = no_wrap(a, b, crt_constants(14), sc, range(0, n, max(1, n // 8)))
            print(f"  coarse bits {bits}: 14 moduli {errs[0]:.2e}, 15 moduli {errs[1]:.2e}; "
                  f"14 moduli: shifts sum mu {int(sc.mu.sum())}, nu {int(sc.nu.sum())}; "
                  f"no wrap-around on sampled rows: {safe}", flush=True)


if __name__ == "__main__":
    main()
