"""The combine of one-byte residues alone (device run): the stage kernel that finishes the
fused path (`combine_unscale` of one-modulus groups, crt_residue_mma_kernel) on random
residue bytes, timed against its memory floor, in the ways a call can launch it:
  calls      a non-finite source whose counts flag nothing, beta 0 (what a call on finite
             operands launches: the scan's counts always travel with it)
  no-source  no non-finite source, beta 0
  beta       a non-finite source and beta != 0 (c read: the general store path)
Each case in alternation with the others, --rounds rounds of back-to-back launches, CUDA
events, medians. --other TREE [TREE ...]: each case also with the stage kernels built from
each TREE's templates (another checkout, e.g. `git archive BRANCH templates | tar -x -C
TREE`; kernels.stages.stages_from_tree; "other", or each by its TREE where there are
several), all in alternation with this checkout's, outputs compared bit for bit with this
checkout's (exit 1 where they differ); --cases to time fewer. The floor: count + 8 bytes per
entry (+ 8 read with beta) at the copy rate measured in the same process (cupy.copyto of 2
GiB). The calls and no-source outputs are checked bit for bit against each other (beta's
output differs by its c term: not compared).
    python scripts/combine_alone.py [--shapes 4096 8192 16384x1024] [--moduli 15 16 17]
        [--rounds 5] [--cases calls] [--other TREE ...] [--json FILE]"""

import argparse

from ozaki_cutlass.kernels.stages import CNonfiniteSource
from ozaki_cutlass.tools.arguments import matrix_shape, moduli_count
from ozaki_cutlass.numerics.moduli import crt_constants, padded_n
from ozaki_cutlass.tools.measure import add_alone_arguments, alone_setup, alternating_medians, write_rows

DEFAULT_SHAPES = ("4096", "8192", "16384", "16384x1024", "2048")
CASES = ("calls", "no-source", "beta")


def floor_ms(m: int, n: int, count: int, case: str, gbps: float) -> float:
    """The bytes the combine must move (count residue bytes read, 8 written, 8 more read
    for beta's c) at ``gbps`` GB/s, in ms."""
    per_entry = count + 8 + (8 if case == "beta" else 0)
    return per_entry * m * n / gbps / 1e6


def differing_runs(outs: dict, equal) -> set:
    """The (kernels, case) runs whose output differs from the one it must equal: every run
    from this checkout's kernels of its case, and the calls and no-source cases of one
    library from each other (beta's output has its c term: compared only across libraries)."""
    differ = set()
    for (name, case), out in outs.items():
        ref = ("this", case)
        if ref in outs and ref != (name, case) and not equal(outs[ref], out):
            differ.add((name, case))
        if case == "no-source" and (name, "calls") in outs and not equal(outs[(name, "calls")], out):
            differ.update({(name, "calls"), (name, case)})
    return differ


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", type=matrix_shape, default=[matrix_shape(s) for s in DEFAULT_SHAPES])
    ap.add_argument("--moduli", nargs="+", type=moduli_count, default=[15, 16, 17])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    add_alone_arguments(ap, rounds=5)
    args = ap.parse_args(argv)

    import cupy as cp

    libs, gbps = alone_setup(args.other)
    rows = []
    rng = cp.random.default_rng(20261204)
    for m, n in args.shapes:
        ldx = padded_n(n, fused=True)  # the fused path's residue planes
        mu = rng.integers(-60, 60, m, dtype=cp.int32)
        nu = rng.integers(-60, 60, n, dtype=cp.int32)
        cin = rng.standard_normal((m, n))
        zeros_m, zeros_n = cp.zeros(m, cp.int32), cp.zeros(n, cp.int32)
        operand = cp.zeros(16)  # never read: nothing is flagged
        source = CNonfiniteSource(operand.data.ptr, 1, 1, operand.data.ptr, 1, 1, 1, zeros_m.data.ptr,
                                  zeros_n.data.ptr)
        for count in args.moduli:
            consts = crt_constants(count)
            mods = cp.asarray(consts.moduli, cp.int32)[:, None, None]
            planes = (rng.integers(0, 2**30, (count, m, ldx), dtype=cp.int32) % mods).astype(cp.uint8)
            runs = [(name, case) for case in args.cases for name in libs]
            outs = {run: cp.empty((m, n)) for run in runs}

            def launch(run):
                name, case = run
                beta = -0.5 if case == "beta" else 0.0
                nf = None if case == "no-source" else source
                return lambda: libs[name].combine_unscale(planes.data.ptr, [1] * count, m, n, ldx, m * ldx, consts,
                                                          mu.data.ptr, nu.data.ptr, 1.0, beta,
                                                          cin.data.ptr if beta else 0, n, 1, outs[run].data.ptr,
                                                          n, 1, nf, 0)
            calls = {run: launch(run) for run in runs}
            for f in calls.values():
                f()
            cp.cuda.runtime.deviceSynchronize()
            differ = differing_runs(outs, lambda a, b: bool(cp.array_equal(a.view(cp.int64), b.view(cp.int64))))
            reps = max(3, int(2e9 // ((count + 8) * m * n)))
            medians = alternating_medians(calls, args.rounds, reps)
            for name, case in runs:
                ms = medians[(name, case)]
                fl = floor_ms(m, n, count, case, gbps)
                rows.append({"m": m, "n": n, "moduli": count, "case": case, "kernels": name, "ms": ms,
                             "floor_ms": fl, "x_floor": ms / fl, "same_bits": (name, case) not in differ})
                print(f"{m}x{n} {count} moduli {case:9s}{'' if len(libs) == 1 else ' ' + name:6s} {ms:.3f} ms "
                      f"({ms / fl:.2f}x floor {fl:.3f})" + ("  BITS DIFFER" if (name, case) in differ else ""))
            del planes, outs
    if args.json:
        write_rows(args.json, rows, copy_gbps=gbps, other=args.other)
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
