"""Batched GEMM against CuPy's batched matmul (cuBLAS strided-batched DGEMM) (device run;
issue 19): ``ozaki_cutlass.gemm`` on (batch, n, n) CuPy arrays, the default call (auto), the
emulation of the batch (15 moduli, accurate; the contract's choice with
``policy="emulate"``: the INT8 products of many elements in one launch per k chunk) and
the same emulation as a Python loop of single calls (its bits compared), timed with CUDA
events around each call, each pair of calls A/B (the default and the emulation against
CuPy's matmul, the batch against the loop), 1 warm-up round, median.
    python scripts/batched_bench.py [--shapes 64x1024 16x4096] [--reps 7] [--out F.json]"""

import argparse
import statistics

import numpy as np

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.tools.arguments import batch_shape
from ozaki_cutlass.tools.measure import write_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=batch_shape, nargs="+", default=[(64, 1024), (16, 4096)], metavar="BxN")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    import cupy as cp

    rows = []
    print(f"batched DGEMM, (batch, n, n) float64 CuPy arrays, phi = 0.5; CUDA events, each pair A/B, "
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

        single = {}
        ozaki_cutlass.gemm(a[0], b[0], moduli=15, mode="accurate", timings=single)
        together = ozaki_cutlass.gemm(a, b, moduli=15, mode="accurate")
        same = bool(cp.array_equal(together.view(cp.int64), loop().view(cp.int64)))
        print(f"  {batch:>3} x {n}^3  default: {info.get('path')} {info.get('kernel')}; policy='emulate': "
              f"{emulated.get('moduli')} {emulated.get('mode')}, {emulated.get('int8_launches')} INT8 launches; "
              f"a single element's call: {single.get('path')}; 15 accurate batch and loop bits equal: {same}")
        stream = cp.cuda.get_current_stream().ptr
        native = lambda: cp.matmul(a, b)   # noqa: E731
        batch15 = lambda: ozaki_cutlass.gemm(a, b, moduli=15, mode="accurate")   # noqa: E731
        # each pair timed A/B on its own: a call right after the INT8 emulation runs faster than
        # right after DGEMM (the power state), so three calls in one round would favour some
        pairs = [("gemm default", lambda: ozaki_cutlass.gemm(a, b), "cupy matmul (strided batched)", native),
                 ("gemm policy='emulate' (batch)", lambda: ozaki_cutlass.gemm(a, b, policy="emulate"),
                  "cupy matmul (strided batched)", native),
                 ("gemm 15 moduli accurate (batch)", batch15, "gemm 15 moduli accurate (loop of calls)", loop)]
        for label, fn, other_label, other in pairs:
            (t, t_other), _ = driver.event_times([fn, other], 1, args.reps, stream=stream)
            ms, other_ms = statistics.median(t), statistics.median(t_other)
            row = dict(batch=batch, n=n, call=label, ms=ms, tflops=2 * batch * n**3 / ms / 1e9, against=other_label,
                       against_ms=other_ms, ratio=other_ms / ms, same_bits_batch_and_loop=same)
            rows.append(row)
            print(f"  {batch:>3} x {n}^3  {label:<34} {ms:9.3f} ms {row['tflops']:6.1f} TFLOP/s, "
                  f"{other_label} {other_ms:9.3f} ms: x{row['ratio']:.3f}", flush=True)
    if args.out:
        write_rows(args.out, rows, reps=args.reps)


if __name__ == "__main__":
    main()
