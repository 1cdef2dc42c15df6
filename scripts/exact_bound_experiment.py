"""Experiment, not the shipped numerics: accurate-mode scaling against the exact bound
T = floor(P/2 / (1 + 2^-20)) instead of 2^pb (integer tests 2^t G <= T and 4^t Q <= T in
place of pb - ceil(log2 G) and (pb - ceil(log2 Q)) / 2), on the NumPy reference; the row
and column split of the gains is unchanged. Checks that no entry can wrap (sum |A'||B'| <=
P/2) and prints normwise errors (also with a second pass that gives each row the slack
its tightest entry has left after the column gains) against a double-double product for 13-15 moduli next to
float64 @. The scalings are passed explicitly: the product runs through
ozaki_cutlass.reference's public stages with each scaling (with the shipped one it gives
reference.gemm's bits: checked).
    python scripts/exact_bound_experiment.py [n]   (CPU; n = 1024 takes ~2 min)"""

import argparse
import math

import numpy as np

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import dd_product, normwise_error, random_matrix
from ozaki_cutlass.numerics.moduli import BOUND_MARGIN_BITS, COARSE_BITS, crt_constants
from ozaki_cutlass.templates.constants import NO_CONSTRAINT  # the slack of pairs G_ij = 0 leaves free


def exact_T(consts):
    P = math.prod(consts.moduli)
    M = 1 << BOUND_MARGIN_BITS
    return (P * M) // (2 * (M + 1))


def choose_exact(a, b, consts, mode, refill=False):
    pb = consts.bound_exponent
    T = exact_T(consts)
    ea, eb = R.exponents(a, 1), R.exponents(b, 0)

    def fast(x, axis, e):
        k = x.shape[axis]
        qb = R.fast_bound_bits(k)
        q = np.ceil(np.ldexp(np.abs(x), qb - np.expand_dims(e, axis)))
        q = np.where((x != 0) & (q == 0), 1.0, q)
        Q = np.sum(q.astype(np.uint64) ** np.uint64(2), axis=axis, dtype=np.uint64)
        t = np.array([((T // int(v)).bit_length() - 1) // 2 if v else 0 for v in Q], dtype=np.int64)
        return np.where(Q > 0, t - e + qb, 0).astype(np.int64)

    mu, nu = fast(a, 1, ea), fast(b, 0, eb)
    if mode == "accurate":
        g = R.coarse_bound(R.coarse_magnitudes(a, 1, ea), R.coarse_magnitudes(b, 0, eb))
        gl = np.vectorize(lambda v: (T // int(v)).bit_length() - 1 if v > 0 else 0, otypes=[np.int64])(g)
        c = gl + 2 * COARSE_BITS - ea[:, None] - eb[None, :]
        slack = np.where(g > 0, c - mu[:, None] - nu[None, :], NO_CONSTRAINT)
        row_min = slack.min(axis=1)
        d = np.clip(row_min // 2, 0, np.maximum(pb - ea - mu, 0))
        col_min = (slack - d[:, None]).min(axis=0)
        gc = np.clip(col_min, 0, np.maximum(pb - eb - nu, 0))
        if refill:  # give each row the slack its tightest entry still has (a second pass)
            rest = np.where(g > 0, slack - d[:, None] - gc[None, :], NO_CONSTRAINT).min(axis=1)
            d = d + np.clip(rest, 0, np.maximum(pb - ea - mu - d, 0))
        mu, nu = mu + d, nu + gc
    return R.Scaling(mu=mu, nu=nu, exps_a=ea, exps_b=eb)


def gemm_scaled(a, b, consts, sc):
    """reference.gemm (finite a and b, alpha 1, beta 0) with the shifts of ``sc``."""
    a_int, b_int = R.scale_to_integers(a, sc.mu, 1), R.scale_to_integers(b, sc.nu, 0)
    r = R.modular_products(R.residues(a_int, consts.moduli), R.residues(b_int.T, consts.moduli), consts.moduli)
    return R.unscale(R.crt_reconstruct(r, consts), sc.mu, sc.nu, 1.0, 0.0, None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int, nargs="?", default=512, help="square size (default 512)")
    n = p.parse_args().n
    rng = np.random.default_rng(7)
    for phi in (0.5, 2.0):
        a, b = random_matrix(n, n, phi, rng), random_matrix(n, n, phi, rng)
        hi, lo = dd_product(a, b)
        print(f"n={n} phi={phi}: float64 @ error {normwise_error(a @ b, hi, lo):.2e}")
        for count in (13, 14, 15):
            consts = crt_constants(count)
            errs = []
            refilled = lambda a, b, c, m: choose_exact(a, b, c, m, refill=True)  # noqa: E731
            for name, fn in (("pb bound", R.choose_scaling), ("exact T", choose_exact),
                             ("exact T + row refill", refilled)):
                sc = fn(a, b, consts, "accurate")
                S = np.abs(R.scale_to_integers(a, sc.mu, 1)) @ np.abs(R.scale_to_integers(b, sc.nu, 0))
                assert S.max() <= math.prod(consts.moduli) / 2, "wraparound risk"
                got = gemm_scaled(a, b, consts, sc)
                if fn is R.choose_scaling:  # the stages above, with the shipped scaling, are reference.gemm
                    assert np.array_equal(got.view(np.int64), R.gemm(a, b, moduli=count).view(np.int64))
                errs.append((name, normwise_error(got, hi, lo), float(np.mean(sc.mu)) + float(np.mean(sc.nu))))
            print(f"   {count} moduli: " + "; ".join(f"{nm}: error {e:.2e} (mean mu+nu {s:.2f})" for nm, e, s in errs))


if __name__ == "__main__":
    main()
