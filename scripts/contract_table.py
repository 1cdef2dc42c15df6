"""The accuracy contract on the GPU, per input family: native DGEMM's error beside the
emulation's under the contract (``ozaki_cutlass.gemm(a, b, policy="emulate")``: the default
call, except that the shape-based auto policy may run native DGEMM instead), the moduli
count, mode and equilibration it chose, its certified bound, and both times (alternating
rounds, CUDA events, medians).

Errors are normwise over sampled rows of C against a double-double product of those rows
(``ozaki_cutlass.numerics.accuracy.dd_product``, about 2^-100 per term); the families are
those of docs/accuracy.md:

    phi P        (U - 0.5) exp(P N(0,1)) in A and B
    inner S      (A D)(D^-1 B) with D = diag(2^+S, 2^-S, ...) on phi 0.5 inputs
    uniform      U[0,1) in A and B (nonnegative: the truncation errors add up along k)
    rows S       phi 0.5 inputs, rows of A scaled by 2^U(-S, S), columns of B by 2^U(-S/2, S/2)

    python scripts/contract_table.py --json out/contract.json      (GPU, CuPy; ~3 min on an H200)

``--overhead`` times instead, on phi 0.5 cubes, the contract call against the same count and
mode given explicitly (the contract's own cost: its stages and the one read), 15 moduli
in accurate mode (the default before the contract) and native DGEMM, in alternation; and
whether a last contract call ran its key's guess (``timings["speculation"]``).
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import numpy as np

DEFAULT_CASES = (
    ("phi", 0.5, 4096, 4096, 4096), ("phi", 2, 4096, 4096, 4096), ("phi", 4, 4096, 4096, 4096),
    ("phi", 8, 4096, 4096, 4096), ("phi", 0.5, 8192, 8192, 8192),
    ("inner", 0, 4096, 4096, 4096), ("inner", 10, 4096, 4096, 4096), ("inner", 20, 4096, 4096, 4096),
    ("inner", 30, 4096, 4096, 4096), ("inner", 40, 4096, 4096, 4096),
    ("uniform", 0, 1024, 1024, 16384), ("uniform", 0, 512, 512, 65536), ("uniform", 0, 256, 256, 262144),
    ("rows", 600, 4096, 4096, 4096),
)


def make(cp, name: str, p: float, m: int, n: int, k: int, seed: int):
    rs = cp.random.default_rng(seed)
    if name == "uniform":
        return rs.random((m, k)), rs.random((k, n))
    spread = p if name == "phi" else 0.5
    a = (rs.random((m, k)) - 0.5) * cp.exp(spread * rs.standard_normal((m, k)))
    b = (rs.random((k, n)) - 0.5) * cp.exp(spread * rs.standard_normal((k, n)))
    if name == "inner":
        d = cp.where(cp.arange(k) % 2 == 0, int(p), -int(p))
        return cp.ldexp(a, d[None, :]), cp.ldexp(b, -d[:, None])
    if name == "rows":
        s = int(p)
        return (cp.ldexp(a, rs.integers(-s, s + 1, m)[:, None].astype(cp.int32)),
                cp.ldexp(b, rs.integers(-s // 2, s // 2 + 1, n)[None, :].astype(cp.int32)))
    return a, b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4, help="sampled rows of C per case (default 4)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the records here")
    ap.add_argument("--overhead", action="store_true", help="time the contract's own cost (see above)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384],
                    help="--overhead: the cubes' n (default 4096 8192 16384)")
    ap.add_argument("--rotate", action="store_true",
                    help="--overhead: start each round one call later (no call always follows DGEMM)")
    args = ap.parse_args()
    import cupy as cp

    if args.overhead:
        return overhead(cp, args)

    import ozaki_cutlass
    from ozaki_cutlass.device import driver
    from ozaki_cutlass.numerics.accuracy import dd_product, normwise_error
    from ozaki_cutlass.tools.measure import write_results

    records = []
    print("| family | m x n x k | DGEMM error | ours | moduli, mode | equilibrated | certified bound "
          "| DGEMM ms | ours ms | x DGEMM |")
    print("|---|---|---:|---:|---|---|---:|---:|---:|---:|")
    for name, p, m, n, k in DEFAULT_CASES:
        a, b = make(cp, name, p, m, n, k, args.seed)
        rows = np.linspace(0, m - 1, args.rows).astype(int)
        ref = dd_product(cp.asnumpy(a[rows]), cp.asnumpy(b))
        t = {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ozaki_cutlass.AccuracyWarning)
            ours = ozaki_cutlass.gemm(a, b, timings=t, policy="emulate")
        native = a @ b
        err_ours = normwise_error(cp.asnumpy(ours[rows]), *ref)
        err_native = normwise_error(cp.asnumpy(native[rows]), *ref)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ozaki_cutlass.AccuracyWarning)
            times, _ = driver.event_times([lambda: ozaki_cutlass.gemm(a, b, policy="emulate"), lambda: a @ b],
                                          args.warmup, args.reps)
        ms_ours, ms_native = statistics.median(times[0]), statistics.median(times[1])
        c = t.get("contract") or {}
        chose = "native" if t["path"] == "native" else f"{t.get('moduli')} {t.get('mode')}"
        rec = {"family": name, "param": p, "m": m, "n": n, "k": k, "error_dgemm": err_native, "error": err_ours,
               "path": t["path"], "policy": t.get("policy"), "contract": c, "ms": ms_ours, "ms_dgemm": ms_native,
               "warnings": [str(w.message) for w in caught]}
        records.append(rec)
        label = f"{name} {p:g}" if name != "uniform" else "uniform"
        print(f"| {label} | {m}x{n}x{k} | {err_native:.2e} | {err_ours:.2e} | {chose} | "
              f"{'yes' if c.get('equilibrated') else 'no'} | {c.get('bound', float('nan')):.2e} | "
              f"{ms_native:.2f} | {ms_ours:.2f} | {ms_native / ms_ours:.2f} |", flush=True)
        del a, b, ours, native
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        write_results(args.json, {"records": records})
    return 0


def overhead(cp, args) -> int:
    import ozaki_cutlass
    from ozaki_cutlass.device import driver
    from ozaki_cutlass.tools.measure import write_results

    records = []
    print("| n | contract ms | same count and mode, explicit ms | 15 accurate ms | DGEMM ms | chose |")
    print("|---:|---:|---:|---:|---:|---|")
    for n in args.sizes:
        a, b = make(cp, "phi", 0.5, n, n, n, args.seed)
        t = {}
        ozaki_cutlass.gemm(a, b, timings=t, policy="emulate")
        count, mode = t["moduli"], t["mode"]
        calls = [lambda: ozaki_cutlass.gemm(a, b, policy="emulate"),
                 lambda: ozaki_cutlass.gemm(a, b, moduli=count, mode=mode),
                 lambda: ozaki_cutlass.gemm(a, b, moduli=15, mode="accurate"), lambda: a @ b]
        times, _ = driver.event_times(calls, args.warmup, args.reps, rotate=args.rotate)
        ms = [statistics.median(x) for x in times]
        last = {}
        ozaki_cutlass.gemm(a, b, timings=last, policy="emulate")  # did the steady loop run its guess?
        spec = last.get("speculation")
        records.append({"n": n, "moduli": count, "mode": mode, "path": t["path"], "ms_default": ms[0],
                        "ms_explicit": ms[1], "ms_15_accurate": ms[2], "ms_dgemm": ms[3], "speculation": spec,
                        "rotated": args.rotate})
        print(f"| {n} | {ms[0]:.2f} | {ms[1]:.2f} | {ms[2]:.2f} | {ms[3]:.2f} | {count} {mode} ({t['path']}"
              f"{', guess ' + spec if spec else ''}) |", flush=True)
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        write_results(args.json, {"overhead": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
