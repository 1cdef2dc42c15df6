"""Benchmarks. ``ozaki-cutlass bench-int8``: the generated INT8 GEMMs against cuBLASLt.

Method (docs/benchmarks.md): fresh random int8 inputs (never zeros) larger than L2, CUDA
events around each launch, warm-up launches first, the median of ``--reps`` timed runs,
every variant's result checked against exact integers on sampled rows, and cuBLASLt's
INT8 GEMM (``torch._int_mm``) timed in the same process on the same data.
"""

from __future__ import annotations

import functools
import importlib.util
import operator
import json
import logging
import platform
import statistics
from datetime import datetime, timezone

import numpy as np

from . import _cuda, pipeline

log = logging.getLogger(__name__)


def _check_rows(dc_host: np.ndarray, a: np.ndarray, b: np.ndarray, rows) -> bool:
    want = a[rows].astype(np.int64) @ b.astype(np.int64).T
    return bool(np.array_equal(dc_host[rows], want))


def _cublaslt(a: np.ndarray, b: np.ndarray, warmup: int, reps: int):
    """Median ms of torch._int_mm (cuBLASLt INT8) on the same data, or None without torch."""
    try:
        import torch
    except ImportError:
        return None, "torch not installed"
    if not torch.cuda.is_available():
        return None, "torch sees no GPU"
    ta = torch.from_numpy(a).cuda()
    tb = torch.from_numpy(b).cuda().t()  # (k, n) view of N x K data: the TN problem
    try:
        torch._int_mm(ta, tb)
    except RuntimeError:  # some builds want a row-major second operand
        tb = tb.contiguous()
    (times,), (out,) = _cuda.event_times([lambda: torch._int_mm(ta, tb)], warmup, reps,
                                         torch.cuda.current_stream().cuda_stream)
    rows = np.arange(0, a.shape[0], max(1, a.shape[0] // 8))
    ok = _check_rows(out.cpu().numpy(), a, b, rows)
    return statistics.median(times), ("ok" if ok else "WRONG RESULT")


def int8_main(args) -> int:
    from .generator import Arch, catalog
    from .kernels import load_int8_gemm

    _cuda.ensure_context()
    m = n = k = int(args.size)
    arch = Arch(args.arch)
    variants = catalog(arch, args.variants, full=bool(args.variants))
    if not variants:
        raise SystemExit(f"no {arch.value} variant matches {args.variants!r}")
    rng = np.random.default_rng(args.seed)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    da, db = _cuda.DeviceBuffer(a.nbytes), _cuda.DeviceBuffer(b.nbytes)
    dc = _cuda.DeviceBuffer(4 * m * n)
    da.upload(a)
    db.upload(b)
    stream = _cuda.new_stream()
    flops = 2.0 * m * n * k
    rows = np.arange(0, m, max(1, m // 8))
    results = []
    for v in variants:
        kern = load_int8_gemm(v)
        ws_bytes = kern.workspace_size(m, n, k, 1)
        ws = _cuda.DeviceBuffer(ws_bytes) if ws_bytes else None
        dc.fill_bytes(0x5A, stream)

        def launch():
            kern(m, n, k, 1, da.ptr, k, 0, db.ptr, k, 0, dc.ptr, n, 0,
                 ws.ptr if ws else 0, ws_bytes, _cuda.stream_handle(stream))

        (times,), _ = _cuda.event_times([launch], args.warmup, args.reps, stream)
        _cuda.synchronize(stream)
        ok = _check_rows(dc.download(np.empty((m, n), np.int32)), a, b, rows)
        med = statistics.median(times)
        results.append({"kernel": v.name, "ms_median": med, "ms_min": min(times),
                        "ms_max": max(times), "tops": flops / med / 1e9, "check": "ok" if ok else "WRONG RESULT"})
        log.info("%s: %.3f ms", v.name, med)
    lt_ms, lt_note = _cublaslt(a, b, args.warmup, args.reps)
    if lt_ms is not None:
        results.append({"kernel": "cuBLASLt (torch._int_mm)", "ms_median": lt_ms, "ms_min": lt_ms,
                        "ms_max": lt_ms, "tops": flops / lt_ms / 1e9, "check": lt_note})
    print(f"INT8 GEMM m = n = k = {m}, {args.reps} timed runs after {args.warmup} warm-up, median")
    print(f"{'kernel':58s} {'ms':>8s} {'TOP/s':>8s}  check")
    for r in results:
        print(f"{r['kernel']:58s} {r['ms_median']:8.3f} {r['tops']:8.1f}  {r['check']}")
    if lt_ms is None:
        print(f"cuBLASLt: skipped ({lt_note})")
    if args.json:
        from ._device import compute_capability

        record = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "host": platform.node(), "capability": compute_capability(),
                  "size": m, "warmup": args.warmup, "reps": args.reps, "results": results}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)
    bad = [r for r in results if r["check"] != "ok"]
    return 1 if bad else 0


def add_int8_parser(sub) -> None:
    from .cli import _nonnegative_int, _positive_int

    p = sub.add_parser("bench-int8", help="time the generated INT8 GEMMs against cuBLASLt (GPU)")
    p.add_argument("--arch", default="sm_90a", choices=["sm_90a", "sm_80"])
    p.add_argument("--variants", default=None, help="glob over the full catalog (default: the default set)")
    p.add_argument("--size", type=_positive_int, default=8192)
    p.add_argument("--warmup", type=_nonnegative_int, default=5)
    p.add_argument("--reps", type=_positive_int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results here as JSON")
    p.set_defaults(handler=int8_main)



# --------------------------------------------------------------------------- emulated DGEMM

AUTO_REPS_MAX, AUTO_BUDGET_MS = 200, 500.0  # the auto row's rounds: at most 200, about 0.5 s of native time


def _native_dgemm(xa, xb, warmup, reps):
    """cuBLAS DGEMM through CuPy (the arrays are CuPy's): (median ms, result)."""
    (times,), (out,) = _cuda.event_times([lambda: xa @ xb], warmup, reps)
    return statistics.median(times), out


def _missing_tools(command: str, plot: bool) -> str | None:
    """Why ``command`` (bench, tune) cannot run here, said before any GPU work, or None."""
    if importlib.util.find_spec("cupy") is None:
        return (f"ozaki-cutlass {command} needs CuPy (e.g. pip install cupy-cuda13x): it makes the "
                "inputs on the GPU and times native DGEMM through it")
    if plot and importlib.util.find_spec("matplotlib") is None:
        return "--plot needs matplotlib: pip install -e '.[bench]' (or leave out --plot)"
    return None


def _discarding(a, b, **kwargs) -> None:
    """One gemm call whose result is dropped (so timed rounds do not keep every output)."""
    pipeline.gemm(a, b, **kwargs)


def _time_alternately(first, second, warmup: int, reps: int) -> tuple[float, float]:
    """Median ms of ``first()`` and of ``second()``, timed in alternation (events around
    each call on the legacy default stream)."""
    times, _ = _cuda.event_times([first, second], warmup, reps)
    return statistics.median(times[0]), statistics.median(times[1])


def sample_reference(a_rows: np.ndarray, b: np.ndarray):
    """Sampled rows of A @ B in double-double: (hi, lo)."""
    from .accuracy import dd_product

    return dd_product(a_rows, b)


def sample_error(got_rows: np.ndarray, ref) -> float:
    """Normwise error of sampled rows of C against their double-double product ``ref``."""
    from .accuracy import normwise_error

    return normwise_error(got_rows, *ref)


DEFAULT_SHAPES = (
    # squares
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (16384, 16384, 16384),
    # small k, large k, tall-skinny
    (16384, 16384, 1024), (4096, 4096, 65536), (65536, 1024, 4096),
)


def parse_shape(text: str) -> tuple[int, int, int]:
    """'N' (square) or 'MxNxK'."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"shape {text!r}: expected N or MxNxK with integers") from None
    if len(dims) == 1:
        dims = dims * 3
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"shape {text!r}: expected N or MxNxK with positive integers")
    return dims


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
            out.append(base | {"path": "auto", "kernel": f"{e['chose']}: {e['why']}", "ms": e["ms"],
                               "tflops": e["tflops"], "ratio_to_native": e["ratio"]})
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
    why = _missing_tools("bench", bool(args.plot))
    if why is not None:
        log.error("%s", why)
        return 2
    import cupy as cp

    from .reference import resolve_moduli

    shapes = args.shapes or list(DEFAULT_SHAPES)
    _cuda.ensure_context()
    moduli = resolve_moduli(args.moduli)
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
        nat_ms, nat_out = _native_dgemm(xa, xb, args.warmup, args.reps)
        row = {"m": m, "n": n, "k": k, "moduli": moduli, "mode": args.mode, "native_ms": nat_ms,
               "native_tflops": flops / nat_ms / 1e9}
        sample = np.arange(0, m, max(1, m // 2))[:2]
        ref = sample_reference(cp.asnumpy(xa[sample]), cp.asnumpy(xb))
        row["native_error"] = sample_error(cp.asnumpy(nat_out[sample]), ref)
        # the emulated paths timed in alternation (one call of each per round), so that
        # clock and thermal drift over the row cannot favour one of them; then three more
        # calls of each collect the per-phase times (those synchronize, not the timed ones)
        calls = [functools.partial(pipeline.gemm, xa, xb, moduli=moduli, mode=args.mode, path=path)
                 for path in args.paths]
        times, lasts = _cuda.event_times(calls, args.warmup, args.reps)
        outs = dict(zip(args.paths, lasts))
        for path, t in zip(args.paths, times):
            phases = []
            for _ in range(3):
                phases.append({})
                pipeline.gemm(xa, xb, timings=phases[-1], moduli=moduli, mode=args.mode, path=path)
            ms = statistics.median(t)
            med = {p: statistics.median(ph[p] for ph in phases) for p in pipeline.PHASES}
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
            (auto_t, native_t), (auto_out, native_out) = _cuda.event_times(
                [functools.partial(pipeline.gemm, xa, xb, mode=args.mode),
                 functools.partial(operator.matmul, xa, xb)], args.warmup, auto_reps)
            auto_ms, native_ms = statistics.median(auto_t), statistics.median(native_t)
            t = {}
            pipeline.gemm(xa, xb, timings=t, mode=args.mode)
            row["auto"] = {"ms": auto_ms, "tflops": flops / auto_ms / 1e9, "native_ms": native_ms, "reps": auto_reps,
                           "ratio": native_ms / auto_ms, "chose": t["path"],
                           "why": t.get("policy", "emulation faster"),
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
        from ._device import compute_capability

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
        print(f"{shape:>19} {'auto':>7} {e['tflops']:7.1f} {e['ratio']:8.2f} {'':7s} {'':7s} {'':8s} {'':7s} "
              f"{e['ms']:9.2f} {'':9s}  -> {e['chose']} ({e['why']}); {e['ms']:.4g} ms against native "
              f"{e['native_ms']:.4g} ms, alternating, median of {e['reps']}"
              + ("; bits equal to native" if e.get("bits_equal_native") else ""))
    if "bit_identical" in r:
        print(f"{shape:>19} paths bit-identical: {r['bit_identical']}", flush=True)


def add_bench_parser(sub) -> None:
    from .cli import _moduli_count, _nonnegative_int, _positive_int, _shape

    p = sub.add_parser("bench", help="native DGEMM vs the staged and fused paths (GPU, needs CuPy)")
    p.add_argument("--shapes", type=_shape, nargs="+", default=None, metavar="N|MxNxK",
                   help="problem shapes (default: squares 1024..16384, small k, large k, tall-skinny)")
    p.add_argument("--moduli", type=_moduli_count, default=None)
    p.add_argument("--mode", choices=["fast", "accurate"], default="accurate")
    p.add_argument("--paths", nargs="+", choices=["staged", "fused"], default=["staged", "fused"])
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--no-auto", dest="auto", action="store_false",
                   help="skip timing ozaki_cutlass.gemm with its defaults (the auto policy)")
    p.add_argument("--warmup", type=_nonnegative_int, default=2)
    p.add_argument("--reps", type=_positive_int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write all numbers here (JSON)")
    p.add_argument("--csv", default=None, help="write one record per shape and path here (CSV)")
    p.add_argument("--plot", default=None, help="write TFLOP/s against n here (PNG; needs matplotlib)")
    p.set_defaults(handler=bench_main)


# --------------------------------------------------------------------------- tuning

def tune_points(sizes, shapes) -> list[tuple[int, int, int, dict]]:
    """What ``tune`` measures, in table order: (m, n, k, bucket). Each rectangular shape
    first, with a bucket of a factor sqrt(2) around it in every dimension; then the
    square sizes, whose buckets meet at the geometric midpoints and cover 1 .. 2^31 - 1."""
    import math

    points = []
    for m, n, k in shapes:
        points.append((m, n, k, {d: [max(1, math.ceil(v / math.sqrt(2))), math.floor(v * math.sqrt(2))]
                                 for d, v in (("m", m), ("n", n), ("k", k))}))
    sizes = sorted(sizes)
    bounds = [1] + [int(math.sqrt(a * b)) for a, b in zip(sizes, sizes[1:])] + [2**31 - 1]
    for i, n in enumerate(sizes):
        lo, hi = bounds[i], bounds[i + 1] - 1 if i + 1 < len(sizes) else bounds[i + 1]
        points.append((n, n, n, {"m": [lo, hi], "n": [lo, hi], "k": [lo, hi]}))
    return points


def tune_candidates(arch, patterns, table) -> list:
    """What ``ozaki-cutlass tune`` times, each kernel once: the built-in candidates (the
    default INT8 GEMM on the staged path, the fused family), the arch's default staged
    set, the kernels of ``table`` (dispatch.load_table()'s (table, source): a re-tune never
    drops an earlier winner unseen) and the variants matching ``patterns``."""
    from .dispatch import Candidate, builtin_candidates, candidates_from_table, path_of
    from .generator import catalog

    cands = list(builtin_candidates(arch))

    def add(cand):
        if all(c.variant != cand.variant for c in cands):
            cands.append(cand)

    for v in catalog(arch):
        add(Candidate(path="staged", variant=v))
    for c in candidates_from_table(*table):
        if c.variant.arch is arch:
            add(Candidate(path=c.path, variant=c.variant, source="from the table in effect"))
    for pattern in patterns:
        for v in catalog(arch, pattern, full=True, epilogue=None):
            add(Candidate(path=path_of(v), variant=v))
    return cands


def tune_main(args) -> int:
    """``ozaki-cutlass tune``: time every candidate kernel per size bucket, write the table
    the dispatcher reads (JSON, with GPU, driver, date and command)."""
    from .generator import catalog

    unmatched = [g for g in args.variants or () if not catalog(None, g, full=True, epilogue=None)]
    if unmatched:  # before any GPU work
        log.error("--variants %s matches no variant (see `ozaki-cutlass list --full`)", " ".join(unmatched))
        return 2
    why = _missing_tools("tune", False)
    if why is not None:
        log.error("%s", why)
        return 2

    import cupy as cp

    from ._device import visible_arch
    from .dispatch import load_table
    from .reference import resolve_moduli

    _cuda.ensure_context()
    arch = visible_arch()
    moduli = resolve_moduli(args.moduli)
    cands = tune_candidates(arch, args.variants or (), load_table())
    unbuilt = {c: _unbuilt(c, moduli) for c in cands}  # looked up once, not per size
    entries, report = [], []
    for m, n, k, bucket in tune_points(args.sizes, args.shapes or ()):
        label = f"{m}x{n}x{k}" if (m, n) != (k, k) else str(k)
        flops = 2.0 * m * n * k
        rs = cp.random.default_rng(args.seed + m + 7 * n + 13 * k)
        xa = (rs.random((m, k)) - 0.5) * cp.exp(0.5 * rs.standard_normal((m, k)))
        xb = (rs.random((k, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((k, n)))
        runnable = []
        for c in cands:
            missing = unbuilt[c]
            if missing:
                report.append((label, c.describe(), f"skipped: not built ({', '.join(missing)})"))
                continue
            call = functools.partial(_discarding, xa, xb, moduli=moduli, kernel=c.variant, path=c.path)
            try:
                call()  # one untimed call: a candidate that cannot run at this shape is left out, said
            except Exception as exc:  # noqa: BLE001
                report.append((label, c.describe(), f"skipped: {exc}"))
                continue
            runnable.append((c, call))
        if not runnable:
            report.append((label, "no candidate", "skipped: none is built and runs here"))
            continue
        # every candidate in alternation, round after round: they share the clock and
        # thermal state (timed one after the other, a 16384 candidate's time swung by 40 %)
        times, _ = _cuda.event_times([call for _, call in runnable], args.warmup, args.reps)
        timings = [(statistics.median(t), c) for (c, _), t in zip(runnable, times)]
        report.extend((label, c.describe(), ms) for ms, c in timings)
        _, best = min(timings, key=lambda t: t[0])
        # the winner against native DGEMM, timed in alternation (no drift between them)
        best_ms, native_ms = _time_alternately(
            functools.partial(pipeline.gemm, xa, xb, moduli=moduli, kernel=best.variant, path=best.path),
            functools.partial(operator.matmul, xa, xb), args.warmup, args.reps)
        report.append((label, f"{best.describe()} again, alternating with native", best_ms))
        report.append((label, "native DGEMM (cuBLAS via CuPy), alternating", native_ms))
        entries += bucket_entries(arch.value, bucket | {"measured": [m, n, k]}, flops, timings, best_ms, native_ms)
        del xa, xb
        cp.get_default_memory_pool().free_all_blocks()
    gpu, driver = _gpu_identity()
    table = {"gpu": gpu, "driver": driver,
             "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "command": " ".join(["ozaki-cutlass"] + args.argv),
             "moduli": moduli, "inputs": "phi = 0.5; the shapes given, then square n x n x n", "entries": entries}
    for label, name, ms in report:
        print(f"{label:>17}  {name:70s} {ms if isinstance(ms, str) else f'{ms:9.2f} ms'}")
    with open(args.out, "w") as f:
        json.dump(table, f, indent=2)
    print(f"wrote {args.out}: {len(entries)} entries")
    return 0


def bucket_entries(arch: str, box: dict, flops: float, timings: list, best_ms: float, native_ms: float) -> list[dict]:
    """One size bucket's table entries from its candidates' ``timings`` [(ms, Candidate)]:
    a "native" entry first where native DGEMM measured faster, then the fastest candidate
    (``best_ms`` and ``native_ms``: the two timed in alternation; the auto policy reads
    this entry), then the fastest of each other path, without ``native_ms``, for calls
    that ask for that path (path="staged" gets the tuned staged kernel, not the default)."""
    _, best = min(timings, key=lambda t: t[0])
    entries = []
    if native_ms <= best_ms:  # the auto policy's native bucket
        entries.append({"arch": arch, "path": "native"} | box | {"ms": native_ms, "tflops": flops / native_ms / 1e9})
    entries.append({"arch": arch, "path": best.path, "kernel": best.variant.name} | box
                   | {"ms": best_ms, "tflops": flops / best_ms / 1e9, "native_ms": native_ms})
    for path in sorted({c.path for _, c in timings} - {best.path}):
        ms, c = min((t for t in timings if t[1].path == path), key=lambda t: t[0])
        entries.append({"arch": arch, "path": path, "kernel": c.variant.name} | box
                       | {"ms": ms, "tflops": flops / ms / 1e9})
    return entries


def _gpu_identity(ordinal: int = 0) -> tuple[str, str]:
    """(name, driver version) of CUDA device ``ordinal`` (the one timed), from nvidia-smi,
    picked by its PCI bus id (nvidia-smi lists every GPU of the machine, in its own
    order); ("unknown", "unknown") when either cannot be asked."""
    import subprocess

    try:
        from cuda.bindings import driver

        status, dev = driver.cuDeviceGet(ordinal)
        status2, bus = driver.cuDeviceGetPCIBusId(32, dev)
        if status != driver.CUresult.CUDA_SUCCESS or status2 != driver.CUresult.CUDA_SUCCESS:
            return "unknown", "unknown"
        bus_id = (bus.decode(errors="replace") if isinstance(bus, bytes) else str(bus)).split("\0", 1)[0]
        out = subprocess.run(["nvidia-smi", "-i", bus_id, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (ImportError, OSError, subprocess.SubprocessError):
        return "unknown", "unknown"
    return parse_gpu_identity(out)


def parse_gpu_identity(text: str) -> tuple[str, str]:
    """(name, driver) from nvidia-smi's "name, driver_version" CSV line (its first line)."""
    fields = [f.strip() for f in text.splitlines()[0].split(",")] if text.strip() else []
    if len(fields) != 2 or not all(fields):
        return "unknown", "unknown"
    return fields[0], fields[1]


def _unbuilt(candidate, moduli) -> list[str]:
    """Names of the kernels a candidate needs that are not built (tuning builds nothing)."""
    from .kernels import locate

    missing = []
    for v in candidate.kernels(moduli):
        try:
            locate(v, build_missing=False)
        except FileNotFoundError:
            missing.append(v.name)
    return missing


def add_tune_parser(sub) -> None:
    from .cli import _moduli_count, _nonnegative_int, _positive_int, _shape

    p = sub.add_parser("tune", help="time the candidate kernels per size bucket, write the dispatcher's table (GPU)")
    p.add_argument("--sizes", type=_positive_int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--shapes", type=_shape, nargs="+", default=None, metavar="MxNxK",
                   help="rectangular shapes to measure too; each gets a bucket of a factor sqrt(2) "
                        "around it in every dimension, tried before the square buckets")
    p.add_argument("--moduli", type=_moduli_count, default=None)
    p.add_argument("--warmup", type=_nonnegative_int, default=1)
    p.add_argument("--reps", type=_positive_int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", nargs="+", default=None, metavar="GLOB",
                   help="also time these catalogued variants (globs over the full catalog)")
    p.add_argument("--out", default="tuning.json")
    p.set_defaults(handler=tune_main)
