"""Batched GEMM against CuPy's batched matmul (cuBLAS strided-batched DGEMM) (device run;
issue 19): ``ozaki_cutlass.gemm`` on (batch, n, n) CuPy arrays, the default call (auto), the
emulation of the batch (15 moduli, accurate; the contract's choice with
``policy="emulate"``: the INT8 products of many elements in one launch per k chunk) and
the same emulation as a Python loop of single calls (its bits compared), timed with CUDA
events around each call, the calls in alternation, 1 warm-up round, median.
    python scripts/batched_bench.py [--shapes 64x1024 16x4096] [--reps 7] [--out F.json]"""

import argparse
import json
import statistics
import time

import numpy as np

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.tools.arguments import batch_shape


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=batch_shape, nargs="+", default=[(64, 1024), (16, 4096)], metavar="BxN")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    import cupy as cp

    rows = []
    print(f"batched DGEMM, (batch, n, n) float64 CuPy arrays, phi = 0.5; CUDA events, calls in alternation, "
          f"median of {args.reps}")
    for batch, n in args.shapes:
        rng = np.random.default_rng(batch * n)
        a = cp.asarray(np.stack([random_matrix(n, n, 0.5, rng) for _ in range(batch)]))
        b = cp.asarray(np.stack([random_matrix(n, n, 0.5, rng) for _ in range(batch)]))
        info, emulated = {}, {}
        ozaki_cutlass.gemm(a, b, timings=info)
        ozaki_cutlass.gemm(a, b, policy="emulate", timings=emulated)
        out = cp.empty_like(a)

        def loop():
            for i in range(batch):
                ozaki_cutlass.gemm(a[i], b[i], out=out[i], moduli=15, mode="accurate")
            return out

        together = ozaki_cutlass.gemm(a, b, moduli=15, mode="accurate")
        same = bool(cp.array_equal(together.view(cp.int64), loop().view(cp.int64)))
        print(f"  {batch:>3} x {n}^3  default: {info.get('path')} {info.get('kernel')}; policy='emulate': "
              f"{emulated.get('moduli')} {emulated.get('mode')}, {emulated.get('int8_launches')} INT8 launches; "
              f"15 accurate batch and loop bits equal: {same}")
        calls = [("cupy matmul (strided batched)", lambda: cp.matmul(a, b)),
                 (f"gemm default ({info.get('path')})", lambda: ozaki_cutlass.gemm(a, b)),
                 ("gemm policy='emulate' (batch)", lambda: ozaki_cutlass.gemm(a, b, policy="emulate")),
                 ("gemm 15 moduli accurate (batch)", lambda: ozaki_cutlass.gemm(a, b, moduli=15, mode="accurate")),
                 ("gemm 15 moduli accurate (loop of calls)", loop)]
        times, _ = driver.event_times([fn for _, fn in calls], 1, args.reps, stream=cp.cuda.get_current_stream().ptr)
        native = statistics.median(times[0])
        for (label, _), t in zip(calls, times):
            ms = statistics.median(t)
            row = dict(batch=batch, n=n, call=label, ms=ms, tflops=2 * batch * n**3 / ms / 1e9, speedup=native / ms,
                       same_bits_batch_and_loop=same)
            rows.append(row)
            print(f"  {batch:>3} x {n}^3  {label:<48} {ms:9.3f} ms {row['tflops']:7.1f} TFLOP/s "
                  f"{row['speedup']:6.3f}x", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reps": args.reps, "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
