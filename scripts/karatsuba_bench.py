"""Karatsuba against the realified product for complex calls (device run; issue 19):
``ozaki_cutlass.gemm`` on complex128 CuPy n x n x n products, the default call and the
staged path (fast mode without an equilibration: three INT8 products per modulus,
paths.karatsuba) and the fused path (the realified product: four products' work), each
timed A/B with CuPy's ``a @ b`` (cuBLAS ZGEMM): CUDA events around each call, 1 warm-up
round, median; phases from ``timings=``; the bits of the staged and fused calls compared.
    python scripts/karatsuba_bench.py [--sizes 8192 16384] [--reps 5] [--out F.json]"""

import argparse
import statistics

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.tools.measure import CupyArrays, write_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", help="write the rows as JSON here")
    args = ap.parse_args()
    arrays = CupyArrays()
    cp = arrays.cp
    stream = int(cp.cuda.get_current_stream().ptr)
    rows = []
    for n in args.sizes:
        a, b = arrays.complex_pair(n, 0.5, n)
        calls = {"default": lambda: ozaki_cutlass.gemm(a, b),
                 "staged (Karatsuba)": lambda: ozaki_cutlass.gemm(a, b, path="staged"),
                 "fused (realified)": lambda: ozaki_cutlass.gemm(a, b, path="fused")}
        outs = {}
        for label, call in calls.items():
            ozaki_cutlass.empty_cache()   # one path's workspace at a time (Karatsuba's int32 planes are large)
            (t, tn), (outs[label], _) = driver.event_times([call, lambda: a @ b], 1, args.reps, stream)
            timings = {}   # after the timed rounds: the workspace is allocated
            ozaki_cutlass.gemm(a, b, timings=timings, path={"default": None, "staged (Karatsuba)": "staged",
                                                            "fused (realified)": "fused"}[label])
            ms, native = statistics.median(t), statistics.median(tn)
            row = dict(n=n, call=label, ms=ms, native_ms=native, x_native=native / ms,
                       tflops=8 * n**3 / ms / 1e9, path=timings.get("path"), moduli=timings.get("moduli"),
                       mode=timings.get("mode"), products=timings.get("products", "realified"),
                       phases={p: timings.get(p) for p in ("scale", "residues", "int8_gemm", "crt")})
            rows.append(row)
            print(f"{n:>6} {label:<20} {ms:9.2f} ms  x{row['x_native']:.3f} (native {native:.2f})  "
                  f"{row['path']} {row['moduli']} {row['mode']} {row['products']}  phases {row['phases']}",
                  flush=True)
        same = bool(cp.array_equal(outs["staged (Karatsuba)"].view(cp.int64), outs["fused (realified)"].view(cp.int64)))
        print(f"{n:>6} staged and fused bits equal: {same}", flush=True)
        rows.append(dict(n=n, staged_equals_fused=same))
        a = b = outs = None  # freed before the next size
        ozaki_cutlass.empty_cache()
        arrays.release()
    if args.out:
        write_rows(args.out, rows, reps=args.reps)


if __name__ == "__main__":
    main()
