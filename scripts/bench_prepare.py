"""Operand reuse, before and after (issue 6 item 4): one A against fresh B's, the
unprepared call vs the call with A prepared once (ozaki_cutlass.prepare), same run.
CUDA events around the whole call, warm-up, median; phi = 0.5 inputs made on the GPU.
    python scripts/bench_prepare.py [--sizes 4096 8192] [--json FILE]"""

import argparse
import statistics

import ozaki_cutlass
from ozaki_cutlass.device.driver import event_times
from ozaki_cutlass.tools.measure import write_rows


def timed(fn, warmup=2, reps=5):
    (times,), _ = event_times([fn], warmup, reps)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import cupy as cp

    rows = []
    print(f"{'n':>6} {'mode':>9} {'plain ms':>9} {'prepared ms':>12} {'speed-up':>9} {'prepare ms':>11}  same bits")
    for n in args.sizes:
        rs = cp.random.default_rng(n)
        a = (rs.random((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
        b = (rs.random((n, n)) - 0.5) * cp.exp(0.5 * rs.standard_normal((n, n)))
        for mode in ("fast", "accurate"):
            plain = timed(lambda: ozaki_cutlass.gemm(a, b, moduli=15, mode=mode, path="staged"))
            prep_ms = timed(lambda: ozaki_cutlass.prepare(a, "left", moduli=15, mode=mode), 1, 3)
            pa = ozaki_cutlass.prepare(a, "left", moduli=15, mode=mode)
            reused = timed(lambda: ozaki_cutlass.gemm(pa, b))
            same = bool(cp.array_equal(ozaki_cutlass.gemm(pa, b).view(cp.int64),
                                       ozaki_cutlass.gemm(a, b, moduli=15, mode=mode, path="staged").view(cp.int64)))
            rows.append({"n": n, "mode": mode, "plain_ms": plain, "prepared_ms": reused, "prepare_ms": prep_ms,
                         "same_bits": same})
            print(f"{n:6d} {mode:>9} {plain:9.2f} {reused:12.2f} {plain / reused:9.2f} {prep_ms:11.2f}  {same}",
                  flush=True)
    if args.json:
        write_rows(args.json, rows, moduli=15)


if __name__ == "__main__":
    main()
