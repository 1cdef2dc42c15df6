"""One ozaki_cutlass.gemm call on CuPy arrays, for a profiler to watch (ncu in
scripts/device_profile.sh). Inputs are made on the host and copied, so every kernel
launched is ours: python scripts/profile_gemm.py N PATH [MODULI] [MODE] [--warm]."""

import argparse

import numpy as np

import ozaki_cutlass
from ozaki_cutlass.numerics.accuracy import random_matrix


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", type=int, help="square size")
    p.add_argument("path", choices=["staged", "fused", "prologue"])
    p.add_argument("moduli", type=int, nargs="?", default=15)
    p.add_argument("mode", nargs="?", choices=["fast", "accurate"], default="accurate")
    p.add_argument("--warm", action="store_true", help="a first call loads the kernels and grows the workspace")
    args = p.parse_args()
    import cupy

    n, path, count, mode = args.n, args.path, args.moduli, args.mode
    rng = np.random.default_rng(n)
    a = cupy.asarray(random_matrix(n, n, 0.5, rng))
    b = cupy.asarray(random_matrix(n, n, 0.5, rng))
    if args.warm:
        ozaki_cutlass.gemm(a, b, moduli=count, mode=mode, path=path)
    t = {}
    ozaki_cutlass.gemm(a, b, moduli=count, mode=mode, path=path, timings=t)
    print(f"n={n} path={path} moduli={count} mode={mode}:",
          ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in t.items()))


if __name__ == "__main__":
    main()
