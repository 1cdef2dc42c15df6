"""A call timed alone against calls back to back (device run): how much of an emulated
call's time, as the bench measures it, the GPU spends waiting for the host.

The bench times each call alone, between CUDA events recorded around the whole Python call
(as a user sees it). The GPU then idles while the host validates, dispatches and launches
the first kernels. For each shape this prints, in ms per call (medians of --reps):
  alone         events around one call, the GPU drained before it (the bench's metric)
  back to back  events around --reps calls enqueued one after another, divided by --reps
  phases        the sum of the call's phases (``timings=``: the GPU's own time)
  enqueue       host time until the call returns (perf_counter; nothing in it waits)
and the TFLOP/s of the first two. With --profile N, cProfile of N calls of the first shape.
    python scripts/call_overhead.py [--shapes 4096 8192x8192x2048] [--moduli 15]
        [--mode accurate] [--path fused] [--reps 15] [--profile 30] [--json FILE]"""

import argparse
import cProfile
import io
import pstats
import statistics
import time

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.tools.measure import write_rows

DEFAULT_SHAPES = ("4096", "8192x8192x2048", "2048x2048x16384", "8192")


def parse_shape(text: str) -> tuple[int, int, int]:
    """"N" (a square) or "MxNxK"."""
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        return parts[0], parts[0], parts[0]
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: expected N or MxNxK, sizes >= 1")
    return parts[0], parts[1], parts[2]


def row(shape: tuple[int, int, int], alone: list, back_to_back: float, phases: list, enqueue: list) -> dict:
    """One shape's medians (ms) and rates (TFLOP/s)."""
    m, n, k = shape
    flop = 2.0 * m * n * k
    a, p, e = statistics.median(alone), statistics.median(phases), statistics.median(enqueue)
    return {"m": m, "n": n, "k": k, "alone_ms": a, "back_to_back_ms": back_to_back, "phases_ms": p,
            "enqueue_ms": e, "waiting_ms": a - back_to_back, "alone_tflops": flop / a / 1e9,
            "back_to_back_tflops": flop / back_to_back / 1e9}


def format_row(r: dict) -> str:
    return (f"{r['m']}x{r['n']}x{r['k']}: alone {r['alone_ms']:.3f} ms ({r['alone_tflops']:.1f} TFLOP/s), "
            f"back to back {r['back_to_back_ms']:.3f} ({r['back_to_back_tflops']:.1f}), phases "
            f"{r['phases_ms']:.3f}, enqueue {r['enqueue_ms']:.3f}; the GPU waits {r['waiting_ms']:.3f} ms per call")


def measure(shape, kw: dict, reps: int) -> dict:
    import cupy as cp

    m, n, k = shape
    rng = cp.random.default_rng(m + 3 * n + 7 * k)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    sync = cp.cuda.Device().synchronize
    for _ in range(3):
        ozaki_cutlass.gemm(a, b, **kw)
    sync()
    timer = driver.EventTimer(0)  # CuPy's current stream: the legacy default one
    alone, phases, enqueue = [], [], []
    for _ in range(reps):
        timer.start()
        ozaki_cutlass.gemm(a, b, **kw)
        alone.append(timer.stop())
        t0 = time.perf_counter()
        ozaki_cutlass.gemm(a, b, **kw)
        enqueue.append(1e3 * (time.perf_counter() - t0))
        sync()
        t = {}
        ozaki_cutlass.gemm(a, b, timings=t, **kw)
        phases.append(t["total"])
    timer.start()
    for _ in range(reps):
        ozaki_cutlass.gemm(a, b, **kw)
    return row(shape, alone, timer.stop() / reps, phases, enqueue)


def profile(shape, kw: dict, calls: int) -> str:
    import cupy as cp

    m, n, k = shape
    a, b = cp.random.default_rng(1).standard_normal((m, k)), cp.random.default_rng(2).standard_normal((k, n))
    ozaki_cutlass.gemm(a, b, **kw)
    cp.cuda.Device().synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        ozaki_cutlass.gemm(a, b, **kw)
        cp.cuda.Device().synchronize()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", type=parse_shape, default=[parse_shape(s) for s in DEFAULT_SHAPES])
    p.add_argument("--moduli", type=int, default=15)
    p.add_argument("--mode", default="accurate", choices=("accurate", "fast"))
    p.add_argument("--path", default="fused", choices=("fused", "staged"))
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile N calls of the first shape")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    kw = {"moduli": args.moduli, "mode": args.mode, "path": args.path}
    rows = []
    for shape in args.shapes:
        rows.append(measure(shape, kw, args.reps))
        print(format_row(rows[-1]), flush=True)
    if args.profile:
        print(profile(args.shapes[0], kw, args.profile))
    if args.json:
        write_rows(args.json, rows, settings=kw, reps=args.reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
