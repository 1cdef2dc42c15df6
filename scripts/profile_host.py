"""Host-side cost of ozaki_cutlass.gemm calls (device run): cProfile of many small calls
on the native and the emulated path and the auto policy's native fast lane, and an interleaved A/B of our cuBLAS call against
CuPy's matmul on one shape (the same library underneath: any gap is ours).
    python scripts/profile_host.py"""

import argparse
import cProfile
import pstats
import statistics
import time

import ozaki_cutlass
from ozaki_cutlass.device.driver import event_times


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    import cupy as cp

    a, b = cp.random.rand(256, 256), cp.random.rand(256, 256)
    for policy, reps in (("native", 500), ("emulate", 100)):
        for _ in range(20):
            ozaki_cutlass.gemm(a, b, policy=policy)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            ozaki_cutlass.gemm(a, b, policy=policy)
        cp.cuda.Device().synchronize()
        print(f"{policy}: {1e6 * (time.perf_counter() - t0) / reps:.1f} us per call (256^3, wall clock)")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(reps):
            ozaki_cutlass.gemm(a, b, policy=policy)
        prof.disable()
        cp.cuda.Device().synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    ozaki_cutlass.gemm(a, b)  # decides the shape (native: a small one), then the fast lane
    t0 = time.perf_counter()
    for _ in range(500):
        ozaki_cutlass.gemm(a, b)
    cp.cuda.Device().synchronize()
    print(f"auto (native fast lane): {1e6 * (time.perf_counter() - t0) / 500:.1f} us per call (256^3, wall clock)")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        ozaki_cutlass.gemm(a, b)
    prof.disable()
    cp.cuda.Device().synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    t0 = time.perf_counter()
    for _ in range(500):
        a @ b
    cp.cuda.Device().synchronize()
    print(f"cupy a @ b: {1e6 * (time.perf_counter() - t0) / 500:.1f} us per call (256^3, wall clock)")

    for m, n, k in ((4096, 4096, 65536), (4096, 4096, 4096)):
        x, y = cp.random.rand(m, k), cp.random.rand(k, n)
        (ours, theirs), _ = event_times([lambda: ozaki_cutlass.gemm(x, y, policy="native"), lambda: x @ y], 2, 10)
        print(f"{m}x{n}x{k}: ours {statistics.median(ours):.2f} ms, cupy {statistics.median(theirs):.2f} ms "
              f"(interleaved, median of 10)")


if __name__ == "__main__":
    main()
