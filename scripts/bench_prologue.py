"""The tile-local prologue prototype against the staged path (issue 6 item 3), same run.

For each n (square n x n x n, phi-family inputs made on the GPU, fresh per size): the
staged path's residues + INT8 GEMM phases against the prologue kernel (which replaces
both), and whole calls of both paths. Whole calls: CUDA events around the Python call,
warm-up, median (ozaki_cutlass.device.driver.event_times); phases: the medians of calls
with timings= (which synchronize). Also checks that both paths give the same bits.
    python scripts/bench_prologue.py [--sizes 4096 8192 16384] [--moduli N] [--mode accurate]
                                     [--warmup 2] [--reps 5] [--json FILE]
"""

import argparse
import functools
import statistics

import ozaki_cutlass
from ozaki_cutlass.device import driver
from ozaki_cutlass.options import resolve_moduli
from ozaki_cutlass.tools.arguments import nonnegative_int, positive_int
from ozaki_cutlass.tools.measure import write_rows


def _inputs(n, phi, seed):
    import cupy as cp

    rs = cp.random.default_rng(seed)
    a = (rs.random((n, n)) - 0.5) * cp.exp(phi * rs.standard_normal((n, n)))
    b = (rs.random((n, n)) - 0.5) * cp.exp(phi * rs.standard_normal((n, n)))
    return a, b


def _measure(a, b, path, moduli, mode, warmup, reps, phase_reps):
    """One path's whole calls (events around each, median) and its phases (the medians of
    ``phase_reps`` calls with timings=, which synchronize); and its last result."""
    call = functools.partial(ozaki_cutlass.gemm, a, b, moduli=moduli, mode=mode, path=path)
    (times,), (out,) = driver.event_times([call], warmup, reps)
    phases = []
    for _ in range(phase_reps):
        phases.append({})
        call(timings=phases[-1])
    names = sorted({name for t in phases for name, v in t.items() if isinstance(v, float)})
    med = {name: statistics.median(t.get(name, 0.0) for t in phases) for name in names}
    return {"kernel": phases[-1]["kernel"], "call_ms": statistics.median(times), "phases_ms": med}, out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384])
    p.add_argument("--moduli", type=int, default=None, help="moduli count (default: the package default)")
    p.add_argument("--mode", choices=["fast", "accurate"], default="accurate")
    p.add_argument("--phi", type=float, default=0.5)
    p.add_argument("--warmup", type=nonnegative_int, default=2)
    p.add_argument("--reps", type=positive_int, default=5)
    p.add_argument("--phase-reps", type=positive_int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the results here as JSON")
    args = p.parse_args()
    import cupy as cp

    driver.ensure_context()
    moduli = resolve_moduli(args.moduli)
    print(f"prologue prototype vs staged, moduli = {moduli}, mode = {args.mode}, phi = {args.phi}; "
          f"whole calls: median of {args.reps} after {args.warmup} warm-up; phases: median of {args.phase_reps}")
    print(f"{'n':>6} {'staged resid+int8 ms':>21} {'prologue ms':>12} {'ratio':>6} {'int8 TOP/s':>11} "
          f"{'prologue TOP/s':>15} {'staged call':>12} {'prologue call':>14}  same bits")
    rows = []
    for n in args.sizes:
        row = {"n": n, "moduli": moduli, "mode": args.mode, "phi": args.phi}
        try:
            a, b = _inputs(n, args.phi, args.seed + n)
            staged, out_s = _measure(a, b, "staged", moduli, args.mode, args.warmup, args.reps, args.phase_reps)
            prologue, out_p = _measure(a, b, "prologue", moduli, args.mode, args.warmup, args.reps,
                                       args.phase_reps)
        except (cp.cuda.memory.OutOfMemoryError, MemoryError) as exc:
            row["skipped"] = f"out of memory: {exc}"
            print(f"{n:>6} skipped: {row['skipped']}", flush=True)
            rows.append(row)
            cp.get_default_memory_pool().free_all_blocks()
            continue
        ops = 2.0 * moduli * n ** 3  # the INT8 work of one call (all moduli)
        staged_ms = staged["phases_ms"]["residues"] + staged["phases_ms"]["int8_gemm"]
        prologue_ms = prologue["phases_ms"]["prologue_gemm"]
        row |= {"staged": staged, "prologue": prologue,
                "staged_residues_int8_ms": staged_ms, "prologue_kernel_ms": prologue_ms,
                "ratio": prologue_ms / staged_ms,
                "int8_tops": ops / staged["phases_ms"]["int8_gemm"] / 1e9,
                "prologue_tops": ops / prologue_ms / 1e9,
                "bit_identical": bool(cp.array_equal(out_s.view(cp.int64), out_p.view(cp.int64)))}
        rows.append(row)
        print(f"{n:>6} {staged_ms:21.2f} {prologue_ms:12.2f} {row['ratio']:6.2f} {row['int8_tops']:11.0f} "
              f"{row['prologue_tops']:15.0f} {staged['call_ms']:12.2f} {prologue['call_ms']:14.2f}  "
              f"{row['bit_identical']}", flush=True)
        del a, b, out_s, out_p
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        from ozaki_cutlass.device.arch import compute_capability

        write_rows(args.json, rows, capability=compute_capability())
    return 0 if all(r.get("bit_identical", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
