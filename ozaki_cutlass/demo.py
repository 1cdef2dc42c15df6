"""``ozaki-cutlass demo``: the main job.

Runs the emulated DGEMM on a sample problem and prints its error against a
high-precision reference, for several moduli counts and both scaling modes, next to
float64 ``@``. Where no GPU is found it says so and runs the NumPy reference only.
"""

from __future__ import annotations

import time

from . import accuracy, reference

DEMO_COUNTS = (8, 10, 12, 14, 15, 16, 18, 20)
DEMO_PHIS = (0.5, 4.0)


def _gpu_status() -> str | None:
    """A one-line description of the visible GPU, or None when there is none."""
    from ._device import compute_capability

    cc = compute_capability()
    return None if cc is None else f"CUDA device 0, compute capability {cc[0]}.{cc[1]}"


def main(args) -> int:
    n = int(getattr(args, "n", 256) or 256)
    seed = int(getattr(args, "seed", 0) or 0)
    if n < 1 or n > 4096:
        raise SystemExit(f"--n must be in [1, 4096] for the CPU reference, got {n}")
    gpu = None if getattr(args, "cpu", False) else _gpu_status()
    print(f"ozaki-cutlass demo: C = A @ B, A and B {n} x {n} float64, "
          f"entries (U - 0.5) exp(phi N(0,1)), seed {seed}")
    if getattr(args, "cpu", False):
        print("GPU: not used (--cpu). Running the NumPy reference of the Ozaki scheme II.")
    elif gpu is None:
        print("GPU: none found (no CUDA driver or device). Skipped: the GPU emulation and its "
              "timing against native DGEMM.\nRunning the NumPy reference of the Ozaki scheme II "
              "(the same bits the GPU path must produce).")
    else:
        print(f"GPU: {gpu}. The GPU emulation path is not built yet (issue 4); "
              "running the NumPy reference of the Ozaki scheme II.")
    ref_kind = "exact" if n <= 128 else "dd"
    print(f"Reference product: {'exact (Python integers)' if ref_kind == 'exact' else 'double-double'}; "
          "error = ||C - C_ref||_F / ||C_ref||_F. '*' marks errors at or below float64 @.")
    t0 = time.perf_counter()
    rows = accuracy.error_table(n, DEMO_PHIS, DEMO_COUNTS, seed=seed, reference=ref_kind)
    print(accuracy.format_error_table(rows, DEMO_COUNTS))
    print(f"Default moduli count: {reference.DEFAULT_MODULI} (mode 'accurate'). "
          f"Done in {time.perf_counter() - t0:.1f} s.")
    return 0


def accuracy_main(args) -> int:
    """``ozaki-cutlass accuracy``: the error table of docs/accuracy.md."""
    counts = tuple(range(args.min_moduli, args.max_moduli + 1))
    phis = tuple(args.phi)
    t0 = time.perf_counter()
    rows = accuracy.error_table(args.n, phis, counts, seed=args.seed, reference=args.reference)
    table = accuracy.format_error_table(rows, counts)
    print(f"n = {args.n}, reference: {rows[0]['reference']}, seed {args.seed}, "
          f"{time.perf_counter() - t0:.1f} s. '*': error <= float64 @.")
    print(table)
    return 0

