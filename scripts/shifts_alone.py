"""The accurate shifts alone (device run), timed against one read of the bound.
The stage reads the coarse bound G (m x n int32, the coarse GEMM's output) once where its
rows fit a block's registers (1024 <= n <= 16384; else a row pass and a column pass) and
writes mu and nu (`accurate_shifts_i32`). Its floor: one read of G, 4 m n bytes, at the
copy rate measured in the same process (cupy.copyto of 2 GiB).
Inputs: a random bound (positive entries below 2^30, a tenth of them 0: absent), exponents
and fast shifts spread over a few hundred, the bound exponent of --moduli moduli; the
leading dimension n rounded up to 4 (the calls' padded output). --rounds rounds of
back-to-back launches, CUDA events, medians.
--other TREE [TREE ...]: also the stage kernels built from each TREE's templates (another
checkout, e.g. `git archive BRANCH templates | tar -x -C TREE`;
kernels.stages.stages_from_tree; "other", or each by its TREE where there are several), all
in alternation with this checkout's round by round; every run's mu and nu are compared with
this checkout's (exit 1 where they differ).
    python scripts/shifts_alone.py [--shapes 16384x1024 4096 2048] [--moduli 15] [--rounds 7]
        [--other TREE ...] [--json FILE]"""

import argparse

from ozaki_cutlass.numerics.moduli import crt_constants, padded_n, shift_work_words
from ozaki_cutlass.tools.arguments import matrix_shape, moduli_count
from ozaki_cutlass.tools.measure import add_alone_arguments, alone_setup, alternating_medians, write_rows

DEFAULT_SHAPES = ("16384x1024", "4096", "2048", "8192", "1000x1024")


def floor_ms(m: int, n: int, gbps: float) -> float:
    """One read of the int32 bound, 4 m n bytes, at ``gbps`` GB/s, in ms."""
    return 4 * m * n / gbps / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", type=matrix_shape, default=[matrix_shape(s) for s in DEFAULT_SHAPES])
    ap.add_argument("--moduli", type=moduli_count, default=15, help="the count whose bound exponent the stage takes")
    add_alone_arguments(ap, rounds=7)
    args = ap.parse_args(argv)

    import cupy as cp

    libs, gbps = alone_setup(args.other)
    pb = crt_constants(args.moduli).bound_exponent
    rng = cp.random.default_rng(20261205)
    rows = []
    for m, n in args.shapes:
        ld = padded_n(n)  # the coarse INT8 GEMM's int32 rows
        g = rng.integers(1, 2**30, (m, ld), dtype=cp.int32)
        g[rng.random((m, ld)) < 0.1] = 0
        ea, eb = rng.integers(-300, 300, m, dtype=cp.int32), rng.integers(-300, 300, n, dtype=cp.int32)
        muf, nuf = rng.integers(-200, 200, m, dtype=cp.int32), rng.integers(-200, 200, n, dtype=cp.int32)
        work = cp.empty(shift_work_words(m, n), cp.int32)
        outs = {name: (cp.empty(m, cp.int32), cp.empty(n, cp.int32)) for name in libs}

        def launch(name):
            mu, nu = outs[name]
            return lambda: libs[name].accurate_shifts_i32(g.data.ptr, ld, m, n, ea.data.ptr, eb.data.ptr,
                                                          muf.data.ptr, nuf.data.ptr, pb, mu.data.ptr,
                                                          nu.data.ptr, work.data.ptr, 0)
        calls = {name: launch(name) for name in libs}
        for f in calls.values():
            f()
        cp.cuda.runtime.deviceSynchronize()
        same = {name: all(bool(cp.array_equal(x, y)) for x, y in zip(outs[name], outs["this"])) for name in libs}
        reps = max(3, int(2e9 // (4 * m * n)))
        medians = alternating_medians(calls, args.rounds, reps)
        fl = floor_ms(m, n, gbps)
        for name in libs:
            ms = medians[name]
            rows.append({"m": m, "n": n, "moduli": args.moduli, "kernels": name, "ms": ms, "floor_ms": fl,
                         "x_floor": ms / fl, "same_bits": same[name]})
            print(f"{m}x{n}{'' if len(libs) == 1 else ' ' + name:6s} {ms * 1e3:.1f} us ({ms / fl:.2f}x floor "
                  f"{fl * 1e3:.1f})" + ("" if same[name] else "  BITS DIFFER"))
        del g, work, outs
    if args.json:
        write_rows(args.json, rows, copy_gbps=gbps, other=args.other)
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
