"""Does ozaki_cutlass.gemm return before the GPU is done? (device run)
For CuPy inputs at n = 4096 and 8192: the wall-clock time until the call returns against
the time until its stream is idle, median of 5 after a warm-up call; and a NaN input to
show the pattern is still applied (compared with the NumPy reference's pattern).
    python scripts/async_check.py"""

import argparse
import statistics
import time

import numpy as np

import ozaki_cutlass
from ozaki_cutlass import reference


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    import cupy as cp

    for n in (4096, 8192):
        a, b = cp.random.rand(n, n) - 0.5, cp.random.rand(n, n) - 0.5
        ozaki_cutlass.gemm(a, b, policy="emulate")
        cp.cuda.Device().synchronize()
        ret, done = [], []
        for _ in range(5):
            t0 = time.perf_counter()
            ozaki_cutlass.gemm(a, b, policy="emulate")
            t1 = time.perf_counter()
            cp.cuda.Device().synchronize()
            t2 = time.perf_counter()
            ret.append(1e3 * (t1 - t0))
            done.append(1e3 * (t2 - t0))
        print(f"n = {n}: the call returns after {statistics.median(ret):.2f} ms, the GPU is done after "
              f"{statistics.median(done):.2f} ms (wall clock, median of 5)")

    rng = np.random.default_rng(0)
    ha, hb = rng.random((300, 200)) - 0.5, rng.random((200, 250)) - 0.5
    ha[3, 7], hb[5, 11], hb[9, 20] = np.nan, np.inf, -np.inf
    got = cp.asnumpy(ozaki_cutlass.gemm(cp.asarray(ha), cp.asarray(hb), policy="emulate"))
    want = reference.gemm(ha, hb)
    print("NaN/Inf inputs: GPU equals the reference bit for bit:",
          np.array_equal(got.view(np.int64), want.view(np.int64)),
          f"({int(np.isnan(got).sum())} NaN, {int(np.isinf(got).sum())} Inf entries)")


if __name__ == "__main__":
    main()
