"""``ozaki-cutlass bench-int8``: the generated INT8 GEMMs against cuBLASLt.

Method (docs/benchmarks.md): fresh random int8 inputs (never zeros) larger than L2, CUDA
events around each launch, warm-up launches first, the median of ``--reps`` timed runs,
every variant's result checked against exact integers on sampled rows, and cuBLASLt's
INT8 GEMM (``torch._int_mm``) timed in the same process on the same data.
"""

from __future__ import annotations

import json
import logging
import platform
import statistics

import numpy as np

from ..device import driver
from ..device.arch import compute_capability
from ..generator import Arch, catalog
from ..kernels.gemm import load_int8_gemm
from .arguments import nonnegative_int, positive_int
from .measure import results_header

__all__ = ["int8_main", "add_int8_parser"]

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
    (times,), (out,) = driver.event_times([lambda: torch._int_mm(ta, tb)], warmup, reps,
                                         torch.cuda.current_stream().cuda_stream)
    rows = np.arange(0, a.shape[0], max(1, a.shape[0] // 8))
    ok = _check_rows(out.cpu().numpy(), a, b, rows)
    return statistics.median(times), ("ok" if ok else "WRONG RESULT")


def int8_main(args) -> int:
    """The benchmark; without a usable GPU ``driver.ensure_context`` raises NoGpuError,
    which the command line turns into one line (exit status 1)."""
    m = n = k = int(args.size)
    arch = Arch(args.arch)
    variants = catalog(arch, args.variants, full=bool(args.variants))
    if not variants:
        log.error("no %s variant matches %r (see `ozaki-cutlass list --full --arch %s`)",
                  arch.value, args.variants, arch.value)
        return 2
    driver.ensure_context()
    rng = np.random.default_rng(args.seed)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    da, db = driver.DeviceBuffer(a.nbytes), driver.DeviceBuffer(b.nbytes)
    dc = driver.DeviceBuffer(4 * m * n)
    da.upload(a)
    db.upload(b)
    stream = driver.new_stream()
    flops = 2.0 * m * n * k
    rows = np.arange(0, m, max(1, m // 8))
    results = []
    for v in variants:
        kern = load_int8_gemm(v)
        ws_bytes = kern.workspace_size(m, n, k, 1)
        ws = driver.DeviceBuffer(ws_bytes) if ws_bytes else None
        dc.fill_bytes(0x5A, stream)

        def launch():
            kern(m, n, k, 1, da.ptr, k, 0, db.ptr, k, 0, dc.ptr, n, 0,
                 ws.ptr if ws else 0, ws_bytes, driver.stream_handle(stream))

        (times,), _ = driver.event_times([launch], args.warmup, args.reps, stream)
        driver.synchronize(stream)
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
        record = results_header(["ozaki-cutlass", *args.argv]) | {
            "host": platform.node(), "capability": compute_capability(), "size": m, "warmup": args.warmup,
            "reps": args.reps, "results": results}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=2)
    bad = [r for r in results if r["check"] != "ok"]
    return 1 if bad else 0


def add_int8_parser(sub) -> None:
    p = sub.add_parser("bench-int8", help="time the generated INT8 GEMMs against cuBLASLt (GPU)")
    p.add_argument("--arch", default="sm_90a", choices=["sm_90a", "sm_80"])
    p.add_argument("--variants", default=None, help="glob over the full catalog (default: the default set)")
    p.add_argument("--size", type=positive_int, default=8192)
    p.add_argument("--warmup", type=nonnegative_int, default=5)
    p.add_argument("--reps", type=positive_int, default=20)
    p.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (0 or more)")
    p.add_argument("--json", default=None, help="write the results here as JSON")
    p.set_defaults(handler=int8_main)
