"""``ozaki-cutlass bench``: whole emulated calls (staged, fused, auto) against native DGEMM.

The staged and fused rows run an explicit moduli count (``--moduli``, default 15); the auto
row calls ``ozaki_cutlass.gemm(a, b)`` as a user does, under the accuracy contract, and
shows the moduli count, mode and bound it chose.

Each shape: fresh random inputs on the GPU (CuPy), native DGEMM and every path timed in
alternating rounds (CUDA events around each whole call, warm-up first, medians), the phase
breakdown from ``timings=``, the error of sampled rows against a double-double product,
and whether every path gave the same bits. Method and results: docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import statistics
from datetime import datetime, timezone

import numpy as np

from ..api import gemm
from ..device import driver
from ..device.arch import compute_capability
from ..options import resolve_moduli
from ..paths.launch import PHASES
from .arguments import PHI_MAX, moduli_count, nonnegative_int, positive_int, shape, spread
from .measure import missing_tools, native_dgemm, sample_error, sample_reference

__all__ = ["DEFAULT_SHAPES", "CSV_FIELDS", "bench_main", "add_bench_parser", "csv_rows", "write_csv", "write_plot"]

log = logging.getLogger(__name__)

AUTO_REPS_MAX, AUTO_BUDGET_MS = 200, 500.0  # the auto row's rounds: at most 200, about 0.5 s of native time


DEFAULT_SHAPES = (
    # squares
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (16384, 16384, 16384),
    # small k, large k, tall-skinny
    (16384, 16384, 1024), (4096, 4096, 65536), (65536, 1024, 4096),
)


CSV_FIELDS = ("m", "n", "k", "path", "kernel", "ms", "tflops", "ratio_to_native", "scale_ms",
              "residues_ms", "int8_gemm_ms", "crt_ms", "error", "native_error", "bit_identical")


def csv_rows(rows, paths):
    """Flatten benchmark rows (one per shape) into one CSV record per shape and path."""
    out = []
    for r in rows:
        base = {"m": r["m"], "n": r["n"], "k": r["k"], "native_error": r["native_error"],
                "bit_identical": r.get("bit_identical", "")}
        out.append(base | {"path": "native", "kernel": "cuBLAS DGEMM", "ms": r["native_ms"],
                           "tflops": r["native_tflops"], "ratio_to_native": 1.0, "error": r["native_error"]})
        for path in paths:
            e = r[path]
            p = e["phases_ms"]
            out.append(base | {"path": path, "kernel": e["kernel"], "ms": e["ms"], "tflops": e["tflops"],
                               "ratio_to_native": e["tflops"] / r["native_tflops"] if r["native_tflops"] else "",
                               "scale_ms": p["scale"], "residues_ms": p["residues"],
                               "int8_gemm_ms": p["int8_gemm"], "crt_ms": p["crt"], "error": e["error"]})
        if "auto" in r:
            e = r["auto"]
            c = e.get("contract") or {}
            chosen = f" ({c['moduli']} moduli {c['mode']})" if c and not c["native"] else ""
            out.append(base | {"path": "auto", "kernel": f"{e['chose']}: {e['why']}{chosen}", "ms": e["ms"],
                               "tflops": e["tflops"], "ratio_to_native": e["ratio"], "error": e.get("error", "")})
    return out


def write_csv(rows, paths, out_file) -> None:
    import csv

    with open(out_file, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS, restval="")
        writer.writeheader()
        writer.writerows(csv_rows(rows, paths))


def write_plot(rows, paths, out_file, title: str) -> None:
    """TFLOP/s against n for the square shapes: native, and each emulated path (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("--plot needs matplotlib") from exc
    squares = [r for r in rows if r["m"] == r["n"] == r["k"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ns = [r["n"] for r in squares]
    ax.plot(ns, [r["native_tflops"] for r in squares], "k-o", label="native DGEMM (cuBLAS)")
    for name in paths:
        ax.plot(ns, [r[name]["tflops"] for r in squares], "-o", label=f"ozaki, {name}")
    if squares and all("auto" in r for r in squares):
        ax.plot(ns, [r["auto"]["tflops"] for r in squares], "--", color="gray", label="ozaki_cutlass.gemm (auto)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (m = n = k)")
    ax.set_ylabel("TFLOP/s (FP64-equivalent)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_file, dpi=120)
    plt.close(fig)


def bench_main(args) -> int:
    """``ozaki-cutlass bench``: native DGEMM, the staged and the fused path, same run."""
    why = missing_tools("bench", bool(args.plot))
    if why is not None:
        log.error("%s", why)
        return 2
    import cupy as cp

    shapes = args.shapes or list(DEFAULT_SHAPES)
    driver.ensure_context()
    moduli = resolve_moduli(args.moduli)
    args.auto_mode, args.mode = args.mode, args.mode or "accurate"  # the auto row: as given (None: the contract's)
    rows = []
    print(f"Emulated DGEMM, moduli = {moduli}, mode = {args.mode}, phi = {args.phi}; median of {args.reps} "
          f"after {args.warmup} warm-up, the paths in alternation; errors on 2 sampled rows vs double-double; "
          "native = cuBLAS via CuPy")
    print(f"{'shape':>19} {'path':>7} {'TF/s':>7} {'x native':>8} {'scale':>7} {'resid':>7} {'int8':>8} "
          f"{'crt':>7} {'total ms':>9} {'err':>9}  kernel", flush=True)
    for m, n, k in shapes:
        rs = cp.random.default_rng(args.seed + m + 7 * n + 13 * k)
        # (U - 0.5) exp(phi N(0,1)), generated on the GPU
        xa = (rs.random((m, k)) - 0.5) * cp.exp(args.phi * rs.standard_normal((m, k)))
        xb = (rs.random((k, n)) - 0.5) * cp.exp(args.phi * rs.standard_normal((k, n)))
        flops = 2.0 * m * n * k
        nat_ms, nat_out = native_dgemm(xa, xb, args.warmup, args.reps)
        row = {"m": m, "n": n, "k": k, "moduli": moduli, "mode": args.mode, "native_ms": nat_ms,
               "native_tflops": flops / nat_ms / 1e9}
        sample = np.arange(0, m, max(1, m // 2))[:2]
        ref = sample_reference(cp.asnumpy(xa[sample]), cp.asnumpy(xb))
        row["native_error"] = sample_error(cp.asnumpy(nat_out[sample]), ref)
        # the emulated paths timed in alternation (one call of each per round), so that
        # clock and thermal drift over the row cannot favour one of them; then three more
        # calls of each collect the per-phase times (those synchronize, not the timed ones)
        calls = [functools.partial(gemm, xa, xb, moduli=moduli, mode=args.mode, path=path)
                 for path in args.paths]
        times, lasts = driver.event_times(calls, args.warmup, args.reps)
        outs = dict(zip(args.paths, lasts))
        for path, t in zip(args.paths, times):
            phases = []
            for _ in range(3):
                phases.append({})
                gemm(xa, xb, timings=phases[-1], moduli=moduli, mode=args.mode, path=path)
            ms = statistics.median(t)
            med = {p: statistics.median(ph[p] for ph in phases) for p in PHASES}
            row[path] = {"kernel": phases[-1]["kernel"], "ms": ms,
                         "tflops": flops / ms / 1e9, "phases_ms": med,
                         "error": sample_error(cp.asnumpy(outs[path][sample]), ref)}
        if args.auto:
            # ozaki_cutlass.gemm with its defaults (policy "auto", moduli unset): native DGEMM
            # where it is measured or predicted faster, else the emulation; called exactly as
            # a user calls it, timed alternately with native DGEMM (A/B: clock drift over the
            # row cannot favour either side), and for more rounds than the paths get (up to
            # 200, about half a second of native time): where auto runs native DGEMM the two
            # differ by microseconds of host time, which 5 samples do not resolve
            auto_reps = max(args.reps, min(AUTO_REPS_MAX, int(AUTO_BUDGET_MS / nat_ms)))
            (auto_t, native_t), (auto_out, native_out) = driver.event_times(
                [functools.partial(gemm, xa, xb, mode=args.auto_mode),
                 functools.partial(operator.matmul, xa, xb)], args.warmup, auto_reps)
            auto_ms, native_ms = statistics.median(auto_t), statistics.median(native_t)
            t = {}
            gemm(xa, xb, timings=t, mode=args.auto_mode)
            contract = t.get("contract")
            row["auto"] = {"ms": auto_ms, "tflops": flops / auto_ms / 1e9, "native_ms": native_ms, "reps": auto_reps,
                           "ratio": native_ms / auto_ms, "chose": t["path"],
                           "why": t.get("policy", "emulation faster"), "contract": contract,
                           "error": sample_error(cp.asnumpy(auto_out[sample]), ref),
                           # native: the very kernel of a @ b? (equal bits say so)
                           "bits_equal_native": bool(cp.array_equal(auto_out.view(cp.int64),
                                                                    native_out.view(cp.int64)))}
            del auto_out, native_out
        if len(outs) > 1:
            first, *rest = outs.values()
            row["bit_identical"] = all(bool(cp.array_equal(first.view(cp.int64), o.view(cp.int64))) for o in rest)
        rows.append(row)
        _print_row(row, args.paths)
        del xa, xb, outs, nat_out
        cp.get_default_memory_pool().free_all_blocks()
    record = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "phi": args.phi,
              "moduli": moduli, "mode": args.mode, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record | {"capability": compute_capability()}, f, indent=2)
    if args.csv:
        write_csv(rows, args.paths, args.csv)
    if args.plot:
        write_plot(rows, args.paths, args.plot, f"Ozaki-II, {moduli} moduli, phi = {args.phi}")
    return 0 if all(r.get("bit_identical", True) for r in rows) else 1


def _print_row(r, paths) -> None:
    shape = f"{r['m']}x{r['n']}x{r['k']}"
    print(f"{shape:>19} {'native':>7} {r['native_tflops'] or float('nan'):7.1f} {1.0:8.2f} "
          f"{'':7s} {'':7s} {'':8s} {'':7s} {r['native_ms'] or float('nan'):9.2f} {r['native_error']:9.2e}")
    for path in paths:
        e = r[path]
        p = e["phases_ms"]
        ratio = e["tflops"] / r["native_tflops"] if r["native_tflops"] else float("nan")
        print(f"{shape:>19} {path:>7} {e['tflops']:7.1f} {ratio:8.2f} {p['scale']:7.2f} {p['residues']:7.2f} "
              f"{p['int8_gemm']:8.2f} {p['crt']:7.2f} {p['total']:9.2f} {e['error']:9.2e}  {e['kernel']}")
    if "auto" in r:
        e = r["auto"]
        c = e.get("contract")
        chosen = "" if not c or c["native"] else (f" {c['moduli']} moduli {c['mode']}"
                                                  + (", equilibrated" if c["equilibrated"] else "")
                                                  + f", bound {c['bound']:.2g};")
        print(f"{shape:>19} {'auto':>7} {e['tflops']:7.1f} {e['ratio']:8.2f} {'':7s} {'':7s} {'':8s} {'':7s} "
              f"{e['ms']:9.2f} {e['error']:9.2e}  -> {e['chose']} ({e['why']});{chosen} {e['ms']:.4g} ms against "
              f"native {e['native_ms']:.4g} ms, alternating, median of {e['reps']}"
              + ("; bits equal to native" if e.get("bits_equal_native") else ""))
    if "bit_identical" in r:
        print(f"{shape:>19} paths bit-identical: {r['bit_identical']}", flush=True)


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="native DGEMM vs the staged and fused paths (GPU, needs CuPy)")
    p.add_argument("--shapes", type=shape, nargs="+", default=None, metavar="N|MxNxK",
                   help="problem shapes (default: squares 1024..16384, small k, large k, tall-skinny)")
    p.add_argument("--moduli", type=moduli_count, default=None)
    p.add_argument("--mode", choices=["fast", "accurate"], default=None,
                   help="scaling mode of the staged and fused rows (default: accurate) and of the auto row "
                        "(default: the accuracy contract's, fast)")
    p.add_argument("--paths", nargs="+", choices=["staged", "fused"], default=["staged", "fused"])
    p.add_argument("--phi", type=spread, default=0.5,
                   help=f"spread of the inputs' exponents, 0 to {PHI_MAX:g}: entries are (U - 0.5) "
                        "exp(phi N(0,1)) (default: %(default)s)")
    p.add_argument("--no-auto", dest="auto", action="store_false",
                   help="skip timing ozaki_cutlass.gemm with its defaults (the auto policy)")
    p.add_argument("--warmup", type=nonnegative_int, default=2)
    p.add_argument("--reps", type=positive_int, default=5)
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (0 or more)")
    p.add_argument("--json", default=None, help="write all numbers here (JSON)")
    p.add_argument("--csv", default=None, help="write one record per shape and path here (CSV)")
    p.add_argument("--plot", default=None, help="write TFLOP/s against n here (PNG; needs matplotlib)")
    p.set_defaults(handler=bench_main)


# --------------------------------------------------------------------------- tuning
