"""``ozaki-cutlass demo``: the main job.

Runs the emulated DGEMM on a sample problem and prints its error against a
high-precision reference, for several moduli counts and both scaling modes, next to
float64 ``@``. Where no GPU is found it says so and runs the NumPy reference only.
"""

from __future__ import annotations

import functools
import logging
import math
import statistics
import sys
import time

import numpy as np

from .. import reference
from ..reference import contract as reference_contract
from ..reference import gemm as reference_gemm
from ..api import gemm
from ..device import driver
from ..device.arch import compute_capability
from ..numerics import accuracy
from .arguments import CPU_DEFAULT_N, GPU_DEMO_N, cpu_size_problem
from .measure import ArraysUnavailable, arrays_for, sample_error, sample_reference

log = logging.getLogger(__name__)

DEMO_COUNTS = (8, 10, 12, 14, 15, 16, 18, 20)
DEMO_PHIS = (0.5, 4.0)


def _gpu_status() -> str | None:
    """A one-line description of the visible GPU, or None when there is none."""

    cc = compute_capability()
    return None if cc is None else f"CUDA device 0, compute capability {cc[0]}.{cc[1]}"


def main(args) -> int:
    requested = getattr(args, "n", None)
    seed = int(getattr(args, "seed", None) or 0)
    use_cpu = bool(getattr(args, "cpu", False))
    gpu = None if use_cpu else _gpu_status()
    if gpu is not None:
        print(f"ozaki-cutlass demo on the GPU: {gpu}. Kernels are built on first use (progress on stderr).")
        return gpu_demo(n=int(requested or GPU_DEMO_N), seed=seed, arrays=getattr(args, "arrays", None) or "auto")
    n = int(requested or CPU_DEFAULT_N)
    why = cpu_size_problem(n)
    if why is not None:
        log.error("demo on the CPU: --n %s (on a GPU the demo takes larger n)", why)
        return 2
    print(f"ozaki-cutlass demo: C = A @ B, A and B {n} x {n} float64, "
          f"entries (U - 0.5) exp(phi N(0,1)), seed {seed}")
    if use_cpu:
        print("GPU: not used (--cpu). Running the NumPy reference of the Ozaki scheme II.")
    else:
        print("GPU: none found (no CUDA driver or device). Skipped: the GPU emulation and its "
              "timing against native DGEMM.\nRunning the NumPy reference of the Ozaki scheme II "
              "(the same bits the GPU path produces).")
    ref_kind = "exact" if n <= 128 else "dd"
    print(f"Reference product: {'exact (Python integers)' if ref_kind == 'exact' else 'double-double'}; "
          "error = ||C - C_ref||_F / ||C_ref||_F. '*' marks errors at or below float64 @.")
    t0 = time.perf_counter()
    rows = error_table(n, DEMO_PHIS, DEMO_COUNTS, seed=seed, reference=ref_kind, contract=True)
    print(format_error_table(rows, DEMO_COUNTS))
    print("Default call: the accuracy contract chooses the moduli count per call (certified error "
          "<= 2^-53 || |A||B| ||_F; docs/numerics.md).")
    print(complex_line(min(n, 128), seed))
    print(f"Done in {time.perf_counter() - t0:.1f} s.")
    return 0


def complex_line(n: int, seed: int) -> str:
    """One line on complex operands: the reference's default call on complex128 n x n
    matrices (phi 0.5 in each part) against a double-double product, beside complex128 @."""
    from ..numerics import zgemm

    rng = np.random.default_rng(seed)
    a, b = (accuracy.random_matrix(n, n, 0.5, rng) + 1j * accuracy.random_matrix(n, n, 0.5, rng) for _ in range(2))
    hi, lo = accuracy.dd_product(zgemm.realify_left(a), zgemm.realify_right(b))
    ref = hi.view(np.complex128) + lo.view(np.complex128)
    choice = reference_contract(a, b)

    def err(c):
        return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))

    return (f"Complex (ZGEMM), {n} x {n} complex128, phi = 0.5: default call {err(reference_gemm(a, b)):.2e} "
            f"({choice.moduli} moduli, {choice.mode}), complex128 @ {err(a @ b):.2e} "
            "(one real product of the realified operands; docs/numerics.md).")


def accuracy_main(args) -> int:
    """``ozaki-cutlass accuracy``: the error table of docs/accuracy.md."""
    if args.min_moduli > args.max_moduli:
        print(f"ozaki-cutlass accuracy: --min-moduli {args.min_moduli} is above --max-moduli {args.max_moduli}",
              file=sys.stderr)
        return 2
    counts = tuple(range(args.min_moduli, args.max_moduli + 1))
    phis = tuple(args.phi)
    t0 = time.perf_counter()
    rows = error_table(args.n, phis, counts, seed=args.seed, reference=args.reference, contract=True)
    table = format_error_table(rows, counts)
    print(f"n = {args.n}, reference: {rows[0]['reference']}, seed {args.seed}, "
          f"{time.perf_counter() - t0:.1f} s. '*': error <= float64 @.")
    print(table)
    return 0



# --------------------------------------------------------------------------- GPU

GPU_COUNTS = (12, 14, 15, 16, 18, 20)


def gpu_demo(n: int, seed: int, arrays: str = "auto") -> int:

    # 1. bit-for-bit agreement with the reference on a small problem
    rng = np.random.default_rng(seed)
    a = accuracy.random_matrix(256, 256, 1.0, rng)
    b = accuracy.random_matrix(256, 256, 1.0, rng)
    same = all(
        np.array_equal(gemm(a, b, moduli=c, mode=mode).view(np.int64),
                       reference.gemm(a, b, moduli=c, mode=mode).view(np.int64))
        for c in (8, 15, 20) for mode in ("fast", "accurate")) and np.array_equal(
        gemm(a, b, policy="emulate").view(np.int64), reference.gemm(a, b, policy="emulate").view(np.int64))
    print(f"256 x 256 x 256, moduli 8/15/20, both modes, and the accuracy contract: GPU result "
          f"{'equals the NumPy reference bit for bit' if same else 'DIFFERS from the reference (bug)'}")
    # 2. speed and error against native DGEMM at size n: on CuPy arrays where CuPy is
    # installed, else on our own device arrays with native DGEMM through our cuBLAS path
    try:
        dev = arrays_for(arrays)
    except ArraysUnavailable as exc:
        print(f"{exc}: native DGEMM timing skipped.")
        return 0 if same else 1
    ha = accuracy.random_matrix(n, n, 0.5, rng)
    hb = accuracy.random_matrix(n, n, 0.5, rng)
    da, db = dev.upload(ha), dev.upload(hb)
    flops = 2.0 * n**3
    rows = np.arange(0, n, max(1, n // 2))[:2]
    where = "CuPy arrays" if dev.name == "cupy" else "ozaki_cutlass DeviceArrays (CuPy not used)"
    print(f"C = A @ B, n = {n}, phi = 0.5, {where} on the GPU; native DGEMM = {dev.native_label}; CUDA events "
          f"around each call, the rows timed in alternation (2 warm-up rounds, median of 5); error on rows "
          f"{rows.tolist()} against a double-double product")
    t = {}
    gemm(da, db, timings=t)  # what the auto policy does at this size
    calls = [("native DGEMM", functools.partial(dev.native, da, db))]
    calls += [(f"ozaki {count} moduli", functools.partial(gemm, da, db, moduli=count))
              for count in GPU_COUNTS]
    calls.append(("gemm(a, b) (auto)", lambda: gemm(da, db)))
    times, outs = driver.event_times([fn for _, fn in calls], 2, 5, dev.stream())
    ref = sample_reference(ha[rows], hb)
    nat_ms = statistics.median(times[0])
    print(f"{'':18s} {'ms':>9s} {'TFLOP/s':>8s} {'vs native':>9s} {'error':>9s}")
    for (tag, _), ms_list, out in zip(calls, times, outs):
        ms = statistics.median(ms_list)
        err = sample_error(dev.rows(out, rows), ref)
        note = ""
        if tag.startswith("gemm(a, b)"):
            note = f"  -> {t['path']}" + (f" ({t['policy']})" if "policy" in t else "")
        print(f"{tag:18s} {ms:9.2f} {flops / ms / 1e9:8.1f} {nat_ms / ms:9.2f} {err:9.2e}{note}")
    chosen = (f"; the accuracy contract chose {t['moduli']} moduli, mode '{t['mode']}'"
              if "contract" in t and t["path"] != "native" else "")
    print("Default: the accuracy contract (the fewest moduli whose certified error bound is at most "
          "2^-53 || |A||B| ||_F), policy 'auto' (native DGEMM where that is measured or predicted faster)"
          f"{chosen}; kernels chosen by the shape dispatcher (ozaki_cutlass.dispatch).")
    return 0 if same else 1


def error_table(n: int, phis, counts, modes=("fast", "accurate"), *, seed: int = 0,
                reference: str = "auto", gemm=None, contract: bool = False):
    """Normwise errors of ``gemm`` (default: the NumPy reference) for each phi, moduli
    count and mode, next to float64 ``@``, on n x n x n products.

    Returns a list of dicts: {"phi", "reference", "native", (mode, count): error}, and with
    ``contract`` "contract": (the reference's Choice, the default call's error).
    ``reference``: "exact" (Python integers), "dd" (double-double) or "auto" (exact for
    n <= 128).
    """
    if gemm is None:
        gemm = reference_gemm
    use_exact = reference == "exact" or (reference == "auto" and n <= 128)
    rows = []
    for i, phi in enumerate(phis):
        rng = np.random.default_rng(seed + i)
        a = accuracy.random_matrix(n, n, phi, rng)
        b = accuracy.random_matrix(n, n, phi, rng)
        hi, lo = accuracy.exact_product(a, b) if use_exact else accuracy.dd_product(a, b)
        row = {"phi": phi, "reference": "exact" if use_exact else "double-double",
               "native": accuracy.normwise_error(a @ b, hi, lo)}
        for mode in modes:
            for count in counts:
                row[(mode, count)] = accuracy.normwise_error(gemm(a, b, moduli=count, mode=mode), hi, lo)
        if contract:
            choice = reference_contract(a, b)
            row["contract"] = (choice, accuracy.normwise_error(gemm(a, b), hi, lo))
        rows.append(row)
    return rows


def format_error_table(rows, counts, modes=("fast", "accurate")) -> str:
    """A Markdown table: one row per (moduli count, mode), one column per phi."""
    head = "| moduli | mode | " + " | ".join(f"phi = {r['phi']:g}" for r in rows) + " |"
    sep = "| ---: | --- | " + " | ".join("---:" for _ in rows) + " |"
    lines = [head, sep]
    for count in counts:
        for mode in modes:
            cells = []
            for r in rows:
                err = r[(mode, count)]
                # an infinite or NaN error is never "as good as float64", whatever @ gave
                mark = " *" if math.isfinite(err) and err <= r["native"] else ""
                cells.append(f"{err:.2e}{mark}")
            lines.append(f"| {count} | {mode} | " + " | ".join(cells) + " |")
    lines.append("| float64 `@` | | " + " | ".join(f"{r['native']:.2e}" for r in rows) + " |")
    if all("contract" in r for r in rows):
        cells = []
        for r in rows:
            choice, err = r["contract"]
            mark = " *" if math.isfinite(err) and err <= r["native"] else ""
            what = "native" if choice.native else f"{choice.moduli} {choice.mode}"
            cells.append(f"{err:.2e}{mark} ({what}{', equilibrated' if choice.equilibrated else ''})")
        lines.append("| default call | contract | " + " | ".join(cells) + " |")
    return "\n".join(lines)
