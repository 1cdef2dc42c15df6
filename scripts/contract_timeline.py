"""The kernel timeline of a default (accuracy contract) call against explicit counts, on
the GPU (CUPTI through torch.profiler; needs torch and cupy):

  python scripts/contract_timeline.py N [--k K] [--show CONFIG ...]

CuPy operands N x K and K x N, phi = 0.5, fused path. First the configurations
("contract": the default call, policy "emulate"; "16fast": 16 moduli fast; "15acc": 15
moduli accurate) timed with CUDA events in 7 alternating rounds on fresh inputs (medians,
ms), then, for each CONFIG shown (default: all three), one call profiled: each kernel and
copy with its start, the gap since the previous one ended (negative: it overlapped) and
its duration, in microseconds. Gaps after the contract's read of its certificate are the
GPU waiting for the host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile

CONFIGS = {"contract": {"policy": "emulate", "path": "fused"},
           "16fast": {"moduli": 16, "mode": "fast", "path": "fused"},
           "15acc": {"moduli": 15, "mode": "accurate", "path": "fused"}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("n", type=int, help="m = n")
    ap.add_argument("--k", type=int, default=None, help="k (default n)")
    ap.add_argument("--show", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    args = ap.parse_args(argv)
    import cupy as cp
    from torch.profiler import ProfilerActivity, profile

    import ozaki_cutlass

    n, k, shown = args.n, args.k or args.n, args.show
    rng = cp.random.default_rng(7)

    def mat(r, c):
        return (rng.random((r, c)) - 0.5) * cp.exp(0.5 * rng.standard_normal((r, c)))

    a, b = mat(n, k), mat(k, n)
    for _ in range(3):  # warm-up; the third contract call may run its key's guess
        for c in CONFIGS.values():
            ozaki_cutlass.gemm(a, b, **c)
    ev = [cp.cuda.Event() for _ in range(2)]
    times = {c: [] for c in CONFIGS}
    for _ in range(7):
        for name, c in CONFIGS.items():
            a2, b2 = mat(n, k), mat(k, n)
            cp.cuda.Device().synchronize()
            ev[0].record()
            ozaki_cutlass.gemm(a2, b2, **c)
            ev[1].record()
            ev[1].synchronize()
            times[name].append(cp.cuda.get_elapsed_time(ev[0], ev[1]))
    print({c: round(statistics.median(v), 3) for c, v in times.items()})
    t = {}
    ozaki_cutlass.gemm(a, b, timings=t, **CONFIGS["contract"])
    print("contract timings", t)
    for name in shown:
        cp.cuda.Device().synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ozaki_cutlass.gemm(a, b, **CONFIGS[name])
            cp.cuda.Device().synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            events = json.load(open(f.name))["traceEvents"]
        events = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                        key=lambda e: e["ts"])
        if not events:
            print(f"--- {name}: no kernels traced")
            continue
        t0 = prev = events[0]["ts"]
        busy = 0.0
        print(f"--- {name} n={n} k={k}")
        for e in events:
            print(f"  {e['ts'] - t0:9.1f} gap {e['ts'] - prev:7.1f} dur {e['dur']:8.1f}  {e['name'][:90]}")
            prev = max(prev, e["ts"] + e["dur"])
            busy += e["dur"]
        print(f"  span {prev - t0:.1f} us, busy {busy:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
