"""The accuracy contract on complex operands, on the NumPy reference (which the GPU matches
bit for bit: tests/gpu/test_zgemm_gpu.py): per input family, complex128 ``@``'s error
beside the default call's, the moduli count and mode the contract chose, and its certified
bound (the certificate: ||C - AB||_F <= bound || |A||B| ||_F + u ||AB||_F, the last term the
result's own rounding to float64). Errors over the whole result against a double-double product
(``numerics.accuracy.dd_product``, about 2^-100 per term), normwise over
|Re A||Re B| + |Im A||Im B| (and |Re A||Im B| + |Im A||Re B| for Im): the quantity the
certified bound is stated against, so each error can be set against its bound.

Families (each part of A and B drawn on its own):
    phi P        (U - 0.5) exp(P N(0,1))
    inner S      (A D)(D^-1 B) with D = diag(2^+S, 2^-S, ...) on phi 0.5 inputs
    uniform      U[0,1) in every part (nonnegative real and imaginary parts)
    rows S       phi 0.5 inputs, rows of A scaled by 2^U(-S, S), columns of B by 2^U(-S/2, S/2)

    python scripts/zgemm_accuracy.py [--json F]      (CPU; a minute or two)
"""

from __future__ import annotations

import argparse

import numpy as np

from ozaki_cutlass import reference
from ozaki_cutlass.numerics import zgemm as Z
from ozaki_cutlass.numerics.accuracy import dd_product, random_matrix
from ozaki_cutlass.tools.measure import write_results

CASES = (("phi", 0.5, 64, 64, 2048), ("phi", 2, 64, 64, 2048), ("phi", 4, 64, 64, 2048),
         ("inner", 10, 64, 64, 2048), ("inner", 30, 64, 64, 2048), ("uniform", 0, 32, 32, 16384),
         ("rows", 600, 64, 64, 2048))


def family(name: str, p: float, m: int, k: int, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    def part(r, c, phi):
        return random_matrix(r, c, phi, rng) + 1j * random_matrix(r, c, phi, rng)

    if name == "phi":
        return part(m, k, p), part(k, n, p)
    if name == "uniform":
        return rng.random((m, k)) + 1j * rng.random((m, k)), rng.random((k, n)) + 1j * rng.random((k, n))
    a, b = part(m, k, 0.5), part(k, n, 0.5)
    if name == "inner":
        d = np.where(np.arange(k) % 2 == 0, int(p), -int(p))
        return a * np.ldexp(1.0, d)[None, :], b * np.ldexp(1.0, -d)[:, None]
    if name == "rows":
        return (a * np.ldexp(1.0, rng.integers(-int(p), int(p) + 1, m))[:, None],
                b * np.ldexp(1.0, rng.integers(-int(p) // 2, int(p) // 2 + 1, n))[None, :])
    raise ValueError(name)


def relative_errors(c, a, b) -> tuple[float, float]:
    """(||C - AB||_F, ||AB||_F), both over || |Ahat||Bhat| ||_F; AB in double-double, no overflow."""
    a_hat, b_hat = Z.realify_left(a), Z.realify_right(b)
    hi, lo = dd_product(a_hat, b_hat)
    diff = (np.ascontiguousarray(c).view(np.float64) - hi) - lo
    scale = np.abs(a_hat) @ np.abs(b_hat)
    s = np.ldexp(1.0, int(np.frexp(np.max(scale))[1]))   # a power of two: exact
    norm = np.linalg.norm(scale / s)
    return float(np.linalg.norm(diff / s) / norm), float(np.linalg.norm(hi / s) / norm)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    rows = []
    print(f"{'family':<12} {'m x n x k':>16} {'complex128 @':>13} {'default':>10} {'bound':>10} "
          f"{'+ u|AB|':>10}  choice")
    for name, p, m, n, k in CASES:
        rng = np.random.default_rng(int(1000 * p) + k)
        a, b = family(name, p, m, k, n, rng)
        choice = reference.contract(a, b)
        ours, size = relative_errors(reference.gemm(a, b), a, b)
        native = relative_errors(a @ b, a, b)[0]
        allowed = choice.bound + 2.0**-53 * size   # the certificate, plus the result's own rounding
        row = dict(family=name, p=p, m=m, n=n, k=k, native=native, ours=ours, bound=choice.bound, allowed=allowed,
                   moduli=choice.moduli, mode=choice.mode, equilibrated=choice.equilibrated, native_fallback=choice.native)
        rows.append(row)
        what = "native (fallback)" if choice.native else f"{choice.moduli} {choice.mode}" + (
            ", equilibrated" if choice.equilibrated else "")
        print(f"{name + ' ' + str(p):<12} {f'{m}x{n}x{k}':>16} {native:13.2e} {ours:10.2e} {choice.bound:10.2e} "
              f"{allowed:10.2e}  {what}", flush=True)
        if ours > allowed:
            raise SystemExit(f"{name} {p}: the error {ours:.3e} exceeds the certificate {allowed:.3e}")
    if args.json:
        write_results(args.json, {"rows": rows}, gpu=False)  # the reference on the host: no GPU


if __name__ == "__main__":
    main()
