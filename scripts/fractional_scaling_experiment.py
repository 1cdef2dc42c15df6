"""Experiment, not the shipped numerics: accurate mode with row and column scale factors
that are not powers of two, s_i = f_i 2^e_i with f_i in {1, 1 + 2^-F, ..., 2 - 2^-F}.

The accurate bound gives, per entry, the real slack c_ij = pb + 2 COARSE_BITS - E_i -
F_j - log2 G_ij of log2(s_i t_j) (the shipped code takes ceil(log2 G) and integer shifts,
so a row gains only when every entry of it has a whole bit to spare). Here the row and
column gains are split as in reference.accurate_shifts but in real numbers, then each
factor is rounded down to F fractional bits of mantissa, so s_i t_j 2^(E_i+F_j-2cb) G_ij
<= 2^pb still holds: no entry can wrap (checked with Python integers on sampled rows).
A' = trunc(fl(a f_i) 2^e_i) (53 significant bits, as the shipped scaled integers),
X = A'B' through the reference's residues and CRT, C = 2^-(e_i+e_j) (X / (f_i f_j)).
Prints normwise errors against a double-double product for 14 moduli (and 15) next to
float64 @ and the shipped integer-shift result.
    python scripts/fractional_scaling_experiment.py [n]   (CPU; n = 1024: a few minutes)"""
import argparse
import math

import numpy as np

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import dd_product, normwise_error, random_matrix
from ozaki_cutlass.numerics.moduli import COARSE_BITS, crt_constants


def fractional_scales(a, b, consts, frac_bits):
    pb = consts.bound_exponent
    ea, eb = R.exponents(a, 1), R.exponents(b, 0)
    mu, nu = R.fast_shifts(a, 1, ea, pb), R.fast_shifts(b, 0, eb, pb)
    g = R.coarse_bound(R.coarse_magnitudes(a, 1, ea), R.coarse_magnitudes(b, 0, eb)).astype(np.float64)
    with np.errstate(divide="ignore"):
        c = pb + 2 * COARSE_BITS - ea[:, None] - eb[None, :] - np.log2(g)
    slack = np.where(g > 0, c - mu[:, None] - nu[None, :], np.inf)
    cap_a, cap_b = pb - ea - mu, pb - eb - nu
    d = np.clip(slack.min(axis=1) / 2, 0, np.maximum(cap_a, 0))
    gc = np.clip((slack - d[:, None]).min(axis=0), 0, np.maximum(cap_b, 0))
    def factors(x):  # 2^x rounded down to frac_bits of mantissa: (f, e) with f in [1, 2)
        e = np.floor(x)
        f = np.floor(np.exp2(x - e) * 2**frac_bits) / 2**frac_bits
        return f, e.astype(np.int64)
    return factors(mu + d), factors(nu + gc)


def gemm_fractional(a, b, consts, frac_bits):
    (fa, sa), (fb, sb) = fractional_scales(a, b, consts, frac_bits)
    ai = np.trunc(np.ldexp(a * fa[:, None], sa[:, None]))
    bi = np.trunc(np.ldexp(b * fb[None, :], sb[None, :]))
    r = R.modular_products(R.residues(ai, consts.moduli), R.residues(bi.T, consts.moduli), consts.moduli)
    x = R.crt_reconstruct(r, consts)
    return np.ldexp(x / (fa[:, None] * fb[None, :]), -(sa[:, None] + sb[None, :])), ai, bi


def no_wrap(ai, bi, consts, rows):
    half = math.prod(consts.moduli) // 2
    A, B = np.abs(ai[list(rows)]).astype(object), np.abs(bi).astype(object)
    return all(int(A[r].dot(B).max()) <= half for r in range(len(rows)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int, nargs="?", default=512, help="square size (default 512)")
    n = p.parse_args().n
    rng = np.random.default_rng(13)
    for phi in (0.5, 2.0):
        a, b = random_matrix(n, n, phi, rng), random_matrix(n, n, phi, rng)
        hi, lo = dd_product(a, b)
        print(f"n = {n}, phi = {phi}: float64 @ error {normwise_error(a @ b, hi, lo):.2e}")
        for count in (14, 15):
            consts = crt_constants(count)
            line = [f"integer shifts {normwise_error(R.gemm(a, b, moduli=count, mode='accurate'), hi, lo):.2e}"]
            for fbits in (1, 2, 4):
                c, ai, bi = gemm_fractional(a, b, consts, fbits)
                ok = no_wrap(ai, bi, consts, range(0, n, max(1, n // 6)))
                line.append(f"{fbits} fraction bit{'s' if fbits > 1 else ''} {normwise_error(c, hi, lo):.2e}"
                            f"{'' if ok else ' (WRAPS)'}")
            print(f"  {count} moduli: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
