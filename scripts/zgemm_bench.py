"""Complex GEMM against native ZGEMM (device run; issue 19): ``ozaki_cutlass.gemm`` on
complex128 CuPy arrays (the default call: the accuracy contract, policy auto; and 15 moduli
in accurate mode) against CuPy's ``a @ b`` (cuBLAS ZGEMM), timed with CUDA events around
each call, the calls in alternation, fresh random inputs per size, median.
    python scripts/zgemm_bench.py [--sizes 4096 8192] [--reps 5] [--phi 0.5] [--out F.json]
Errors: on sampled entries (8 rows x 8 columns) against the exact product (Python
integers), normwise over the same entries of |Re A||Re B| + |Im A||Im B| (and the same for
Im), for ours and ZGEMM's. TFLOP/s counts 8 m n k (a complex multiply-add is 8 real
flops)."""

import argparse
import statistics

import numpy as np

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.numerics import zgemm as Z
from ozaki_cutlass.numerics.accuracy import random_matrix
from ozaki_cutlass.tools.measure import write_rows


def one_size(cp, n: int, phi: float, reps: int) -> list[dict]:
    rng = np.random.default_rng(n)
    a = random_matrix(n, n, phi, rng) + 1j * random_matrix(n, n, phi, rng)
    b = random_matrix(n, n, phi, rng) + 1j * random_matrix(n, n, phi, rng)
    da, db = cp.asarray(a), cp.asarray(b)
    timings = {}
    ozaki_cutlass.gemm(da, db, timings=timings)       # builds and decides first
    calls = [("cupy a @ b (cuBLAS ZGEMM)", lambda: da @ db),
             ("gemm (contract, auto)", lambda: ozaki_cutlass.gemm(da, db)),
             ("gemm (15 moduli, accurate)", lambda: ozaki_cutlass.gemm(da, db, moduli=15, mode="accurate"))]
    times, results = driver.event_times([fn for _, fn in calls], 1, reps, stream=cp.cuda.get_current_stream().ptr)
    sample = np.sort(rng.choice(n, 8, replace=False)), np.sort(rng.choice(n, 8, replace=False))
    native_ms = statistics.median(times[0])
    rows = []
    for (label, _), t, res in zip(calls, times, results):
        ms = statistics.median(t)
        rows_, cols_ = sample
        err = Z.sampled_error(res.get()[np.ix_(rows_, cols_)], a[rows_], b[:, cols_])
        moduli = timings.get("moduli") if "contract" in label else (15 if "15" in label else None)
        row = dict(n=n, call=label, ms=ms, tflops=8 * n**3 / ms / 1e9, speedup=native_ms / ms, error=err,
                   moduli=moduli, path=timings.get("path") if "contract" in label else None)
        rows.append(row)
        print(f"{n:>6} {label:<28} {ms:9.2f} {row['tflops']:8.1f} {row['speedup']:8.3f} {err:9.2e}  "
              f"{moduli if moduli is not None else '-'}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--phi", type=float, default=0.5)
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    import cupy as cp

    rows_out = []
    print(f"ZGEMM, complex128 CuPy arrays, entries (U - 0.5) exp({args.phi} N(0,1)) in each part; CUDA events, "
          f"calls in alternation, 1 warm-up round, median of {args.reps}")
    print(f"{'n':>6} {'call':<28} {'ms':>9} {'TFLOP/s':>8} {'x ZGEMM':>8} {'error':>9}  moduli")
    for n in args.sizes:
        rows_out += one_size(cp, n, args.phi, args.reps)
        ozaki_cutlass.empty_cache()
        cp.get_default_memory_pool().free_all_blocks()
    if args.out:
        write_rows(args.out, rows_out, phi=args.phi, reps=args.reps)


if __name__ == "__main__":
    main()
