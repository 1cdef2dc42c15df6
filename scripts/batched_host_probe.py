"""Where a native batched call's time goes (device run): CuPy's batched matmul,
``ozaki_cutlass.gemm`` (auto: one cublasDgemmStridedBatched), and the bare
``cublasDgemmStridedBatched`` through nvmath on our cuBLAS handle and on CuPy's, CUDA
events around each call, in alternation, median of 7; and both handles' math and atomics
modes.
    python scripts/batched_host_probe.py [--shapes 64x1024 16x4096]"""

import argparse
import statistics

import numpy as np

import ozaki_cutlass
from ozaki_cutlass.device import cublas, driver
from ozaki_cutlass.tools.arguments import batch_shape


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=batch_shape, nargs="+", default=[(64, 1024), (16, 4096)], metavar="BxN")
    args = ap.parse_args()
    import cupy as cp
    from nvmath.bindings import cublas as nb

    for batch, n in args.shapes:
        a, b = cp.random.rand(batch, n, n) - 0.5, cp.random.rand(batch, n, n) - 0.5
        ozaki_cutlass.gemm(a, b)
        ours, theirs = cublas.handles().blas(), cp.cuda.device.get_cublas_handle()
        print(f"math modes ours/CuPy's {nb.get_math_mode(ours)}/{nb.get_math_mode(theirs)}, atomics modes "
              f"{nb.get_atomics_mode(ours)}/{nb.get_atomics_mode(theirs)}")
        one, zero, out = np.ones(1), np.zeros(1), cp.empty((batch, n, n))
        stream = cp.cuda.get_current_stream().ptr

        def bare(handle):
            def call():
                nb.set_stream(handle, stream)
                nb.dgemm_strided_batched(handle, 0, 0, n, n, n, one.ctypes.data, b.data.ptr, n, n * n, a.data.ptr, n,
                                         n * n, zero.ctypes.data, out.data.ptr, n, n * n, batch)
            return call

        rows = [("cupy matmul", lambda: cp.matmul(a, b)),
                ("ozaki_cutlass.gemm (auto)", lambda: ozaki_cutlass.gemm(a, b)),
                ("bare strided batched, our handle", bare(ours)), ("bare strided batched, CuPy's handle", bare(theirs))]
        times, _ = driver.event_times([fn for _, fn in rows], 2, 7, stream=stream)
        for (label, _), t in zip(rows, times):
            print(f"  {batch} x {n}^3  {label:<40} {statistics.median(t):8.3f} ms")


if __name__ == "__main__":
    main()
