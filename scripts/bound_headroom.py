"""How much of the CRT range the scaling leaves unused (CPU, NumPy reference only).

For phi-family inputs, the accurate-mode shifts of ozaki_cutlass.reference are applied
and, per output entry, slack = log2(P/2) - log2(sum_l |A'_il| |B'_lj|) is measured: bits
that a tighter (non power-of-two, exact-G) bound could still give to the shifts. Printed
per (n, phi, moduli): the smallest slack, and per row / column the slack of its tightest
entry (median, and the share with at least one whole bit to spare).
    python scripts/bound_headroom.py [--n 512 1024] [--phi 0.5 2.0] [--moduli 14 15]"""

import argparse
import math

import numpy as np

from ozaki_cutlass import reference as R
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.numerics.moduli import crt_constants


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, nargs="+", default=[512, 1024])
    p.add_argument("--phi", type=float, nargs="+", default=[0.5, 2.0])
    p.add_argument("--moduli", type=int, nargs="+", default=[14, 15])
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{'n':>5} {'phi':>4} {'N':>3} {'log2(P/2)':>9} {'pb':>4} {'min slack':>9} "
          f"{'row median':>10} {'rows >= 1':>9} {'col median':>10} {'cols >= 1':>9}")
    for n in args.n:
        for phi in args.phi:
            a, b = random_matrix(n, n, phi, rng), random_matrix(n, n, phi, rng)
            for count in args.moduli:
                consts = crt_constants(count)
                lhalf = math.log2(math.prod(consts.moduli) // 2)
                sc = R.choose_scaling(a, b, consts, "accurate")
                s = np.abs(R.scale_to_integers(a, sc.mu, 1)) @ np.abs(R.scale_to_integers(b, sc.nu, 0))
                slack = lhalf - np.log2(s)  # float64 sums: accurate to ~1e-16 relative, plenty here
                rows, cols = slack.min(axis=1), slack.min(axis=0)
                print(f"{n:5d} {phi:4.1f} {count:3d} {lhalf:9.2f} {consts.bound_exponent:4d} {slack.min():9.2f} "
                      f"{np.median(rows):10.2f} {np.mean(rows >= 1):9.2f} {np.median(cols):10.2f} "
                      f"{np.mean(cols >= 1):9.2f}")


if __name__ == "__main__":
    main()
